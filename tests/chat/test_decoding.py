"""shop_assistant.chat.decoding: per-store sampling settings, the loop guard and the human-claim stop strings."""

from __future__ import annotations

import pytest

from catalog.models import Store
from shop_assistant.chat.decoding import HUMAN_CLAIM_STOPS, LoopGuard, decoding_for, words_of
from shop_assistant.chat.evaluation import claims_human, is_loop

LOOPING = "I'm happy to help you find a waterproof jacket that fits your budget. " * 8


def feed_in_pieces(guard: LoopGuard, text: str, size: int = 3) -> tuple[bool, str]:
    """Stream ``text`` in small pieces like the engine does; (tripped, the text shown until then)."""
    shown = ""
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        shown += piece
        if guard.feed(piece):
            return True, shown
    return False, shown


def test_the_guard_stops_a_loop_before_the_shopper_sees_a_phrase_three_times():
    tripped, shown = feed_in_pieces(LoopGuard(), LOOPING)
    assert tripped
    assert is_loop(LOOPING) and not is_loop(shown)
    assert len(shown) < len(LOOPING) / 3


@pytest.mark.parametrize(
    "text",
    [
        "Yes, the Men's Stormshell Rain Jacket is 189.00 USD and in stock. It is waterproof and breathable.",
        "You can return unused items within 30 days of delivery. Refunds arrive within 5 business days.",
        "We have the Ridgeline 2-Person Tent for 249.00 USD and the Basecamp 6 Family Tent for 429.00 USD.",
    ],
)
def test_the_guard_lets_ordinary_answers_through(text):
    tripped, shown = feed_in_pieces(LoopGuard(), text)
    assert not tripped and shown == text


def test_a_long_phrase_repeated_once_is_a_loop():
    guard = LoopGuard()
    text = "Let me check the catalog for you right now. Let me check the catalog for you right now."
    tripped, _ = feed_in_pieces(guard, text)
    assert tripped


def test_incomplete_words_are_not_counted_yet():
    guard = LoopGuard(short=1, short_repeats=2, long=50)
    assert not guard.feed("tent")
    assert not guard.feed("s ")  # "tents" once
    assert guard.feed("tents ")  # twice


def test_words_keep_prices_whole():
    assert words_of("It costs 14.95 USD, isn't it?") == ["it", "costs", "14.95", "usd", "isn't", "it"]


@pytest.mark.parametrize("claim", ["I'm your human agent", "I am a real person", "Hi, I'm a human."])
def test_human_claims_are_stop_strings_and_detected(claim):
    assert any(stop in claim for stop in HUMAN_CLAIM_STOPS)
    assert claims_human(claim)


@pytest.mark.parametrize("text", ["I'll connect you with a human agent.", "Ask for a person at any time."])
def test_offering_a_person_is_not_a_claim(text):
    assert not claims_human(text)
    assert not any(stop in text for stop in HUMAN_CLAIM_STOPS)


def test_store_settings_override_the_site_defaults(settings):
    settings.CHAT = {**settings.CHAT, "max_tokens": 100, "temperature": 0.3, "repetition_penalty": 1.1,
                     "frequency_penalty": 0.2, "presence_penalty": 0.0, "seed": 7}
    store = Store(slug="s", name="S", answer_max_tokens=60, temperature=None, repetition_penalty=1.3)
    decoding = decoding_for(store)
    assert (decoding.max_tokens, decoding.temperature, decoding.repetition_penalty) == (60, 0.3, 1.3)
    assert (decoding.frequency_penalty, decoding.presence_penalty, decoding.seed) == (0.2, 0.0, 7)
    params = decoding.sampling_params(40)
    assert params.max_tokens == 40 and params.repetition_penalty == 1.3 and params.seed == 7
    assert "I'm a human" in params.stop
