"""The one cell escaper every CSV export uses (catalog.csvsafe): formulas become text, nothing else changes."""

from __future__ import annotations

import csv
import io

from catalog import csvsafe


def test_text_that_would_start_a_formula_is_quoted_and_nothing_else_changes():
    for formula in ('=HYPERLINK("http://x","c")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert csvsafe.cell(formula) == "'" + formula
    assert csvsafe.row([None, "", 0, -5, 2.5, "plain", "a=b"]) == ["", "", 0, -5, 2.5, "plain", "a=b"]


def test_a_written_row_reads_back_as_text():
    out = io.StringIO()
    csv.writer(out).writerow(csvsafe.row(["=cmd|' /C calc'!A0", None, 3]))
    assert next(csv.reader(io.StringIO(out.getvalue()))) == ["'=cmd|' /C calc'!A0", "", "3"]
