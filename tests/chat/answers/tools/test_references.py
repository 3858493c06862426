"""``references.resolve`` on the demo store: a phrase that points back means the cards shown ("both", "it", "the
cheaper one", "the second one"), any other is looked up in the catalog with the variant its words name; prices
and stock always from the rows read now."""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog.models import Variant
from shop_assistant.chat.answers.tools.references import is_pointing, pointed_at, resolve
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db

SHOWN = ("Summit 40L Backpack", "Daytripper 22L Daypack", "Ridgeline 2-Person Tent")  # 149, 69, 249 USD


@pytest.fixture
def shown(shop):
    return cards_of(shop, *SHOWN)


def skus(products) -> list[str]:
    return [p.card["sku"] for p in products]


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("the Ridgeline tent", ["DO-RT2-SAGE"]),  # an available colour: Orange has none left
        ("Ridgeline", ["DO-RT2-SAGE"]),
        ("orange Ridgeline tent", ["DO-RT2-ORNG"]),  # the colour named, even sold out
        ("the regular down bag", ["DO-ADB-REG"]),
        ("the long down bag", ["DO-ADB-LONG"]),
        ("a pair of trekking poles", ["DO-ATP"]),
        ("your headlamp", ["DO-B400"]),
        ("kayak", []),
        ("", []),
        ("the", []),
        ("?!", []),
    ],
)
def test_a_name_is_looked_up_in_the_catalog(shop, phrase, expected):
    assert skus(resolve(shop, phrase)) == expected


def test_a_found_products_card_and_facts_are_the_catalogs_rows(shop):
    [orange] = resolve(shop, "orange Ridgeline tent")
    row = Variant.objects.get(sku="DO-RT2-ORNG")
    assert orange.card["price"] == str(row.price) and orange.card["in_stock"] is row.in_stock is False
    assert orange.facts.title == "Ridgeline 2-Person Tent" and orange.facts.variant == "Orange"
    assert orange.facts.price == row.price and not orange.facts.in_stock and orange.facts.others_in_stock


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("both", ["DO-S40-SLT", "DO-DT22", "DO-RT2-SAGE"]),
        ("them", ["DO-S40-SLT", "DO-DT22", "DO-RT2-SAGE"]),
        ("all of them", ["DO-S40-SLT", "DO-DT22", "DO-RT2-SAGE"]),
        ("Those!", ["DO-S40-SLT", "DO-DT22", "DO-RT2-SAGE"]),
        ("it", ["DO-S40-SLT"]),
        ("this one", ["DO-S40-SLT"]),
        ("the cheaper one", ["DO-DT22"]),
        ("the cheapest", ["DO-DT22"]),
        ("the least expensive one", ["DO-DT22"]),
        ("the most expensive one", ["DO-RT2-SAGE"]),
        ("the pricier one", ["DO-RT2-SAGE"]),
        ("the first one", ["DO-S40-SLT"]),
        ("the second one", ["DO-DT22"]),
        ("the third", ["DO-RT2-SAGE"]),
        ("the last one", ["DO-RT2-SAGE"]),
        ("the Basecamp tent", ["DO-BC6"]),  # a name means the catalog's product, shown or not
        ("the daypack", ["DO-DT22"]),
    ],
)
def test_a_pointing_phrase_means_the_cards_shown(shop, shown, phrase, expected):
    assert skus(resolve(shop, phrase, shown)) == expected


def test_an_ordinal_past_the_cards_points_at_nothing(shop):
    two = cards_of(shop, "Summit 40L Backpack", "Daytripper 22L Daypack")
    assert skus(resolve(shop, "the third one", two)) == []
    assert skus(resolve(shop, "the last one", two)) == ["DO-DT22"]


def test_without_cards_it_points_at_nothing(shop):
    assert resolve(shop, "it") == [] and resolve(shop, "both") == [] and resolve(shop, "the cheaper one") == []


def test_a_shown_card_is_read_again_so_its_price_is_the_catalogs_now(shop, shown):
    shown[1]["price"] = "1.00"  # the card as the widget kept it; the catalog says 69.00
    [cheapest] = resolve(shop, "the cheapest one", shown)
    assert cheapest.card["sku"] == "DO-DT22" and cheapest.facts.price == Decimal("69.00")
    assert cheapest.card["price"] == "69.00"


def test_the_bigger_or_lighter_one_by_what_each_shown_products_text_gives(shop):
    packs = cards_of(shop, "Summit 40L Backpack", "Daytripper 22L Daypack")  # 40 and 22 litres
    assert [p.facts.title for p in resolve(shop, "the bigger one", packs)] == ["Summit 40L Backpack"]
    assert [p.facts.title for p in resolve(shop, "the small one", packs)] == ["Daytripper 22L Daypack"]
    assert [p.facts.title for p in resolve(shop, "the lighter one", cards_of(shop, "Summit 40L Backpack"))] == [
        "Summit 40L Backpack"]  # one shown: the one meant
    # two tents, one weight given: which is lighter cannot be told (the rule planner then compares their weights)
    assert pointed_at(shop, "the lighter one", cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")) is None
    # the warmer one: the lower comfort temperature (-7 °C against 10 °C)
    bags = cards_of(shop, "Breeze Synthetic Sleeping Bag", "Alpine Down Sleeping Bag")
    assert [p.facts.title for p in resolve(shop, "the warmer one", bags)] == ["Alpine Down Sleeping Bag"]


@pytest.mark.parametrize(
    ("phrase", "pointing"),
    [("it", True), ("both", True), ("the cheaper one", True), ("the warmer one", True), ("the second one", True),
     ("the Summit backpack", False), ("sleeping bag", False), ("the one with a hood", False)],
)
def test_a_pointing_phrase_is_told_from_a_name(phrase, pointing):
    assert is_pointing(phrase) is pointing
