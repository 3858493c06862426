"""Follow-ups about the cards already shown ("which of those is cheaper?"), on the demo store's catalog: the right
product first, every card again, and a sentence whose figures are the catalog's own."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from catalog.models import Store, Variant
from shop_assistant.chat.guard import pipeline
from shop_assistant.chat.answers.comparison import asked_attribute, compare
from shop_assistant.chat.answers.composition import COMPARE
from shop_assistant.demo.store import load_demo_store


@pytest.fixture
def shop(db) -> Store:
    return load_demo_store(embed=False, password="x").store


def cards_of(store: Store, *titles: str) -> list[dict]:
    """A card per product, as the chat shows them (each product's first variant)."""
    cards = []
    for title in titles:
        variant = Variant.objects.filter(store=store, product__title=title).order_by("pk").first()
        assert variant is not None, title
        cards.append({"sku": variant.sku, "title": title, "price": str(variant.price), "currency": "USD",
                      "url": "", "image": "", "in_stock": variant.in_stock})  # fmt: skip
    return cards


def figures(text: str) -> set[Decimal]:
    return {Decimal(number) for number in re.findall(r"\d+\.\d\d", text)}


@pytest.mark.parametrize(
    "text",
    ["Which of those is cheaper?", "which one is the cheapest", "Which is less expensive?", "Is either of them cheaper?"],
)
def test_after_three_cards_which_is_cheaper_puts_the_cheapest_first_with_catalog_prices(shop, text):
    shown = cards_of(shop, "Summit 40L Backpack", "Daytripper 22L Daypack", "Ridgeline 2-Person Tent")
    plan = pipeline.plan(None, shop, [], text, shown=shown)  # a fixed reply: the engine is never asked
    composition = plan.composition
    assert composition.kind == COMPARE and composition.fixed
    assert [card["title"] for card in composition.cards][0].startswith("Daytripper 22L Daypack")
    assert [product.title for product in composition.products] == [
        "Daytripper 22L Daypack", "Summit 40L Backpack", "Ridgeline 2-Person Tent"
    ]
    assert len(composition.cards) == 3  # every card again
    assert composition.reply.startswith("The Daytripper 22L Daypack is the least expensive at 69.00 USD")
    # Only the catalog's prices, each one's own.
    assert figures(composition.reply) == {Decimal("69.00"), Decimal("149.00"), Decimal("249.00")}
    assert figures(composition.reply) <= {Decimal(card["price"]) for card in composition.cards}


def test_most_expensive_first_and_equal_prices_said_as_such(shop):
    shown = cards_of(shop, "Daytripper 22L Daypack", "Ridgeline 2-Person Tent")
    compared = compare(shop, "Which of them is more expensive?", shown)
    assert compared.products[0].title == "Ridgeline 2-Person Tent"
    same = compare(shop, "which one is cheaper?", cards_of(shop, "Men's Stormshell Rain Jacket", "Women's Stormshell Rain Jacket"))
    assert same.reply == "They cost the same: 189.00 USD each."


def test_which_is_lighter_reads_the_weight_from_the_description(shop):
    shown = cards_of(shop, "Ridgeline 2-Person Tent", "Featherlight Down Vest", "Titanium Camp Mug 450 ml",
                     "Cascade Fleece Jacket")  # fmt: skip
    compared = compare(shop, "Which of those is lighter?", shown)
    assert [product.title for product in compared.products] == [
        "Titanium Camp Mug 450 ml", "Featherlight Down Vest", "Ridgeline 2-Person Tent", "Cascade Fleece Jacket"
    ]
    assert compared.reply.startswith("The Titanium Camp Mug 450 ml is the lightest at 70 g, then the Featherlight")
    for weight in ("70 g", "240 g", "1.6 kg"):  # as the catalog writes them
        assert weight in compared.reply
    assert "doesn't list the weight of the Cascade Fleece Jacket" in compared.reply


def test_a_load_is_not_a_weight_and_unknown_weights_are_said_plainly(shop):
    shown = cards_of(shop, "Folding Camp Chair", "Drift Camping Hammock", "Summit 40L Backpack")
    compared = compare(shop, "which one is lightest?", shown)  # the chair "holds up to 120 kg"
    assert "120" not in compared.reply
    assert compared.reply.startswith("Our catalog doesn't list the weight of the Folding Camp Chair, the Drift")
    assert "can't tell which is lighter" in compared.reply
    assert len(compared.cards) == 3  # the cards are shown anyway


def test_which_is_warmer_reads_the_comfort_temperature_from_the_description(shop):
    shown = cards_of(shop, "Breeze Synthetic Sleeping Bag", "Alpine Down Sleeping Bag", "Cascade Fleece Jacket")
    compared = compare(shop, "Which of those is warmer?", shown)
    assert [product.title for product in compared.products] == [
        "Alpine Down Sleeping Bag", "Breeze Synthetic Sleeping Bag", "Cascade Fleece Jacket"
    ]
    assert compared.reply == (
        "The Alpine Down Sleeping Bag is the warmest, comfortable to -7 °C, then the Breeze Synthetic Sleeping Bag "
        "(10 °C). Our catalog doesn't list a comfort temperature for the Cascade Fleece Jacket."
    )  # the fleece is "warm" in its text, but no rating: not ranked on a guess


def test_a_comfort_temperature_is_a_rating_in_either_scale_and_only_a_rating():
    from catalog.grounding import ProductFacts
    from shop_assistant.chat.answers.comparison import comfort_temperature

    def facts(description: str) -> ProductFacts:
        return ProductFacts(title="Bag", variant="", price=Decimal("1"), currency="USD", compare_at_price=None,
                            in_stock=True, others_in_stock=False, product_type="", vendor="", tags=(), options="",
                            description=description)  # fmt: skip

    assert comfort_temperature(facts("Comfort rating 23 °F, limit 10 °F.")) == (-5.0, "23 °F")
    assert comfort_temperature(facts("A light bag. Comfortable to −2°C.")) == (-2.0, "−2°C")
    assert comfort_temperature(facts("The canister works down to -10 °C.")) is None  # not a comfort rating
    assert comfort_temperature(facts("Warm and soft.")) is None


def test_which_of_them_is_waterproof_puts_the_waterproof_ones_first(shop):
    shown = cards_of(shop, "Cascade Fleece Jacket", "Trailblazer Waterproof Hiking Boots", "Men's Stormshell Rain Jacket")
    compared = compare(shop, "Are any of those waterproof?", shown)
    assert {product.title for product in compared.products[:2]} == {
        "Trailblazer Waterproof Hiking Boots", "Men's Stormshell Rain Jacket"
    }
    assert compared.products[2].title == "Cascade Fleece Jacket"
    assert "are waterproof" in compared.reply
    assert "doesn't say that the Cascade Fleece Jacket is waterproof" in compared.reply


def test_in_my_size_lists_the_catalog_s_sizes_and_checks_a_named_one(shop):
    shown = cards_of(shop, "Trailblazer Waterproof Hiking Boots", "Titanium Camp Mug 450 ml")
    listed = compare(shop, "Do those come in my size?", shown)
    assert listed.products[0].title == "Trailblazer Waterproof Hiking Boots"
    assert "Our catalog lists no sizes for the Titanium Camp Mug 450 ml." in listed.reply
    boots = Variant.objects.filter(store=shop, product__title="Trailblazer Waterproof Hiking Boots")
    sizes = {variant.option_values[0] for variant in boots}
    assert all(size in listed.reply for size in sizes)
    named = compare(shop, "Do those come in size M?", [
        *cards_of(shop, "Men's Stormshell Rain Jacket"), *shown])
    assert named.products[0].title == "Men's Stormshell Rain Jacket"
    assert named.reply.startswith("In stock in M: the Men's Stormshell Rain Jacket.")
    assert "Not sold in M: the Trailblazer Waterproof Hiking Boots and the Titanium Camp Mug 450 ml." in named.reply


@pytest.mark.parametrize(
    "text",
    [
        "Do you have tents?",  # a new request
        "anything cheaper?",  # other products: searched again with the previous message (composition)
        "Do you have cheaper ones?",  # the same: other products
        "Which jackets are waterproof?",  # after tents: about jackets, not about those tents
        "Tell me more about the first one and its history and everything else you know, in great detail please",
    ],
)
def test_what_is_not_a_comparison_of_the_cards_shown(shop, text):
    shown = cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")
    assert compare(shop, text, shown) is None


def test_recognising_the_question():
    assert asked_attribute("Which of those is lighter?") == ("weight", True)
    assert asked_attribute("which one is heavier") == ("weight", False)
    assert asked_attribute("Which of these is the cheapest?") == ("price", True)
    assert asked_attribute("Is either of them waterproof?") == ("waterproof", True)
    assert asked_attribute("Do they come in my size?") == ("size", True)
    assert asked_attribute("Which of those is warmer?") == ("warmth", True)
    assert asked_attribute("which one is better for colder nights?") == ("warmth", True)
    assert asked_attribute("lighter") is None  # no reference to the cards shown


async def test_over_the_socket_a_resumed_conversation_compares_the_cards_it_showed_last(chat_engine, chat_settings, ws):
    """The session remembers the latest cards across a reload (from the history) and the comparison goes out as
    a fixed reply: `products` (the cards again, the cheapest first), the sentence, `end` with reply "compare"."""
    from channels.db import database_sync_to_async
    from datetime import timedelta

    from django.utils import timezone

    from shop_assistant.chat.log.conversations import new_conversation
    from shop_assistant.chat.models import Message

    def seed() -> tuple[str, list[dict]]:
        store = load_demo_store(embed=False, password="x").store
        conversation, token = new_conversation(store)
        shown = cards_of(store, "Ridgeline 2-Person Tent", "Summit 40L Backpack", "Daytripper 22L Daypack")
        now = timezone.now()
        Message.objects.create(conversation=conversation, role="user", text="Gear for a weekend?", created_at=now)
        Message.objects.create(conversation=conversation, role="assistant", text="Here you go.", products=shown,
                               finish_reason="stop", created_at=now + timedelta(seconds=1))  # fmt: skip
        Message.objects.create(conversation=conversation, role="user", text="Thanks", created_at=now + timedelta(seconds=2))
        Message.objects.create(conversation=conversation, role="assistant", text="You're welcome.",
                               finish_reason="stop", created_at=now + timedelta(seconds=3))  # fmt: skip
        return token, shown

    token, shown = await database_sync_to_async(seed)()
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    answer = await client.ask("Which one is the cheapest?")
    assert answer.end["reply"] == "compare" and answer.end["finish_reason"] == "fixed"
    assert [card["sku"] for card in answer.products] == [shown[2]["sku"], shown[1]["sku"], shown[0]["sku"]]
    assert answer.text.startswith("The Daytripper 22L Daypack is the least expensive at 69.00 USD")
    stored = await database_sync_to_async(Message.objects.get)(pk=answer.start["message_id"])
    assert [card["sku"] for card in stored.products] == [card["sku"] for card in answer.products]


@pytest.mark.parametrize(
    ("language", "start"),
    [
        ("en", "The Daytripper 22L Daypack is the least expensive at 69.00 USD, then the Summit 40L Backpack"),
        ("es", "Daytripper 22L Daypack es la opción más económica, a 69.00 USD; después, Summit 40L Backpack"),
        ("fr", "Daytripper 22L Daypack est l’option la moins chère, à 69.00 USD, puis Summit 40L Backpack"),
        ("de", "Daytripper 22L Daypack ist am günstigsten mit 69.00 USD, danach Summit 40L Backpack"),
    ],
)
def test_the_comparison_is_said_in_the_shoppers_language_with_the_catalogs_prices(shop, language, start):
    from django.utils import translation

    shown = cards_of(shop, "Summit 40L Backpack", "Daytripper 22L Daypack")
    with translation.override(language):
        compared = compare(shop, "", shown, ("price", True))  # as a planner reads "¿cuál es más barato?"
    assert compared.reply.startswith(start)
    assert figures(compared.reply) == {Decimal("69.00"), Decimal("149.00")}
