"""shop_assistant.chat.guard.decoding: per-store sampling settings, the loop detector, the human-claim stop strings and the
figure filter."""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog.models import Store
from shop_assistant.chat.models import AnswerSettings
from shop_assistant.chat.guard.decoding import (
    HUMAN_CLAIM_STOPS,
    FigureFilter,
    LoopDetector,
    allowed_figures,
    amounts,
    decoding_for,
    figures_of,
    words_of,
)
from shop_assistant.evaluation.answers import claims_human, is_loop

LOOPING = "I'm happy to help you find a waterproof jacket that fits your budget. " * 8


def feed_in_pieces(detector: LoopDetector, text: str, size: int = 3) -> tuple[bool, str]:
    """Stream ``text`` in small pieces like the engine does; (tripped, the text shown until then)."""
    shown = ""
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        shown += piece
        if detector.feed(piece):
            return True, shown
    return False, shown


def test_the_detector_stops_a_loop_before_the_shopper_sees_a_phrase_three_times():
    tripped, shown = feed_in_pieces(LoopDetector(), LOOPING)
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
def test_the_detector_lets_ordinary_answers_through(text):
    tripped, shown = feed_in_pieces(LoopDetector(), text)
    assert not tripped and shown == text


def test_a_long_phrase_repeated_once_is_a_loop():
    detector = LoopDetector()
    text = "Let me check the catalog for you right now. Let me check the catalog for you right now."
    tripped, _ = feed_in_pieces(detector, text)
    assert tripped


def test_incomplete_words_are_not_counted_yet():
    detector = LoopDetector(short=1, short_repeats=2, long=50)
    assert not detector.feed("tent")
    assert not detector.feed("s ")  # "tents" once
    assert detector.feed("tents ")  # twice


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
    store = Store(slug="s", name="S")
    AnswerSettings(store=store, answer_max_tokens=60, temperature=None, repetition_penalty=1.3)  # the store's own
    decoding = decoding_for(store)
    assert (decoding.max_tokens, decoding.temperature, decoding.repetition_penalty) == (60, 0.3, 1.3)
    assert (decoding.frequency_penalty, decoding.presence_penalty, decoding.seed) == (0.2, 0.0, 7)
    params = decoding.sampling_params(40)
    assert params.max_tokens == 40 and params.repetition_penalty == 1.3 and params.seed == 7
    assert "I'm a human" in params.stop


# --- the figure filter -----------------------------------------------------------------------------------------

FACTS = (
    "Catalog results for this message:\n"
    "Products from the catalog priced up to 150.00 USD:\n"
    "1. Featherlight Down Vest (M) - 109.00 USD (was 129.00) - in stock [SKU DO-FDV-M]\n"
    "2. Cascade Fleece Jacket (M / Forest) - 79.00 USD - in stock [SKU DO-CFJ-M-FOR]\n\n"
    "Shopper: Do you have a waterproof jacket under $150?"
)
POLICIES = "Shipping: standard shipping takes 3-5 business days; orders over $50 ship free."


def stream(figure_filter: FigureFilter, pieces: list[str]) -> list[str]:
    """What the shopper is shown after each piece, and (last) what the end of the stream releases."""
    return [figure_filter.feed(piece) for piece in pieces] + [figure_filter.finish()]


def tokens(text: str) -> list[str]:
    """``text`` cut like the model's tokens: a word with the space before it."""
    import re

    return re.findall(r"\s*\S+", text)


@pytest.mark.parametrize(
    ("figure", "given"),
    [
        ("$79", "79.00 USD"),
        ("79.00 USD", "$79"),
        ("$ 109.00", "109"),
        ("USD 14.95", "costs 14.95 USD"),
        ("$1,299.99", "1299.99"),
        ("89,00 €", "89.00"),
        ("1.299,00 EUR", "1,299.00"),
        ("20% off", "save 20 percent"),
    ],
)
def test_a_figure_is_allowed_by_value_whatever_its_format(figure, given):
    figure_filter = FigureFilter(allowed_figures(given))
    text = f"It is {figure} today."
    assert "".join(stream(figure_filter, tokens(text))) == text
    assert not figure_filter.tripped


@pytest.mark.parametrize(
    "figure", ["$78", "79.01 USD", "$1,299", "68.5% off", "10 percent", "only 7 left", "in stock: 4", "4 units left"]
)
def test_a_figure_nobody_gave_is_refused(figure):
    figure_filter = FigureFilter(allowed_figures(FACTS, POLICIES))
    text = f"Good news. The vest is {figure} this week."
    shown = "".join(stream(figure_filter, tokens(text)))
    assert figure_filter.tripped and figure_filter.refused in figure
    assert figure_filter.kept == "Good news." and shown.startswith("Good news. The vest is") and figure_filter.refused not in shown


