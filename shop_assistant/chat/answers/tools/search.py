"""``search_products``: the catalog's products (and the store documents' answering passages) for the shopper's
words, with the filters the planner read: a price range, in stock only.

The composition is the one the model continues: cards from catalog rows, the opening names them with their
prices (``opening``). When nothing matches, the reply depends on what the message was: a question about the
store that no document answers, small talk, or a request for something the store does not sell.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from catalog import sales, terms
from catalog.grounding import RELATIVE_CUTOFF, ideas, kind_sold, price_limits, within

from ..composition import (
    MODEL,
    NO_ANSWER,
    NO_MATCH,
    POLICY,
    PRODUCTS,
    SMALL_TALK,
    Composition,
    asks_about_the_store,
    asks_after_sales,
    asks_the_catalog,
    is_follow_up,
    is_small_talk,
    names_no_thing,
    no_answer_reply,
    no_match_reply,
)
from ..opening import money, names_an_option, over_the_limit
from ..retrieval import protocol_card
from .registry import Context, register


# A price is a JSON number (pydantic's Decimal schema also admits a string, which a model then writes).
Price = Annotated[Decimal, Field(ge=0), WithJsonSchema({"type": "number", "minimum": 0})]


class SearchArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=200, description="what to look for, in English catalog words")
    # Optional but never null: left out when the shopper did not say (a small model fills a nullable field).
    min_price: Price = Field(None, description="lowest price, only if the shopper gives one")  # type: ignore[assignment]
    max_price: Price = Field(None, description="highest price or budget, only if the shopper gives one")  # type: ignore[assignment]
    in_stock: bool = Field(None, description="true only if the shopper asks for what is in stock")  # type: ignore[assignment]


def composition_of(retrieved) -> Composition:  # noqa: ANN001  (retrieval.Retrieved)
    return Composition(
        MODEL,
        facts=retrieved.facts,
        cards=retrieved.cards,
        quotes=retrieved.quotes,
        products=retrieved.products,
        answers=retrieved.answers,
        # The store's documents answered and no product did: a question about the store ("what is your return
        # policy?", which the rules search as words), as the policy tool would have answered it.
        topic=POLICY if retrieved.answers and not retrieved.cards else PRODUCTS,
    )


def composition_of_ideas(found) -> Composition:  # noqa: ANN001  (grounding.Grounding from ``ideas``)
    """Suggestions (``catalog.grounding.ideas``) as the composition the model continues."""
    return Composition(
        MODEL,
        facts=found.facts,
        cards=[protocol_card(card) for card in found.cards],
        products=list(found.products),
        topic=PRODUCTS,
    )


@register(
    "search_products",
    "Find products in the catalog (and store information) for the shopper's words, with an optional price range "
    "and in-stock filter. Use for 'do you have...', recommendations, gifts and what to buy for an activity.",
    SearchArguments,
    examples=(
        ("do u hav a slepping pad", {"query": "sleeping pad"}),
        ("I've got 80 bucks, anything for camping?", {"query": "camping", "max_price": 80}),
        ("¿Tienen mochilas para niños?", {"query": "kids backpack"}),
        ("Habt ihr Handschuhe?", {"query": "gloves"}),
        ("Was kostet die Fleecejacke?", {"query": "fleece jacket"}),
    ),
    topic=PRODUCTS,
)
def search_products(context: Context, arguments: SearchArguments) -> Composition:
    filters = {"min_price": arguments.min_price, "max_price": arguments.max_price, "in_stock": arguments.in_stock}
    retrieved = context.retrieve(context.store, arguments.query, **{k: v for k, v in filters.items() if v is not None})
    text = context.text
    if not retrieved.found and context.previous.strip() and is_follow_up(text):
        # "anything under 50 dollars?" names nothing of its own: searched again with the message before it
        retrieved = context.retrieve(context.store, f"{context.previous.strip()} {arguments.query}")
    if retrieved.found:
        composition = composition_of(retrieved)
        if _names_a_products_option(text, composition):
            # "do you have socks in size M?": the socks' sizes answer, not the FAQ on picking a size that "size" found
            composition.answers, composition.quotes = [], []
        composition.lead.extend(_left_out_by_the_limit(context, arguments, retrieved))
        return composition
    if asks_about_the_store(text):
        return Composition(NO_ANSWER, reply=no_answer_reply())
    whole = _is_the_message(context, arguments.query)
    limit = _limit(context, arguments)
    if whole and limit is not None and names_no_thing(text) and not sales.mentions_sales(text):
        # "Show me everything under 30 dollars": the catalog within the limit, not "I couldn't find that" (a deal
        # under 30 is a markdown: full-price items are no answer to it)
        found = within(context.store, min_price=arguments.min_price, max_price=limit)
        return composition_of_ideas(found) if found.found else _nothing_under(context, limit)
    past = _past_the_limit(context, arguments)
    if past is not None:
        return past
    if is_small_talk(text) or not asks_the_catalog(text) and whole:
        return Composition(MODEL, facts=retrieved.facts, topic=SMALL_TALK)  # talk, nothing asked of the catalog
    # What the store does not carry is said in the shopper's words: a correction that found nothing either
    # ("sun hoodie" searched as "sun hood") is not what they asked for.
    return Composition(NO_MATCH, reply=no_match_reply(context.store, text if whole else arguments.query))


def _names_a_products_option(text: str, composition: Composition) -> bool:
    """Products were found and the message names a size or colour of one of them, asking nothing of the store."""
    return (
        bool(composition.answers) and not asks_about_the_store(text) and not asks_after_sales(text)
        and any(names_an_option(product, text) for product in composition.products[:2])
    )  # fmt: skip


# A best match priced up to this much over the limit is said ("the boots are 159, over your 150"); one at twice the
# budget is not what the shopper meant to look at.
NEAR_MISS = Decimal("1.25")


def _left_out_by_the_limit(context: Context, arguments: SearchArguments, retrieved) -> list[str]:  # noqa: ANN001
    """The sentence for the best match of the words when the shopper's price limit left it out ("hiking boots
    under 150": the boots are 159), so the cheaper products shown are not taken for it; [] otherwise."""
    limit = _limit(context, arguments)
    if limit is None or not retrieved.cards:
        return []
    # min_price 0: no limit read from the words either (the query may hold "under 150")
    unbounded = context.retrieve(context.store, arguments.query, min_price=Decimal("0"))
    if not unbounded.products:
        return []
    facts = unbounded.products[0]
    # By product, not variant: the limit may have kept a cheaper size of the same product (the Regular pad).
    if facts.title in {shown.title for shown in retrieved.products} or not limit < facts.price <= limit * NEAR_MISS:
        return []
    return [over_the_limit(facts.title, facts.price, limit, facts.currency)]


