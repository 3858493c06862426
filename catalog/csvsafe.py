"""Cells for CSV files people open in a spreadsheet: every CSV the site writes goes through ``cell``.

A text cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return, which some spreadsheets
skip before looking) is run as a formula when the file is opened: ``=HYPERLINK("http://x","c")`` in a label, a
shopper's question or a product handle becomes a live link or worse (OWASP's "CSV injection"). Such a cell is
written with a leading ``'``, which spreadsheets show as text. Empty cells stay empty and numbers stay numbers.

Here, in ``catalog``, because it is the one package both the catalog's own error report and every app may import
(tests/test_architecture.py); it imports nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """``value`` as a CSV cell that a spreadsheet shows as written: None as empty, numbers as they are, text that
    would start a formula behind a ``'``."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def row(values: Iterable[Any]) -> list[Any]:
    """Every value of a row through ``cell``."""
    return [cell(value) for value in values]
