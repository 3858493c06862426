"""Ids and dates from query strings and forms: staff (or anyone) can type anything into a URL, and a value Python
parses but the database cannot hold (an id past 64 bits, the 45th of month 13) must be a 400, never a 500."""

from __future__ import annotations

import datetime as dt

from django.utils.dateparse import parse_date

# The largest primary key the databases store (BigAutoField: a signed 64-bit integer).
MAX_ID = 2**63 - 1


def parse_id(value: str | None) -> int | None:
    """A database id, or None for anything that cannot be one ("abc", "²", "-1", "0", more than 64 bits)."""
    value = (value or "").strip()
    if not (value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number if 0 < number <= MAX_ID else None


def parse_day(value: str | None, name: str) -> dt.date | None:
    """A YYYY-MM-DD date, or None when ``value`` is empty; ValueError naming ``name`` for anything else."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        day = parse_date(value)
    except ValueError:  # well formed, but no such day (2026-13-45)
        day = None
    if day is None:
        raise ValueError(f"{name}: {value!r} is not a date (YYYY-MM-DD)")
    return day
