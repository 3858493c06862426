"""``which_has``: which of the products just shown has what the shopper asks: "which one has a laptop sleeve?"
after the backpacks, "which one is freestanding?" after the tents.

Each shown product's description is read for a sentence with a word the question asks about (as
``product_details`` reads one product's: the product's own name left out, "collapsible" meeting "collapse"); a
sentence that says the opposite ("No." by ``opening.settles``) does not count. The answer quotes each product's
sentence, its card first (the others shown after it); when none has one, it says the catalog does not say it of
any of them, never a guess.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field

from ..composition import NO_MATCH, Composition, no_match_reply
from ..opening import listing, settles
from .details import ASK_A_PERSON, DETAILS, sentence_sharing
from .references import Product, shown
from .registry import Context, register


class WhichArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(
        min_length=1, max_length=200, description="what one of the shown products should have or be, in English"
    )


def having(products: list[Product], question: str) -> list[tuple[Product, str]]:
    """The products whose description says what ``question`` asks, each with the sentence that says it."""
    found = []
    for product in products:
        sentence = sentence_sharing(product.facts, question)
        if sentence is not None and settles(question, f"{product.facts.title}: {sentence}") != "No.":
            found.append((product, sentence if sentence[-1] in ".!?" else f"{sentence}."))
    return found


@register(
    "which_has",
    "Say which of the products just shown has a feature or property the shopper asks about ('which one has a "
    "laptop sleeve?', 'which of them is freestanding?').",
    WhichArguments,
    examples=(
        ("Which one has a laptop sleeve?", {"question": "has a laptop sleeve"}),
        ("¿Cuál es autoportante?", {"question": "is freestanding"}),
    ),
)
def which_has(context: Context, arguments: WhichArguments) -> Composition:
    products = shown(context.store, context.shown)
    if not products:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    found = having(products, arguments.question)
    if not found:
        titles = listing([p.facts.title for p in products], "or")
        unsaid = _("Our catalog doesn't say that of the {titles}.").format(titles=titles)
        return Composition(DETAILS, reply=f"{unsaid} {_(ASK_A_PERSON)}", cards=[p.card for p in products],
                           products=[p.facts for p in products])
    quoted = [_("The {title}: {sentence}").format(title=p.facts.title, sentence=s) for p, s in found]
    # Those that have it first; the others stay shown, so "both" and "the cheaper one" still mean what they did.
    ordered = [p for p, _s in found] + [p for p in products if all(p is not f for f, _s in found)]
    return Composition(DETAILS, reply=" ".join(quoted), cards=[p.card for p in ordered],
                       products=[p.facts for p in ordered])