def _limit(context: Context, arguments: SearchArguments) -> Decimal | None:
    return arguments.max_price if arguments.max_price is not None else price_limits(context.text)[1]


def _past_the_limit(context: Context, arguments: SearchArguments) -> Composition | None:
    """When the shopper's words match products and their limit leaves out every one (None when there is no limit
    or nothing matches at all, not even above it):

    - words that name an activity, not a kind of product the store sells: what fits within the limit, with
      ``ideas``' weaker bar, in stock ("anything for a day hike under 60?": the daypack is 69, and the socks,
      poles and first-aid kit are what a shop assistant offers instead), the best match's price said first when
      near the limit (``over_the_limit``, ``NEAR_MISS``);
    - else "Nothing we have for that is under 30.00 USD." ("a tent under 100": a headlamp is no tent; not "we
      don't carry tents", which is false)."""
    limit = _limit(context, arguments)
    if limit is None:
        return None
    # Products only: a store document the words also find is no product over the limit.
    unbounded = context.retrieve(context.store, arguments.query, min_price=Decimal("0"))
    if not unbounded.products:
        return None
    if not kind_sold(context.store, arguments.query):
        # A search's bar relative to the best (not a gift's): "anything warm under 30?" is the beanie, not the sun hat
        found = ideas(context.store, arguments.query, min_price=arguments.min_price, max_price=limit,
                      relative=RELATIVE_CUTOFF)
        if found.found:
            composition = composition_of_ideas(found)
            best = unbounded.products[0]
            if best.price <= limit * NEAR_MISS:
                composition.lead.append(over_the_limit(best.title, best.price, limit, best.currency))
            return composition
    return _nothing_under(context, limit)


def _nothing_under(context: Context, limit: Decimal) -> Composition:
    amount = money(limit, context.store.currency)
    reply = f"{_('Nothing we have for that is under {limit}.').format(limit=amount)} {_('Try a higher limit or other words, or ask for a person.')}"
    return Composition(NO_MATCH, reply=reply)


def _is_the_message(context: Context, query: str) -> bool:
    """The query is the shopper's whole message, as the rule planner searches it (the store's synonyms applied,
    its typos corrected)."""
    return query == context.text or query == terms.search_words(context.store, context.text, lang=context.language)
