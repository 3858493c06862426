"""``product_details``: a question about one product: "how long does its battery last?", "do you have it in L?",
"does the Summit backpack have a rain cover?".

The product is named or pointed at ("it": the latest answer's first card). Its catalog row is read again with
the question's words, so the card is the variant the question names ("in L"), and the opening answers from the
product's own sentences (``opening``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..composition import MODEL, NO_MATCH, Composition, no_match_reply
from .references import resolve
from .registry import Context, register


class DetailsArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    product: str = Field(min_length=1, max_length=120, description="the product's name, or 'it' for the one just shown")
    question: str = Field("", max_length=200, description="what the shopper wants to know about it, in English")


@register(
    "product_details",
    "Answer a question about one product (its features, materials, battery, warmth, weight, sizes or colours in "
    "stock): by name, or 'it' for the product just shown.",
    DetailsArguments,
    examples=(
        ("How long does its battery last?", {"product": "it", "question": "how long does the battery last"}),
        ("Do you have the fleece in large?", {"product": "fleece jacket", "question": "in size L"}),
    ),
)
def product_details(context: Context, arguments: DetailsArguments) -> Composition:
    found = resolve(context.store, arguments.product, context.shown)
    if not found:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    product = found[0]
    # The same product read with the question's words: the variant it names, the facts line for the prompt.
    asked = f"{product.facts.title} {arguments.question or context.text}"
    retrieved = context.retrieve(context.store, asked, k=1)
    if retrieved.products and retrieved.products[0].title == product.facts.title:
        return Composition(MODEL, facts=retrieved.facts, cards=retrieved.cards[:1], products=retrieved.products[:1])
    # The grounding's filters may drop the product ("in size L, charcoal"); the variant the words name still
    # comes from the catalog search, never the default variant shown as if it were the one asked about.
    named = resolve(context.store, asked)
    if named and named[0].facts.title == product.facts.title:
        product = named[0]
    facts = f"Product from the catalog:\n1. {product.facts.text()}"
    return Composition(MODEL, facts=facts, cards=[product.card], products=[product.facts])
