"""Ids and dates read from requests (issue 23: values past what the database holds were 500s)."""

from __future__ import annotations

import datetime as dt

import pytest

from shop_assistant.runtime.params import MAX_ID, parse_day, parse_id


@pytest.mark.parametrize("value", ["", None, "abc", "-1", "0", "1.5", "²", "١٢", str(MAX_ID + 1), "9" * 30])
def test_what_cannot_be_an_id_is_none(value):
    assert parse_id(value) is None


def test_ids_up_to_64_bits_are_read():
    assert parse_id("42") == 42 and parse_id(f" {MAX_ID} ") == MAX_ID


def test_days():
    assert parse_day("", "from") is None and parse_day(None, "from") is None
    assert parse_day("2026-02-28", "from") == dt.date(2026, 2, 28)
    for bad in ("2026-13-45", "2026-02-30", "yesterday", "2026-1-x"):
        with pytest.raises(ValueError, match="^from: "):
            parse_day(bad, "from")
