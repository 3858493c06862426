"""``suggest_gifts``: products to give someone, from what they like or do, within a budget: "a gift for my dad
who loves hiking, around 50 bucks", "stocking stuffer under 30 for someone who camps".

A gift request names a person and an activity, rarely a product, so the catalog is searched for the activity
with the weaker bar of a suggestion (``catalog.grounding.ideas``), in stock only (a gift is bought now), and
within the budget. The answer is the products' composition (cards, the opening); when nothing fits, a reply
that asks what the person likes, never "we don't carry <their words>".
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field

from catalog.grounding import ideas

from ..composition import NO_MATCH, PRODUCTS, Composition
from ..opening import money
from .registry import Context, register
from .search import Price, composition_of_ideas


class GiftArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interests: str = Field(min_length=1, max_length=200,
                           description="what the person likes or does, in English catalog words ('hiking', 'camping')")
    # Optional but never null (see SearchArguments).
    min_price: Price = Field(None, description="lowest price, only if the shopper gives one")  # type: ignore[assignment]
    max_price: Price = Field(None, description="highest price or budget, only if the shopper gives one")  # type: ignore[assignment]


@register(
    "suggest_gifts",
    "Suggest products to give someone, from what they like or do and the shopper's budget. Use for gifts and "
    "presents ('a gift for my dad who loves hiking', 'stocking stuffer under 30').",
    GiftArguments,
    examples=(
        ("a gift for my dad who loves hiking, around 50 bucks", {"interests": "hiking", "max_price": 65}),
        ("Un regalo para mi hermana que corre, menos de 100", {"interests": "running", "max_price": 100}),
    ),
    topic=PRODUCTS,
)
def suggest_gifts(context: Context, arguments: GiftArguments) -> Composition:
    found = ideas(context.store, arguments.interests, min_price=arguments.min_price, max_price=arguments.max_price)
    if not found.found:
        return Composition(NO_MATCH, reply=_no_gift_reply(context, arguments))
    return composition_of_ideas(found)


def _no_gift_reply(context: Context, arguments: GiftArguments) -> str:
    if arguments.max_price is not None:
        budget = money(arguments.max_price, context.store.currency)
        opening = _("I found no gift in stock under {limit} for that.").format(limit=budget)
    else:
        opening = _("I found no gift in stock for that.")
    return f"{opening} {_('Tell me what they like doing (hiking, camping, running...), or ask for a person.')}"
