"""Incremental detokenizer with the bundled model's tokenizer: deltas, UTF-8 hold-back, stop strings."""

from __future__ import annotations

import pytest

from inference.detokenizer import IncrementalDetokenizer, fast_decoder
from inference.core.sampling_params import SamplingParams

TEXTS = [
    "Crème brûlée 🍮 with 🙂👍🏽 and a side of 日本語の文章です.",
    "Plain ASCII: the quick brown fox jumps over the lazy dog.",
    "Ünïcödé ß — “quotes” and emoji 🧑‍🍳 at the end 🍮",
]


def _stream(tokenizer, prompt: str, text: str, params: SamplingParams, stop_token: int | None = None):
    """Feed ``text``'s tokens one at a time; returns (detokenizer, deltas, stop string)."""
    prompt_ids = tokenizer.encode(prompt)
    ids = tokenizer.encode(text)
    detok = IncrementalDetokenizer(fast_decoder(tokenizer), prompt_ids, params)
    deltas: list[str] = []
    stop = None
    for i, t in enumerate(ids):
        stop = detok.update([t])
        deltas.append(detok.get_delta(finished=stop is not None))
        if stop is not None:
            break
    if stop is None and stop_token is not None:
        detok.update([stop_token], stop_terminated=True)
    else:
        detok.flush()
    deltas.append(detok.get_delta(finished=True))
    return detok, deltas, stop


@pytest.mark.parametrize("text", TEXTS)
def test_deltas_join_to_full_decode_and_never_split_a_character(tokenizer, text: str) -> None:
    detok, deltas, _ = _stream(tokenizer, "Dessert:", " " + text, SamplingParams())
    expected = tokenizer.decode(tokenizer.encode(" " + text), skip_special_tokens=True)
    assert "".join(deltas) == expected == detok.output_text
    assert not any("\ufffd" in d for d in deltas)
    # Several tokens are partial UTF-8 bytes, so some steps must have held their text back.
    if not text.isascii():
        assert "" in deltas[:-1]


def test_first_token_keeps_its_leading_space(tokenizer) -> None:
    _, deltas, _ = _stream(tokenizer, "Hello", " world", SamplingParams())
    assert deltas[0] == " world"


@pytest.mark.parametrize("include", [False, True])
def test_stop_string_cuts_text_exactly(tokenizer, include: bool) -> None:
    text = " The price is 12 dollars. STOP here, and more text after it."
    params = SamplingParams(stop=["STOP", "never"], include_stop_str_in_output=include)
    detok, deltas, stop = _stream(tokenizer, "Q:", text, params)
    assert stop == "STOP"
    expected = " The price is 12 dollars. " + ("STOP" if include else "")
    assert detok.output_text == expected
    assert "".join(deltas) == expected


def test_earliest_stop_string_wins_and_may_span_tokens(tokenizer) -> None:
    text = " alpha beta gamma delta"
    detok, _, stop = _stream(tokenizer, "Q:", text, SamplingParams(stop=["delta", "ta gam"]))
    assert stop == "ta gam"
    assert detok.output_text == " alpha be"


def test_text_that_may_become_a_stop_string_is_held_back(tokenizer) -> None:
    params = SamplingParams(stop=["Stop!"])
    detok = IncrementalDetokenizer(fast_decoder(tokenizer), tokenizer.encode("Q:"), params)
    streamed = ""
    for t in tokenizer.encode(" go St"):
        detok.update([t])
        streamed += detok.get_delta()
    assert streamed == " go "  # "St" could still be the start of "Stop"
    for t in tokenizer.encode("ay"):
        detok.update([t])
        streamed += detok.get_delta()
    assert streamed == " go Stay"


def test_every_streamed_prefix_is_a_prefix_of_the_final_text(tokenizer) -> None:
    text = " a, ab, abc, abcd, abcde and the end"
    params = SamplingParams(stop=["abcde", "cd!"])
    detok, deltas, stop = _stream(tokenizer, "Q:", text, params)
    assert stop == "abcde" and detok.output_text == " a, ab, abc, abcd, "
    joined = ""
    for d in deltas:
        joined += d
        assert detok.output_text.startswith(joined)


def test_stop_strings_ignored_before_min_tokens(tokenizer) -> None:
    text = " stop one two stop three"
    ids = tokenizer.encode(text)
    first_stop_end = len(tokenizer.encode(" stop"))
    params = SamplingParams(stop=["stop"], min_tokens=first_stop_end + 1, max_tokens=50)
    detok, _, stop = _stream(tokenizer, "Q:", text, params)
    assert stop == "stop"
    assert detok.output_text == " stop one two "
    assert len(ids) > params.min_tokens


def test_stop_token_text_left_out_unless_included(tokenizer) -> None:
    stop_id = tokenizer.encode(" END")[0]
    for include, expected in [(False, " done"), (True, " done END")]:
        params = SamplingParams(stop_token_ids=[stop_id], include_stop_str_in_output=include)
        detok, deltas, _ = _stream(tokenizer, "Q:", " done", params, stop_token=stop_id)
        assert detok.output_text == expected == "".join(deltas)


def test_incomplete_character_is_flushed_at_finish(tokenizer) -> None:
    ids = tokenizer.encode(" 🍮")
    partial = ids[:-1]  # the dessert emoji is split over several byte tokens
    detok = IncrementalDetokenizer(fast_decoder(tokenizer), tokenizer.encode("Q:"), SamplingParams())
    for t in partial:
        detok.update([t])
    assert "\ufffd" not in detok.get_delta()
    detok.flush()
    assert detok.get_delta(finished=True).endswith("\ufffd")
