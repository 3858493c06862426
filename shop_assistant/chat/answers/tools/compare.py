"""``compare_products``: how products differ, from their catalog rows: "which of those is lighter?" about the cards
shown (``comparison``), or "what's the difference between your two sleeping bags?" about products named.

Every figure in the reply is a catalog price or a phrase of the product's own text; a product the catalog says
nothing about on a point is not compared on it. The sentences are translated (the shopper's language); the
descriptions are the store's words.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Literal

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field

from catalog.grounding import card, priced, product_facts
from catalog.passages import content_words
from catalog.search import MATCH_THRESHOLD, search

from .. import comparison
from ..composition import COMPARE, NO_MATCH, Composition, no_match_reply
from ..opening import money
from .capacity import capacity_of, made_for
from .references import Product, resolve, shown
from .search import SearchArguments, search_products
from .total import difference_sentence
from .registry import Context, register


_RANKED = (comparison.PRICE, *comparison.MEASURES)  # attributes a kind's products are ranked on


class CompareArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    products: list[str] = Field(
        default_factory=list, max_length=4,
        description="the products to compare as the shopper names them; empty for the products just shown (with "
        "none shown, everything the store sells)",
    )
    attribute: Literal["price", "weight", "warmth", "waterproof", "size", "volume", "all"] = Field(
        "all", description="what to compare on; 'all' for every difference the catalog shows"
    )
    ascending: bool = Field(
        True, description="for price, weight, warmth or volume: true puts the cheapest, lightest, warmest or "
        "smallest first"
    )


_COUNTS = frozenset(content_words("one two three four five both all"))  # "the two rain jackets": no word of a name


def _kind_of(context: Context, phrase: str) -> list[Product]:
    """Every product of the kind a plural phrase names ("your two sleeping bags"), best first."""
    hits = [h for h in search(phrase, 5, store=context.store) if h.variant is not None and h.score >= MATCH_THRESHOLD]
    if not hits:
        return []
    kind = hits[0].product.product_type
    hits = [h for h in hits if h.product.product_type == kind]
    # "the two rain jackets": the jackets called that, not the down vest of the same type beside them
    named = content_words(phrase) - _COUNTS
    called = [h for h in hits if named <= content_words(f"{h.product.title} {h.product.tags}")]
    return [Product(card(h), product_facts(h)) for h in (called if len(called) > 1 else hits)][:3]


def _products(context: Context, phrases: list[str]) -> list[Product]:
    if len(phrases) == 1:
        return _kind_of(context, phrases[0])
    found: list[Product] = []
    for phrase in phrases:
        for product in resolve(context.store, phrase, context.shown):
            if product.card["sku"] not in {p.card["sku"] for p in found}:
                found.append(product)
    return found


def _first_sentence(description: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s+", description.strip(), maxsplit=1)[0]
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def _differences(products: list[Product]) -> str:
    sentences = []
    for product in products:
        facts = product.facts
        points = [money(facts.price, facts.currency)]
        weight = comparison.weight_of(facts)
        if weight:
            points.append(f"{weight[1]}")
        capacity = capacity_of(facts)
        if capacity.people:
            points.append(_("for {count}").format(count=capacity.people))
        proof = comparison.waterproofing(facts)
        if proof:
            points.append(comparison.proofing_word(proof))
        sentence = _("The {title} ({points}): {description}")
        sentences.append(
            sentence.format(title=facts.title, points=", ".join(points), description=_first_sentence(facts.description))
        )
    if len(products) == 2:
        sentences.append(difference_sentence(products[0], products[1]))
    return " ".join(sentences)


def _cheaper_of_its_kind(context: Context, product: Product, ascending: bool) -> list[Product]:
    """The products of the same type priced below (``ascending``) or above this one, best first."""
    facts = product.facts
    if not facts.product_type:
        return []
    cent = Decimal("0.01")
    bound = {"max_price": facts.price - cent} if ascending else {"min_price": facts.price + cent}
    hits = priced(context.store, 3, descending=not ascending, product_type=facts.product_type, **bound)
    return [Product(card(hit), product_facts(hit)) for hit in hits]


def _alone_in_its_kind(product: Product, ascending: bool) -> Composition:
    """No product of its type costs less (``ascending``) or more: said, with its price."""
    said = (_("We have nothing cheaper of that kind than the {title} ({price}).") if ascending
            else _("We have nothing pricier of that kind than the {title} ({price})."))
    reply = said.format(title=product.facts.title, price=money(product.facts.price, product.facts.currency))
    return Composition(COMPARE, reply=reply, cards=[product.card], products=[product.facts])


def _by_people(products: list[Product], ascending: bool) -> Composition | None:
    """"Which tent is bigger?" where no volume is given: bigger is for more people, as each product's text says
    ("The Basecamp 6 Family Tent is made for six people."); None when the catalog says that of none of them."""
    counted = [(capacity_of(p.facts).people, p) for p in products]
    if not any(people for people, _ in counted):
        return None
    ranked = sorted(counted, key=lambda pair: (pair[0] is None, (pair[0] or 0) * (1 if ascending else -1)))
    sentences = [made_for(p.facts) for _, p in ranked]
    reply = " ".join(sentence for sentence in sentences if sentence)
    return Composition(COMPARE, reply=reply, cards=[p.card for _, p in ranked], products=[p.facts for _, p in ranked])


@register(
    "compare_products",
    "Compare products: the ones just shown ('which of those is lighter?', products empty) or products named "
    "('difference between the down and the synthetic sleeping bag').",
    CompareArguments,
    examples=(
        ("Which one is cheaper?", {"products": [], "attribute": "price"}),
        ("Which sleeping bag is warmer?", {"products": ["sleeping bag"], "attribute": "warmth"}),
        ("Fleece or down vest, what's the difference?", {"products": ["fleece jacket", "down vest"], "attribute": "all"}),
    ),
)
def compare_products(context: Context, arguments: CompareArguments) -> Composition:
    if not arguments.products and context.shown:
        asked = (arguments.attribute, arguments.ascending) if arguments.attribute != "all" else None
        compared = comparison.compare(context.store, context.text, context.shown, asked)
        unmeasured = compared is not None and compared.attribute == comparison.VOLUME and not any(
            comparison.volume_of(p) for p in compared.products
        )
        if unmeasured:  # the cards as the comparison read them: no second read of the catalog
            ascending = (asked or comparison.asked_attribute(context.text) or (comparison.VOLUME, False))[1]
            read = [Product(c, f) for c, f in zip(compared.cards, compared.products)]
            by_people = _by_people(read, ascending)
            if by_people is not None:
                return by_people
        if compared is not None:
            return Composition(COMPARE, reply=compared.reply, cards=compared.cards, products=compared.products)
        if asked is None:  # not about those cards: "which sleeping bag is warmer?" after jackets ranks that kind,
            reread = comparison.asked_attribute(context.text)  # "which jackets are waterproof?" after tents is a search
            if reread is not None and reread[0] in _RANKED:
                kind = CompareArguments(products=[context.text], attribute=reread[0], ascending=reread[1])
                return compare_products(context, kind)
            return search_products(context, SearchArguments(query=context.text))
        products = shown(context.store, context.shown)
    elif not arguments.products:  # nothing named, nothing shown: the whole catalog ("the cheapest thing you sell?")
        if arguments.attribute != comparison.PRICE:
            return search_products(context, SearchArguments(query=context.text))
        hits = priced(context.store, descending=not arguments.ascending)
        products = [Product(card(hit), product_facts(hit)) for hit in hits]
    else:
        products = _products(context, arguments.products)
    if not products:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    if len(arguments.products) == 1 and len(products) == 1 and arguments.attribute == comparison.PRICE:
        # "Do you have something cheaper?" after the trekking poles: the catalog's cheaper ones of the same type
        # (the search found no other), or that there are none (the poles' own description was the answer)
        others = _cheaper_of_its_kind(context, products[0], arguments.ascending)
        if not others and products[0].facts.product_type:
            return _alone_in_its_kind(products[0], arguments.ascending)
        products += others
    measure = comparison.MEASURES.get(arguments.attribute)
    named = len(arguments.products) > 1
    unmeasured = measure is not None and not any(measure(p.facts) for p in products)
    if arguments.attribute == comparison.VOLUME and unmeasured:
        by_people = _by_people(products, arguments.ascending)
        if by_people is not None:
            return by_people
    if arguments.products and unmeasured and not named and len(products) < 2:
        # "lightest sleeping pad?" where the store has one, unweighed: nothing to rank, the search's answer
        return search_products(context, SearchArguments(query=context.text))
    # "Which is warmer, the fleece or the down vest?" with no rating for either: what the catalog says of both
    if arguments.attribute != "all" and len(products) > 1 and not (named and unmeasured):
        order, reply = comparison.ordered([(p.card, p.facts, None) for p in products], arguments.attribute,
                                          arguments.ascending, context.text)
        products = [products[i] for i in order]
    else:
        reply = _differences(products)
    return Composition(COMPARE, reply=reply, cards=[p.card for p in products], products=[p.facts for p in products])
