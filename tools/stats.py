"""The one percentile of the tools' and the benchmark's figures (standard library only: the benchmark's peers'
scripts import it from their own virtual environments)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], q: float, ndigits: int | None = None) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default, and
    ``statistics.quantiles(method="inclusive")``); the 50th is the median. None for no values; rounded to
    ``ndigits`` when given."""
    xs = sorted(values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    value = xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    return value if ndigits is None else round(value, ndigits)
