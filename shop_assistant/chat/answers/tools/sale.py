"""``products_on_sale``: what the catalog marks down now (``catalog.sales``), as cards the model continues."""

from __future__ import annotations

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict

from catalog import sales
from catalog.grounding import card, product_facts

from ..composition import MODEL, NO_MATCH, SALE, Composition
from ..retrieval import protocol_card
from .registry import Context, register


class SaleArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


@register("products_on_sale", "List the products that are on sale (marked down) right now.", SaleArguments,
          examples=(("What's on sale?", {}),), topic=SALE)
def products_on_sale(context: Context, arguments: SaleArguments) -> Composition:
    hits = [hit for hit in sales.on_sale(context.store, 3) if hit.variant is not None]
    if not hits:
        # A fixed reply (NO_MATCH), but no catalog miss: nothing the shopper named is missing from the store.
        return Composition(NO_MATCH, reply=_("Nothing is on sale right now."), topic=SALE)
    products = [product_facts(hit) for hit in hits]
    facts = "Products on sale:\n" + "\n".join(
        f"{i}. {p.title}: {p.price} {p.currency}, was {p.compare_at_price}" for i, p in enumerate(products, 1)
    )
    return Composition(MODEL, facts=facts, cards=[protocol_card(card(hit)) for hit in hits], products=products)
