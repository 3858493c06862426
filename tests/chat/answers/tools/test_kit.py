"""``fit_budget`` on the demo store: one product of each kind asked for, together within the budget (the best
matches that fit), every price and the sum from the catalog's rows; when nothing fits, said, with the least the
kinds cost together."""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog import language
from catalog.models import Variant
from shop_assistant.chat.answers.composition import NO_MATCH
from shop_assistant.chat.answers.planning import rules
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.tools.kit import best_within, choices
from shop_assistant.chat.answers.tools.registry import call
from shop_assistant.chat.answers.tools.total import TOTAL

pytestmark = pytest.mark.django_db

TEXT = "I need a tent and a sleeping bag for a summer trip, budget 400"


def fit(shop, items: list[str], budget: str, text: str = TEXT):
    return execute(Context(shop, text, retrieve, "", []), [call("fit_budget", items=items, budget=Decimal(budget))])


def test_the_set_within_the_budget_with_the_catalogs_prices_and_sum(shop):
    composition = fit(shop, ["tent", "sleeping bag"], "400")
    assert composition.kind == TOTAL and composition.fixed
    skus = [card["sku"] for card in composition.cards]
    assert skus == ["DO-RT2-SAGE", "DO-BSB"]
    prices = [Variant.objects.get(sku=sku).price for sku in skus]
    assert sum(prices) == Decimal("338.00") <= Decimal("400")
    assert composition.reply == (
        "Within your budget of 400.00 USD: Ridgeline 2-Person Tent (Sage) 249.00 USD + Breeze Synthetic Sleeping Bag "
        "89.00 USD = 338.00 USD in total.")


def test_no_set_fits_is_said_with_the_least_they_cost_together(shop):
    reply = fit(shop, ["tent", "sleeping bag"], "300").reply
    assert reply.startswith("Nothing we have fits a budget of 300.00 USD for all of these; the least they come to is ")
    assert reply.endswith("= 338.00 USD in total.")


def test_the_best_matches_that_fit_and_the_boundary_is_inclusive(shop):
    kinds = [choices(shop, "tent"), choices(shop, "sleeping bag")]
    # a kind's products only: the headlamp ("does not wake your tent mate") is no tent
    assert {p.facts.title for p in kinds[0]} == {"Ridgeline 2-Person Tent", "Basecamp 6 Family Tent"}
    assert {p.facts.title for p in kinds[1]} == {"Alpine Down Sleeping Bag", "Breeze Synthetic Sleeping Bag"}
    unbounded = best_within(kinds, Decimal("100000"))
    assert unbounded == (kinds[0][0], kinds[1][0])  # the best match of each when money is no object
    exact = best_within(kinds, Decimal("338.00"))
    assert exact is not None and sum(p.facts.price for p in exact) == Decimal("338.00")
    assert best_within(kinds, Decimal("337.99")) is None


def test_a_kind_the_catalog_lacks_is_left_out_and_said(shop):
    reply = fit(shop, ["tent", "kayak"], "500").reply
    assert "I couldn't find 'kayak' in our catalog, so the total leaves it out." in reply
    assert fit(shop, ["kayak", "canoe"], "500").kind == NO_MATCH
    # one kind left: its price alone, no "249.00 USD = 249.00 USD in total"
    assert fit(shop, ["kayak", "tent"], "500").reply == (
        "Within your budget of 500.00 USD: Ridgeline 2-Person Tent (Sage) 249.00 USD. "
        "I couldn't find 'kayak' in our catalog, so the total leaves it out."
    )


@pytest.mark.parametrize(
    ("text", "items", "budget"),
    [
        (TEXT, ["tent", "sleeping bag"], Decimal("400")),
        ("tent and sleeping bag for under 350 total?", ["tent", "sleeping bag"], Decimal("350")),
        ("I need a tent, a sleeping bag and a pad, budget 700", ["tent", "sleeping bag", "pad"], Decimal("700")),
        ("I need a backpack and a headlamp under 200", ["backpack", "headlamp"], Decimal("200")),
        # each part read in the catalog's words through the store's synonyms
        ("Necesito una tienda de campaña y un saco de dormir, mi presupuesto es 400 dólares", ["tent", "sleeping bag"],
         Decimal("400")),
        ("Il me faut une tente et un sac de couchage pour moins de 400 euros", ["tent", "sleeping bag"], Decimal("400")),
        ("Ich brauche einen Rucksack und eine Stirnlampe, höchstens 200 Euro zusammen", ["backpack", "headlamp"],
         Decimal("200")),
        # a kind the store does not sell is the tool's to say left out, when another is sold
        ("I need a kayak and a tent, budget 500", ["kayak", "tent"], Decimal("500")),
        # who it is for is no item, though it has an "and"
        ("a tent and a sleeping bag for me and my wife, budget 400", ["tent", "sleeping bag"], Decimal("400")),
        ("a tent and a sleeping bag for my son and me, budget 400", ["tent", "sleeping bag"], Decimal("400")),
        # what an item must be for stays with it
        ("I need a sleeping bag for -5 and a tent for 2, budget 600", ["sleeping bag for -5", "tent for 2"], Decimal("600")),
        # "for 3 nights" counts nights, not people: no requirement ("Nothing fits" with the family tent alone)
        ("I need a tent for 3 nights and a stove, budget 400", ["tent", "stove"], Decimal("400")),
    ],
)
def test_the_rule_planner_reads_the_kinds_and_the_budget(shop, text, items, budget):
    calls = rules.plan(Context(shop, text, retrieve, "", [], language.detect(text)))
    assert [(c.name, c.arguments.model_dump()) for c in calls] == [("fit_budget", {"items": items, "budget": budget})]


@pytest.mark.parametrize(
    "text",
    [
        "Do you have a warm and waterproof jacket under 200?",  # properties of one kind, not two kinds
        "two mugs and a stove under 100",  # a quantity: the total's
        "I need a tent and a sleeping bag",  # no budget
        "a gift for my dad who likes camping and hiking, around 50 dollars",
        "I need a kayak and a canoe, budget 500",  # nothing of either is sold: the search says so
    ],
)
def test_no_budget_kit_where_the_message_asks_something_else(shop, text):
    assert rules.plan(Context(shop, text, retrieve, "", []))[0].name != "fit_budget"


def test_what_an_item_must_be_for_is_read_from_the_products_own_text(shop):
    # "for -5": the bag rated for it (the Alpine, -7 °C), not the cheaper Breeze (10 °C) that fitted the budget
    assert fit(shop, ["sleeping bag for -5", "tent for 2"], "600").reply == (
        "Within your budget of 600.00 USD: Alpine Down Sleeping Bag (Regular) 319.00 USD + Ridgeline 2-Person Tent "
        "(Sage) 249.00 USD = 568.00 USD in total."
    )
    # "for 4": the family tent (room for six), never the 2-person one
    assert fit(shop, ["tent for 4", "sleeping bag"], "600").cards[0]["title"] == "Basecamp 6 Family Tent"
    # none of the kind says it is: left out and said, never one that may not be
    reply = fit(shop, ["sleeping bag for -20", "tent"], "900").reply
    assert "I couldn't find 'sleeping bag for -20' in our catalog" in reply and "Sleeping Bag" not in reply


def test_a_pick_that_is_sold_out_is_said_so(shop):
    # the store's one stove is sold out: it is still the kit's stove (nothing else is one), and the answer says so
    reply = fit(shop, ["tent", "stove"], "400").reply
    assert reply.endswith("= 303.99 USD in total. The Micro Backpacking Stove is out of stock right now.")
