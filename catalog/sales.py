"""What is on sale: the store's products with a variant priced below its compare-at price, from the rows.

"Anything on sale?" names no product, so search finds nothing for it and the shopper would hear that the store
"doesn't carry anything on sale" while its catalog marks some down. A question about sales in general is answered
from this query instead; one that names a kind of product ("jackets on sale") keeps its search hits, on sale or
not (the answer then says which are)."""

from __future__ import annotations

import re

from django.db.models import F

from .models import Product, Store, Variant
from .passages import content_words
from .search import SearchHit

_ASKS_SALES = re.compile(
    r"\b(?:on sale|sales?|discount(?:s|ed)?|deals?|markdowns?|marked down|clearance|reduced|promotions?|"
    r"special offers?|offers)\b",
    re.IGNORECASE,
)


# Words of a sale question that name no product: "Do you have anything on sale right now?"
_NAMES_NOTHING = content_words(
    "anything something everything items item products product stuff things thing any what which there today now "
    "currently right moment week store shop at the moment got have carry sell running available special"
)


def without_sale_words(text: str) -> str:
    """``text`` with its words about sales taken out: "kayaks on sale" asks for kayaks."""
    return " ".join(_ASKS_SALES.sub(" ", text).split())


def mentions_sales(text: str) -> bool:
    """The message speaks of a sale, a deal or a discount ("any deals under 50?")."""
    return _ASKS_SALES.search(text) is not None


def asks_about_sales(text: str) -> bool:
    """A question about what is on sale that names no kind of product ("any deals?", not "kayaks on sale?")."""
    if not mentions_sales(text):
        return False
    return not content_words(without_sale_words(text)) - _NAMES_NOTHING


def on_sale(store: Store, k: int = 3) -> list[SearchHit]:
    """Up to ``k`` active products that are marked down, one hit each (its marked-down variant, one in stock
    first), the deepest markdown first."""
    variants = (
        Variant.objects.filter(store=store, product__status=Product.Status.ACTIVE, compare_at_price__gt=F("price"))
        .select_related("product")
        .prefetch_related("product__images", "product__variants")
    )
    best: dict[int, Variant] = {}
    for variant in variants:
        held = best.get(variant.product_id)
        if held is None or (variant.in_stock, _markdown(variant)) > (held.in_stock, _markdown(held)):
            best[variant.product_id] = variant
    ranked = sorted(best.values(), key=lambda v: (not v.in_stock, -_markdown(v), v.product.title))
    return [SearchHit(product=v.product, variant=v, score=1.0) for v in ranked[:k]]


def _markdown(variant: Variant) -> float:
    return float((variant.compare_at_price - variant.price) / variant.compare_at_price)
