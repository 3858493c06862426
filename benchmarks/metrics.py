"""Figures of one system's run, from its request records and (for our engine) its per-step KV samples.

Standard library only (its percentile: tools/stats.py): the peers' scripts compute their figures with it too.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceT
from dataclasses import dataclass
from typing import Any

from benchmarks.driver import RequestRecord
from tools.stats import percentile

# The keys every system reports (null where it has no such figure), in table order.
SYSTEM_KEYS = (
    "output_tokens_per_s",
    "requests_per_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "ttft_short_p99_s",
    "tpot_p50_s",
    "kv_waste_frac",
    "max_concurrent_seqs",
    "prefix_hit_rate",
    "peak_rss_mb",
)


@dataclass
class KVSample:
    """The KV cache right after one engine step."""

    t: float  # seconds after the run's start
    dt: float  # the step's duration: the weight of this sample in time averages
    slots_allocated: int
    tokens_stored: int
    usage: float  # used blocks / total blocks
    running: int
    waiting: int


class KVTrace:
    """Per-step samples and their time-weighted averages."""

    def __init__(self) -> None:
        self.samples: list[KVSample] = []

    def add(self, sample: KVSample) -> None:
        self.samples.append(sample)

    @property
    def waste_frac(self) -> float | None:
        """Share of allocated KV slots that hold no token, time-averaged (weights: step durations)."""
        allocated = sum(s.slots_allocated * s.dt for s in self.samples)
        if not allocated:
            return None
        wasted = sum((s.slots_allocated - s.tokens_stored) * s.dt for s in self.samples)
        return wasted / allocated

    @property
    def mean_usage(self) -> float | None:
        total = sum(s.dt for s in self.samples)
        return sum(s.usage * s.dt for s in self.samples) / total if total else None

    @property
    def max_running(self) -> int:
        return max((s.running for s in self.samples), default=0)

    def step_summary(self) -> dict[str, Any]:
        """Step durations by how many sequences ran: where a run's time went (decode width vs step cost)."""
        buckets: dict[str, list[float]] = {}
        for s in self.samples:
            hi = 1
            while hi < s.running:
                hi *= 2
            key = f"{hi // 2 + 1}-{hi}" if hi > 2 else str(s.running)
            buckets.setdefault(key, []).append(s.dt)
        total = sum(s.dt for s in self.samples)
        return {
            "num_steps": len(self.samples),
            "mean_step_s": total / len(self.samples) if self.samples else None,
            "mean_running": sum(s.running * s.dt for s in self.samples) / total if total else None,
            "by_running": {k: {"steps": len(v), "mean_step_s": sum(v) / len(v), "total_s": sum(v)}
                           for k, v in sorted(buckets.items(), key=lambda kv: int(kv[0].split("-")[-1]))},
        }

    def series(self, max_points: int = 400) -> dict[str, list[float]]:
        """Time series for the plot, thinned to at most ``max_points`` samples (each bucket keeps its peak)."""
        samples = self.samples
        if len(samples) > max_points:
            step = len(samples) / max_points
            buckets = [samples[int(i * step) : int((i + 1) * step)] for i in range(max_points)]
            samples = [max(b, key=lambda s: s.usage) for b in buckets if b]
        return {
            "t": [round(s.t, 4) for s in samples],
            "usage": [round(s.usage, 4) for s in samples],
            "waste": [round(1 - s.tokens_stored / s.slots_allocated, 4) if s.slots_allocated else 0.0 for s in samples],
            "running": [s.running for s in samples],
        }


def summarize(
    records: SequenceT[RequestRecord],
    wall_s: float,
    kv: KVTrace | None = None,
    max_concurrent: int | None = None,
    has_prefix_cache: bool = True,
) -> dict[str, Any]:
    """The standard figures (``SYSTEM_KEYS`` but peak RSS, which the worker adds) plus details."""
    out_tokens = sum(r.output_tokens for r in records)
    prompt_tokens = sum(r.prompt_tokens for r in records)
    cached = sum(r.cached_tokens for r in records)
    ttfts = [r.ttft for r in records]
    short = [r.ttft for r in records if r.kind == "short"]
    tpots = [t for t in (r.tpot for r in records) if t is not None]
    reasons: dict[str, int] = {}
    for r in records:
        reasons[r.finish_reason] = reasons.get(r.finish_reason, 0) + 1
    return {
        "output_tokens_per_s": out_tokens / wall_s if wall_s > 0 else None,
        "requests_per_s": len(records) / wall_s if wall_s > 0 else None,
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p99_s": percentile(ttfts, 99),
        "ttft_short_p50_s": percentile(short, 50),
        "ttft_short_p99_s": percentile(short, 99),
        "tpot_p50_s": percentile(tpots, 50),
        "kv_waste_frac": kv.waste_frac if kv is not None else None,
        "kv_usage_mean": kv.mean_usage if kv is not None else None,
        "max_concurrent_seqs": max_concurrent if max_concurrent is not None else (kv.max_running if kv else None),
        "prefix_hit_rate": (cached if has_prefix_cache else 0) / prompt_tokens if prompt_tokens else None,
        "wall_s": wall_s,
        "num_requests": len(records),
        "output_tokens": out_tokens,
        "prompt_tokens": prompt_tokens,
        "cached_prompt_tokens": cached,
        # With ignore_eos every request ends on "length"; without, "stop" counts the model's early ends.
        "finish_reasons": reasons,
    }
