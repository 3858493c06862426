"""Which catalog products a shopper's phrase means: "the Ridgeline tent", "two of the regular down bags", "it",
"both", "the cheaper one".

A phrase that points back ("it", "those", "the cheaper one") means the cards of the latest answer; any other is
looked up in the catalog (``catalog.search``), and the variant is the one whose option values the phrase names
("regular", "navy"), else an available one. Every price and stock level comes from the rows read here.
Blocking (database, embeddings): a worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from catalog.grounding import ProductFacts, card, product_facts
from catalog.models import Store
from catalog.search import MATCH_THRESHOLD, search

from .. import comparison
from ..comparison import shown_products

# Words that point at what was shown rather than name a product.
_ALL_SHOWN = re.compile(r"^(?:both|all|them|those|these|they|both of them|all of them|all three|the two|the three)$")
_ONE_SHOWN = re.compile(r"^(?:it|this|that|this one|that one|the one|one)$")
_CHEAPER = re.compile(r"(?:the )?(?:cheap(?:er|est)|less expensive|least expensive)(?: one)?")
_PRICIER = re.compile(r"(?:the )?(?:pricier|priciest|more expensive|most expensive)(?: one)?")
_ORDINALS = {"first": 0, "second": 1, "third": 2, "last": -1}
_ORDINAL = re.compile(r"(?:the )?(first|second|third|last)(?: one)?")
# "the bigger one", "the small one", "the lightest", "the warmer one": a measure of each shown product's text, and
# which end of it.
_BY_VOLUME, _BY_WEIGHT, _BY_WARMTH = comparison.volume_of, comparison.weight_of, comparison.comfort_temperature
_MEASURED = {
    "bigger": (_BY_VOLUME, True), "biggest": (_BY_VOLUME, True), "big": (_BY_VOLUME, True),
    "larger": (_BY_VOLUME, True), "largest": (_BY_VOLUME, True), "large": (_BY_VOLUME, True),
    "smaller": (_BY_VOLUME, False), "smallest": (_BY_VOLUME, False), "small": (_BY_VOLUME, False),
    "lighter": (_BY_WEIGHT, False), "lightest": (_BY_WEIGHT, False),
    "heavier": (_BY_WEIGHT, True), "heaviest": (_BY_WEIGHT, True),
    "warmer": (_BY_WARMTH, False), "warmest": (_BY_WARMTH, False),  # the lower comfort temperature
}  # fmt: skip
_MEASURED_ONE = re.compile(rf"(?:the )?({'|'.join(_MEASURED)})(?: one)?")
# Every phrase that points at what was shown (each matched whole): ``_from_shown`` tells which products it means.
_POINTING = (_ALL_SHOWN, _ONE_SHOWN, _CHEAPER, _PRICIER, _MEASURED_ONE, _ORDINAL)
_LEADING = re.compile(r"^(?:the|a|an|one|your|my|of|some|pack of|packs of|pair of|pairs of)\s+")


@dataclass(frozen=True)
class Product:
    """One product as the catalog has it now: its card (the variant's sku, price, stock) and its facts."""

    card: dict[str, Any]
    facts: ProductFacts


def _cleaned(phrase: str) -> str:
    phrase = re.sub(r"[^\w\s'-]", " ", phrase.lower()).strip()
    previous = None
    while previous != phrase:
        previous, phrase = phrase, _LEADING.sub("", phrase).strip()
    return phrase


def shown(store: Store, cards: Sequence[dict[str, Any]]) -> list[Product]:
    """The latest answer's cards, read again from the catalog (``comparison.shown_products``)."""
    return [Product(item, facts) for item, facts, _ in shown_products(store, cards)]


def _from_shown(phrase: str, products: list[Product]) -> list[Product] | None:
    """The shown products a pointing phrase means, or None when the phrase names something instead."""
    if not products:
        return None
    if _ALL_SHOWN.match(phrase):
        return products
    if _ONE_SHOWN.match(phrase):
        return products[:1]
    if _CHEAPER.fullmatch(phrase):
        return [min(products, key=lambda p: p.facts.price)]
    if _PRICIER.fullmatch(phrase):
        return [max(products, key=lambda p: p.facts.price)]
    measured = _MEASURED_ONE.fullmatch(phrase)
    if measured:  # "the bigger one": by the volume or weight each one's text gives, when every one gives it
        measure, largest = _MEASURED[measured.group(1)]
        figures = [measure(p.facts) for p in products]
        if len(products) == 1:
            return products  # the one shown is the one meant
        if all(figures):
            pick = (max if largest else min)(zip(figures, products), key=lambda pair: pair[0][0])
            return [pick[1]]
        return None
    ordinal = _ORDINAL.fullmatch(phrase)
    if ordinal and abs(_ORDINALS[ordinal.group(1)]) < len(products) + (ordinal.group(1) == "last"):
        return [products[_ORDINALS[ordinal.group(1)]]]
    return None


def is_pointing(phrase: str) -> bool:
    """Whether ``phrase`` points at what was shown ("it", "the warmer one", "both") rather than names a product."""
    cleaned = _cleaned(phrase)
    return any(pattern.fullmatch(cleaned) for pattern in _POINTING)


def pointed_at(store: Store, phrase: str, cards: Sequence[dict[str, Any]]) -> list[Product] | None:
    """The shown products a phrase points at ("it", "those", "the cheaper one"), or None when it names something
    else or nothing was shown."""
    return _from_shown(_cleaned(phrase), shown(store, cards)) if cards else None


def resolve(store: Store, phrase: str, cards: Sequence[dict[str, Any]] = ()) -> list[Product]:
    """The products ``phrase`` means: several for "both" or "those", one for a name, none when the catalog has
    nothing called that."""
    cleaned = _cleaned(phrase)
    if not cleaned:
        return []
    pointed = pointed_at(store, cleaned, cards)
    if pointed is not None:
        return pointed
    hits = [hit for hit in search(cleaned, 3, store=store) if hit.variant is not None and hit.score >= MATCH_THRESHOLD]
    if not hits:
        return []
    return [Product(card(hits[0]), product_facts(hits[0]))]
