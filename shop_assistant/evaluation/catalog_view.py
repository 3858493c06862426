"""The store's catalog and documents as the conversation evaluation checks an answer against them: every variant's
price, sale price, stock and options, and each document's body by kind.

Read once per run from the database (``from_store``); the checks themselves (``conversation_checks``) are plain
functions of this view and an answer, so they are tested on hand-made answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

_PARENTHESIS = re.compile(r"\s*\([^)]*\)\s*$")


@dataclass(frozen=True)
class VariantRow:
    sku: str
    handle: str
    price: Decimal
    compare_at: Decimal | None
    in_stock: bool
    options: dict[str, str] = field(default_factory=dict)

    def matches(self, options: dict[str, str]) -> bool:
        """Every option asked for has the value asked for (case-insensitive)."""
        mine = {name.lower(): value.lower() for name, value in self.options.items()}
        return all(mine.get(name.lower()) == value.lower() for name, value in options.items())


@dataclass(frozen=True)
class ProductRow:
    handle: str
    title: str
    variants: tuple[VariantRow, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """How an answer names it: the full title, and the title without a trailing "(3-Pack)" or "(Pair)"."""
        short = _PARENTHESIS.sub("", self.title)
        return (self.title, short) if short != self.title else (self.title,)

    @property
    def prices(self) -> set[Decimal]:
        """Every figure the catalog gives as this product's price: its variants' prices and sale 'was' prices."""
        return {v.price for v in self.variants} | {v.compare_at for v in self.variants if v.compare_at}


@dataclass
class CatalogView:
    products: dict[str, ProductRow]  # by handle
    documents: dict[str, str]  # kind ("returns", "shipping", ...) -> body

    def __post_init__(self) -> None:
        self._by_sku = {v.sku: v for p in self.products.values() for v in p.variants}

    def variant(self, sku: str) -> VariantRow | None:
        return self._by_sku.get(sku)

    def handle_of(self, sku: str) -> str | None:
        variant = self._by_sku.get(sku)
        return variant.handle if variant else None

    def named_in(self, text: str) -> list[ProductRow]:
        """The products ``text`` names by title (case-insensitive; a card's "Title (Sage)" names it too). A
        nickname ("the Ridgeline") is not recognised: the wrong-fact checks then fall back to wider evidence,
        so an unrecognised name can only hide a wrong fact, never make one up."""
        # A whole name: "Men's Stormshell Rain Jacket" is not named by "Women's Stormshell Rain Jacket".
        return [p for p in self.products.values()
                if any(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) for name in p.names)]

    @property
    def all_prices(self) -> set[Decimal]:
        return {price for product in self.products.values() for price in product.prices}

    @classmethod
    def from_store(cls, store: Any) -> CatalogView:
        """The store's active products and its documents, from the database (blocking)."""
        from catalog.models import Product, StoreDocument, Variant

        rows: dict[str, list[VariantRow]] = {}
        titles: dict[str, str] = {}
        variants = Variant.objects.filter(store=store, product__status=Product.Status.ACTIVE).select_related("product")
        for variant in variants:
            product = variant.product
            titles[product.handle] = product.title
            rows.setdefault(product.handle, []).append(
                VariantRow(variant.sku, product.handle, variant.price, variant.compare_at_price, variant.in_stock,
                           variant.options)  # fmt: skip
            )
        products = {handle: ProductRow(handle, titles[handle], tuple(found)) for handle, found in rows.items()}
        documents = dict(StoreDocument.objects.filter(store=store).values_list("kind", "body"))
        return cls(products, documents)
