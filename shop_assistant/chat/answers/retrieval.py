"""What the catalog knows about a shopper's message: facts for the prompt, cards for the widget.

Cards come from catalog rows (``catalog.grounding``), never from model text, so a price or a stock level the
shopper sees is the database's. Blocking (database, embeddings): call from a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from catalog.grounding import ProductFacts, ground
from catalog.models import Store
from catalog.passages import Match

CARD_FIELDS = ("sku", "title", "price", "currency", "url", "image", "in_stock")


@dataclass(frozen=True)
class Retrieved:
    facts: str = ""
    cards: list[dict[str, Any]] = field(default_factory=list)
    quotes: list[dict[str, str]] = field(default_factory=list)  # {"title", "text"}: policy sentences, verbatim
    found: bool = False  # a product or a store document matched
    products: list[ProductFacts] = field(default_factory=list)  # the catalog's facts about each card's product
    answers: list[Match] = field(default_factory=list)  # the passages of the store's documents that answer


def protocol_card(raw: dict[str, Any]) -> dict[str, Any]:
    """Only the protocol's fields, with JSON-safe values (prices as strings: Decimal, never float rounding)."""
    card = {name: raw.get(name) for name in CARD_FIELDS}
    if card["price"] is not None:
        card["price"] = str(card["price"])
    card["in_stock"] = bool(card["in_stock"])
    return card


def retrieve(store: Store, text: str, k: int = 3, **filters: Any) -> Retrieved:
    """``filters``: ``catalog.grounding.ground``'s min_price, max_price and in_stock."""
    grounding = ground(store, text, k=k, **filters)
    if not grounding.found:
        return Retrieved(facts=grounding.facts or "")
    return Retrieved(
        facts=grounding.facts,
        cards=[protocol_card(card) for card in grounding.cards],
        quotes=[{"title": str(q["title"]), "text": str(q["text"])} for q in grounding.quotes],
        found=True,
        products=list(grounding.products),
        answers=list(grounding.answers),
    )
