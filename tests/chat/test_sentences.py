"""shop_assistant.chat.guard.sentences: streamed text cut into whole sentences, whatever the pieces."""

from __future__ import annotations

import pytest

from shop_assistant.chat.guard.sentences import SentenceSplitter


def split(pieces: list[str], ended_by_model: bool = True) -> tuple[list[tuple[str, str]], str]:
    splitter = SentenceSplitter()
    out = [(s.separator, s.text) for piece in pieces for s in splitter.feed(piece)]
    last, fragment = splitter.finish(ended_by_model)
    if last is not None:
        out.append((last.separator, last.text))
    return out, fragment


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
def test_any_cut_of_the_stream_gives_the_same_sentences(size):
    text = " It costs 14.95 USD, e.g. for two. Great!\n\n1. The tent\n2. The stove: light.\nAsk me anything"
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    sentences, fragment = split(pieces)
    assert sentences == [
        (" ", "It costs 14.95 USD, e.g. for two."),
        (" ", "Great!"),
        ("\n", "1. The tent"),
        ("\n", "2. The stove: light."),
        ("\n", "Ask me anything."),  # ended by the model: a last sentence without its full stop is whole
    ]
    assert fragment == ""


def test_a_sentence_cut_by_the_budget_is_a_fragment():
    sentences, fragment = split([" It is warm.", " Your tents come with a"], ended_by_model=False)
    assert sentences == [(" ", "It is warm.")] and fragment == "Your tents come with a"


def test_a_decimal_is_not_a_sentence_end_until_the_next_piece_says_so():
    splitter = SentenceSplitter()
    assert splitter.feed("It is 14.") == []
    assert [s.text for s in splitter.feed("95 USD. More")] == ["It is 14.95 USD."]
    assert [s.text for s in splitter.feed(" to come.\n")] == ["More to come."]
