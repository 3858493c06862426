"""Counters of the scheduler and the KV cache: one step's snapshot, and time averages over many steps."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from inference.core.kv_cache_manager import KVCacheStats


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    kv: KVCacheStats
    num_preemptions: int
    num_waiting: int
    num_running: int

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self.kv)
        out["prefix_cache_hit_rate"] = self.kv.prefix_cache_hit_rate
        out.update(num_preemptions=self.num_preemptions, num_waiting=self.num_waiting, num_running=self.num_running)
        return out


@dataclass
class StatsAccumulator:
    """Time-weighted averages over per-step samples (the benchmark's waste and concurrency figures)."""

    total_time: float = 0.0
    weighted_waste: float = 0.0
    weighted_allocated: float = 0.0
    weighted_running: float = 0.0
    max_running: int = 0
    max_used_blocks: int = 0
    num_samples: int = 0

    def observe(self, stats: SchedulerStats, dt: float = 1.0) -> None:
        self.total_time += dt
        self.weighted_waste += stats.kv.num_slots_wasted * dt
        self.weighted_allocated += stats.kv.num_slots_allocated * dt
        self.weighted_running += stats.num_running * dt
        self.max_running = max(self.max_running, stats.num_running)
        self.max_used_blocks = max(self.max_used_blocks, stats.kv.num_blocks_used)
        self.num_samples += 1

    @property
    def avg_waste_slots(self) -> float:
        return self.weighted_waste / self.total_time if self.total_time else 0.0

    @property
    def avg_waste_fraction(self) -> float:
        """Share of allocated KV slots holding no token, time-averaged."""
        return self.weighted_waste / self.weighted_allocated if self.weighted_allocated else 0.0

    @property
    def avg_running(self) -> float:
        return self.weighted_running / self.total_time if self.total_time else 0.0