def test_thousands_separators_are_never_read_as_decimals():
    assert amounts("189.00") == {Decimal("189")}
    assert amounts("1,299.99") == {Decimal("1299.99")}
    assert amounts("1.299") == {Decimal("1.299"), Decimal("1299")}  # ambiguous: either reading
    assert Decimal("18900") not in allowed_figures("189.00 USD")


def test_a_held_back_figure_is_released_once_complete_and_allowed():
    figure_filter = FigureFilter(allowed_figures(FACTS))
    assert figure_filter.feed("The fleece is ") == "The fleece is "
    assert figure_filter.feed("$7") == ""  # may become $70, $79.50, ...
    assert figure_filter.feed("9") == ""
    assert figure_filter.feed(".") == ""  # "$79." may still become "$79.50"
    assert figure_filter.feed("00 and") == "$79.00 and"
    assert figure_filter.feed(" warm.") == " warm."
    assert figure_filter.finish() == "" and not figure_filter.tripped


def test_the_answer_ends_at_the_sentence_before_an_invented_figure():
    figure_filter = FigureFilter(allowed_figures(FACTS, POLICIES))
    text = "We have the Cascade Fleece Jacket for $79.00. It is 68.5% off today! Order now."
    shown = "".join(stream(figure_filter, tokens(text)))
    assert figure_filter.tripped and figure_filter.refused == "68.5%"
    assert figure_filter.kept == "We have the Cascade Fleece Jacket for $79.00."
    assert "68.5" not in shown
    # Its sentence had begun streaming before the figure showed itself: the client is told to take it back.
    assert shown == "We have the Cascade Fleece Jacket for $79.00. It is "


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Yes, we do. We sell:\n\n1. Cascade Fleece Jacket: $79.00\n2. Featherlight Vest: 68.5% off",
         "Yes, we do. We sell:\n\n1. Cascade Fleece Jacket: $79.00"),
        ("Yes, we do. Here are the jackets we sell:\n\n1. Featherlight Vest: 68.5% off", "Yes, we do."),
    ],
)
def test_a_cut_inside_a_list_leaves_no_dangling_marker_or_heading(text, kept):
    figure_filter = FigureFilter(allowed_figures(FACTS))
    shown = "".join(stream(figure_filter, tokens(text)))
    assert figure_filter.kept == kept and "68.5" not in shown


def test_an_invented_figure_at_the_very_end_is_checked_when_the_stream_ends():
    figure_filter = FigureFilter(allowed_figures(FACTS))
    shown = "".join(stream(figure_filter, tokens("Sure. It costs $28.60")))
    assert figure_filter.tripped and figure_filter.kept == "Sure." and "28" not in shown


def test_the_shoppers_own_budget_and_the_store_policies_are_allowed():
    figure_filter = FigureFilter(allowed_figures(FACTS, POLICIES))
    text = "Both are under your $150 budget, and orders over $50 ship free."
    assert "".join(stream(figure_filter, tokens(text))) == text and not figure_filter.tripped
    assert figures_of(text) == ["$150", "$50"]


def test_skus_and_list_numbers_allow_nothing():
    allowed = allowed_figures("1. Ridgeline Tent - 249.00 USD [SKU RT-2024]")
    assert allowed == {Decimal("249")}


@pytest.mark.parametrize(
    "text",
    [
        "I'm happy to help: the Stormshell is waterproof and breathable, with taped seams and pit zips.",
        "It is in stock and ships the same day; a USB cable and a bag come with it.",
        "Sure! Ask about sizes, colours or anything else.",
    ],
)
def test_words_are_never_held_back(text):
    """Not even words that may lead into a figure ("I" into "in stock: 3", "a" into "aud 5"): only digits wait."""
    figure_filter = FigureFilter(allowed_figures(FACTS))
    pieces = tokens(text) + list(text[:3])  # whole words, and single letters as the first tokens may be
    assert [figure_filter.feed(piece) for piece in tokens(text)] == tokens(text)
    figure_filter = FigureFilter(frozenset())
    assert [figure_filter.feed(piece) for piece in pieces[-3:]] == list(text[:3])
    assert figure_filter.finish() == ""


def test_a_bare_number_waits_one_piece_and_is_then_shown():
    figure_filter = FigureFilter(allowed_figures(FACTS))
    assert [figure_filter.feed(piece) for piece in tokens("The Ridgeline 2-Person Tent, 30 days.")] == [
        "The", " Ridgeline", " 2-Person", " Tent,", " ", "30 days."
    ]


def test_words_shown_before_a_refused_figure_are_taken_back():
    figure_filter = FigureFilter(allowed_figures(FACTS))
    shown = "".join(stream(figure_filter, tokens("Good news. It is in stock: 12 today.")))
    assert shown == "Good news. It is in stock: " and figure_filter.kept == "Good news."
