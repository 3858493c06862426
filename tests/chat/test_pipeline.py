"""shop_assistant.chat.pipeline: the figure guard on the streamed answer, and what the answer may quote.

The engine here replays scripted text: the real model cannot be made to invent a given price on demand, and what
is under test is what the pipeline does with the text, not the model (the consumer tests run the real engine).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

from inference.outputs import StreamDelta
from shop_assistant.chat.composition import MODEL, Composition
from shop_assistant.chat.decoding import FINISH_UNSUPPORTED_FIGURE, QUOTED_ANSWER_MAX_TOKENS, Decoding
from shop_assistant.chat.pipeline import Generated, Plan, answer_budget, figures_for, generate
from shop_assistant.chat.prompting import Turn, user_turn_content

FACTS = "Products from the catalog:\n1. Cascade Fleece Jacket - 79.00 USD - in stock [SKU DO-CFJ]"
CARD = {"sku": "DO-CFJ", "title": "Cascade Fleece Jacket", "price": "79.00", "currency": "USD", "url": "",
        "image": "", "in_stock": True}  # fmt: skip
SYSTEM = "You are the assistant of Demo.\n\nStore policies:\nShipping: orders over $50 ship free."


class ScriptedEngine:
    """Streams ``pieces`` as the engine would, and notes whether the stream was closed early (an abort)."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.sent = 0
        self.closed_early = False

    def stream(self, request_id: str, *args: Any, **kwargs: Any) -> AsyncIterator[StreamDelta]:
        async def deltas() -> AsyncIterator[StreamDelta]:
            try:
                for index, piece in enumerate(self.pieces):
                    self.sent += 1
                    last = index == len(self.pieces) - 1
                    yield StreamDelta(request_id, piece, finish_reason="stop" if last else None)
            except GeneratorExit:
                self.closed_early = self.sent < len(self.pieces)
                raise

        return deltas()


def test_a_policy_answer_next_to_its_quote_gets_a_short_budget():
    decoding = Decoding(max_tokens=120, temperature=0.0, repetition_penalty=1.0, frequency_penalty=0.0,
                        presence_penalty=0.0)  # fmt: skip
    quote = [{"title": "Returns", "text": "You can return unused items within 30 days."}]
    assert answer_budget(decoding, Composition(MODEL, quotes=quote)) == QUOTED_ANSWER_MAX_TOKENS < 120
    assert answer_budget(decoding, Composition(MODEL, cards=[CARD], quotes=quote)) == 120
    assert answer_budget(decoding, Composition(MODEL, cards=[CARD])) == 120


def plan_for(shopper: str) -> Plan:
    composition = Composition(MODEL, facts=FACTS, cards=[CARD])
    content = user_turn_content(shopper, FACTS)
    decoding = Decoding(max_tokens=64, temperature=0.0, repetition_penalty=1.0, frequency_penalty=0.0,
                        presence_penalty=0.0)  # fmt: skip
    return Plan(composition, content, decoding, [1, 2, 3], 64, figures_for(SYSTEM, [], content, composition))


async def run(pieces: list[str], shopper: str = "Do you have a fleece?") -> tuple[list[str], Generated, ScriptedEngine]:
    engine = ScriptedEngine(pieces)
    result = Generated()
    shown = [piece async for piece in generate(engine, "r1", plan_for(shopper), result, session_id=None, cache_salt="")]
    return shown, result, engine


def test_the_answer_may_quote_the_catalog_the_store_and_the_shopper():
    composition = Composition(MODEL, facts=FACTS, cards=[CARD], quotes=[{"title": "FAQ", "text": "10% off for members."}])
    content = user_turn_content("Anything under $150?", FACTS)
    earlier = [Turn("user", "Catalog results: 2. Summit Backpack - 149.00 USD"), Turn("assistant", "It is $149.")]
    allowed = figures_for(SYSTEM, earlier, content, composition)
    assert {Decimal("79"), Decimal("50"), Decimal("150"), Decimal("10"), Decimal("149")} <= allowed
    assert Decimal("68.5") not in allowed


async def test_catalog_figures_stream_through():
    pieces = ["The", " Cascade", " Fleece", " Jacket", " is", " $", "79", ".", "00", " and", " in", " stock", "."]
    shown, result, _ = await run(pieces)
    assert "".join(shown) == "".join(pieces) == result.text
    assert result.finish_reason == "stop" and not result.revised


async def test_an_invented_discount_ends_the_answer_and_aborts_the_request():
    pieces = ["We", " have", " the", " fleece", " for", " $79", ".", " It", " is", " 68", ".", "5", "%", " off", "!",
              " Order", " now", "."]  # fmt: skip
    shown, result, engine = await run(pieces)
    assert "68" not in "".join(shown)
    assert result.finish_reason == FINISH_UNSUPPORTED_FIGURE
    # " It is" had streamed before the figure showed itself: the kept answer takes it back (`end.text`).
    assert result.revised and result.text == "We have the fleece for $79."
    assert engine.closed_early


async def test_the_shoppers_budget_may_be_repeated():
    pieces = ["Yes", ",", " it", " is", " under", " your", " $", "150", " budget", "."]
    shown, result, _ = await run(pieces, shopper="Do you have a fleece under $150?")
    assert "".join(shown) == "Yes, it is under your $150 budget." and result.finish_reason == "stop"
