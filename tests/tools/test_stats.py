"""The one percentile of the tools' and the benchmark's figures."""

from __future__ import annotations

import statistics

import pytest

from tools.stats import percentile


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(range(101), 99) == pytest.approx(99.0)


def test_percentile_is_the_median_and_the_inclusive_quantiles() -> None:
    values = [12.5, 3.0, 7.25, 40.0, 8.0, 9.5, 1.0]
    assert percentile(values, 50) == statistics.median(values)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    assert percentile(values, 90) == pytest.approx(cuts[89])
    assert percentile(values, 99) == pytest.approx(cuts[98])
    assert percentile(values, 99, 1) == round(cuts[98], 1)
    assert percentile([], 50, 1) is None
