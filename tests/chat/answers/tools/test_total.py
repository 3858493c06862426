"""``price_total`` on the demo store: quantities times the variants' prices in Decimal, every term shown, a
difference of two, "both" after two cards, an unknown product left out and said, stock said."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from catalog.models import Variant
from shop_assistant.chat.answers.composition import NO_MATCH
from shop_assistant.chat.answers.planning import rules
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.tools.registry import call
from shop_assistant.chat.answers.tools.total import TOTAL
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db


def price(sku: str) -> Decimal:
    return Variant.objects.get(sku=sku).price


def total(shop, text: str, items: list[dict], operation: str = "sum", shown=()):
    return execute(Context(shop, text, retrieve, "", shown), [call("price_total", items=items, operation=operation)])


def test_the_tent_plus_two_regular_down_bags(shop):
    text = "What would the Ridgeline tent plus two of the regular down bags cost together?"
    composition = total(shop, text, [{"product": "Ridgeline tent"}, {"product": "regular down bags", "quantity": 2}])
    assert composition.kind == TOTAL and composition.fixed
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE", "DO-ADB-REG"]
    assert price("DO-RT2-SAGE") + 2 * price("DO-ADB-REG") == Decimal("887.00")  # the catalog's own sum
    assert composition.reply == (
        "Ridgeline 2-Person Tent (Sage) 249.00 USD + 2 × Alpine Down Sleeping Bag (Regular) at 319.00 USD "
        "= 887.00 USD in total."
    )
    assert [p.title for p in composition.products] == ["Ridgeline 2-Person Tent", "Alpine Down Sleeping Bag"]
    # The rule planner reads the same calls from the shopper's words, so the chat says the same.
    context = Context(shop, text, retrieve)
    assert execute(context, rules.plan(context)).reply == composition.reply


def test_the_difference_between_the_down_and_the_synthetic_bag(shop):
    composition = total(shop, "How much more is the down bag than the synthetic one?",
                        [{"product": "down bag"}, {"product": "synthetic bag"}], operation="difference")  # fmt: skip
    assert price("DO-ADB-REG") - price("DO-BSB") == Decimal("230.00")
    assert composition.reply == (
        "The Alpine Down Sleeping Bag (319.00 USD) costs 230.00 USD more than the Breeze Synthetic Sleeping Bag (89.00 USD)."
    )
    assert [c["sku"] for c in composition.cards] == ["DO-ADB-REG", "DO-BSB"]
    # Asked the other way round, the same sentence: the dearer one first.
    other = total(shop, "how much cheaper is the synthetic bag than the down one?",
                  [{"product": "synthetic bag"}, {"product": "down bag"}], operation="difference")  # fmt: skip
    assert other.reply == composition.reply


def test_equal_prices_are_said_to_cost_the_same(shop):
    composition = total(shop, "difference between the men's and the women's rain jacket?",
                        [{"product": "men's rain jacket"}, {"product": "women's rain jacket"}], "difference")  # fmt: skip
    assert composition.reply == (
        "The Men's Stormshell Rain Jacket and the Women's Stormshell Rain Jacket cost the same: 189.00 USD."
    )


def test_both_after_two_cards_adds_the_cards_products(shop):
    shown = cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")
    composition = total(shop, "What would both cost together?", [{"product": "both"}], shown=shown)
    assert composition.reply == "Ridgeline 2-Person Tent (Sage) 249.00 USD + Basecamp 6 Family Tent 429.00 USD = 678.00 USD in total."
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE", "DO-BC6"]
    two = total(shop, "I'd take two of those, how much?", [{"product": "those", "quantity": 2}], shown=shown)
    assert two.reply.endswith(f"= {2 * (price('DO-RT2-SAGE') + price('DO-BC6'))} USD in total.")


def test_the_card_price_is_read_again_from_the_catalog(shop):
    """A card is what the shopper saw; the sum uses the price the catalog has now."""
    shown = cards_of(shop, "Beam 400 Rechargeable Headlamp")
    shown[0]["price"] = "1.00"
    composition = total(shop, "two of it, how much?", [{"product": "it", "quantity": 2}], shown=shown)
    assert composition.reply == "2 × Beam 400 Rechargeable Headlamp at 44.95 USD = 89.90 USD in total."


def test_a_product_the_catalog_does_not_have_is_said_to_be_left_out(shop):
    composition = total(shop, "the Ridgeline tent and a kayak, how much?", [{"product": "Ridgeline tent"}, {"product": "kayak"}])
    assert composition.reply == (
        "The Ridgeline 2-Person Tent costs 249.00 USD. I couldn't find 'kayak' in our catalog, so the total leaves it out."
    )
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE"]
    two_missing = total(shop, "x", [{"product": "headlamp", "quantity": 2}, {"product": "kayak"}, {"product": "canoe"}])
    assert two_missing.reply.endswith("I couldn't find 'kayak' or 'canoe' in our catalog, so the total leaves it out.")


def test_nothing_found_at_all_is_the_no_match_reply_without_a_figure(shop):
    composition = total(shop, "How much for a kayak and a canoe?", [{"product": "kayak"}, {"product": "canoe"}])
    assert composition.kind == NO_MATCH and composition.cards == []
    assert not re.search(r"\d", composition.reply.split("Our categories")[0])


def test_an_item_out_of_stock_is_said_to_be_out_of_stock(shop):
    """The micro stove's one variant has 0 left and is kept on sale (policy continue): a backorder, not in stock."""
    stove = Variant.objects.get(sku="DO-MBS")
    assert stove.inventory_quantity == 0 and stove.inventory_policy == Variant.InventoryPolicy.CONTINUE
    assert not stove.in_stock
    composition = total(shop, "the micro stove and the titanium mug, how much?",
                        [{"product": "micro stove"}, {"product": "titanium mug"}])  # fmt: skip
    assert composition.reply == (
        "Micro Backpacking Stove 54.99 USD + Titanium Camp Mug 450 ml 27.00 USD = 81.99 USD in total. "
        "The Micro Backpacking Stove is out of stock right now."
    )
    assert [c["in_stock"] for c in composition.cards] == [False, True]
    in_stock = total(shop, "x", [{"product": "titanium mug", "quantity": 3}, {"product": "water filter"}])
    assert in_stock.reply == "3 × Titanium Camp Mug 450 ml at 27.00 USD + Pocket Water Filter 39.00 USD = 120.00 USD in total."


def test_the_variant_the_words_name_is_the_one_priced(shop):
    composition = total(shop, "x", [{"product": "long down bag"}, {"product": "wide sleeping pad", "quantity": 2}])
    assert [c["sku"] for c in composition.cards] == ["DO-ADB-LONG", "DO-CSP-WIDE"]
    assert composition.reply.endswith(f"= {price('DO-ADB-LONG') + 2 * price('DO-CSP-WIDE')} USD in total.")
