"""``suggest_gifts`` on the demo store: products in stock within the budget for what the person likes, and an
honest reply when the store has nothing for it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import translation

from catalog.models import Variant
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.tools.registry import call

pytestmark = pytest.mark.django_db


def gifts(shop, language: str = "en", **arguments):
    with translation.override(language):
        return execute(Context(shop, "a gift", retrieve, "", [], language), [call("suggest_gifts", **arguments)])


def test_ideas_are_in_stock_within_the_budget_and_about_what_the_person_likes(shop):
    composition = gifts(shop, interests="hiking", max_price=Decimal("65"))
    skus = [card["sku"] for card in composition.cards]
    assert skus and set(skus) <= {"DO-MS-S", "DO-ATP", "DO-MS-M", "DO-MS-L"}  # the hiking socks, the poles
    for card in composition.cards:
        assert Decimal(card["price"]) <= 65 and card["in_stock"]
    # A person's words rarely name a product: a colleague who hikes gets the hiking socks or the first-aid kit.
    colleague = gifts(shop, interests="hikes at weekends and walks to work", max_price=Decimal("40"))
    assert {card["sku"] for card in colleague.cards} & {"DO-TFA", "DO-MS-S"}
    # "camps" is the Titanium Camp Mug's word: a stocking stuffer under 30.
    assert [card["sku"] for card in gifts(shop, interests="camps", max_price=Decimal("30")).cards] == ["DO-TCM"]


def test_an_out_of_stock_product_is_no_gift(shop):
    mug = Variant.objects.get(product__store=shop, sku="DO-TCM")
    mug.inventory_quantity = 0
    mug.save()  # through save(): the search index sees the catalog changed
    assert "DO-TCM" not in [card["sku"] for card in gifts(shop, interests="camps", max_price=Decimal("30")).cards]


def test_an_interest_the_catalog_has_no_word_for_gets_no_suggestion(shop):
    composition = gifts(shop, interests="kayaking")
    assert composition.kind == "no_match" and not composition.cards
    assert composition.reply.startswith("I found no gift in stock for that.")
    spanish = gifts(shop, "es", interests="golf", max_price=Decimal("50"))
    assert spanish.reply.startswith("No encontré ningún regalo disponible por menos de 50.00 USD para eso.")
