"""shop_assistant.runtime.text: what a client sent, made storable (no NUL, no lone surrogates), never dropped."""

from __future__ import annotations

import json

import pytest

from shop_assistant.runtime.text import clean_text, clean_value


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("plain words", "plain words"),
        ("nul\x00byte", "nulbyte"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("\udfff\x00", "\ufffd"),
        ("an emoji \U0001f600 stays", "an emoji \U0001f600 stays"),
    ],
)
def test_text_is_cleaned_to_what_every_database_takes(text, cleaned):
    assert clean_text(text) == cleaned
    clean_text(text).encode("utf-8")  # no UnicodeEncodeError


def test_a_json_frame_with_a_lone_surrogate_becomes_storable_text():
    text = json.loads('"hi \\ud83d there"')  # half an emoji: valid JSON, not valid Unicode
    assert clean_text(text) == "hi \ufffd there"


def test_every_string_of_a_value_is_cleaned_keys_included():
    value = {"text\x00": ["a\x00", {"b": "\ud800"}], "n": 3, "none": None}
    assert clean_value(value) == {"text": ["a", {"b": "\ufffd"}], "n": 3, "none": None}
