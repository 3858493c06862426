"""Scheduler-only traces: prefix sharing across sessions, and paged vs contiguous KV allocation.

``python -m benchmarks.trace_demo`` drives the ``Scheduler`` alone with fake sampled tokens (no model),
so the figures show the memory manager's behaviour, not model speed. Time is counted in scheduler steps.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inference.core.config import EngineConfig
from inference.core.sampling_params import SamplingParams
from inference.core.scheduler import Scheduler
from inference.core.stats import StatsAccumulator
from inference.core.sequence import Sequence

VOCAB = 49_152


@dataclass
class TraceRequest:
    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    arrival_step: int = 0
    session_id: str | None = None
    cache_salt: str | None = None


@dataclass
class TraceResult:
    steps: int
    stats: dict[str, Any]
    acc: StatsAccumulator
    finished: dict[str, Sequence] = field(default_factory=dict)


def run_trace(
    config: EngineConfig,
    num_blocks: int,
    requests: list[TraceRequest],
    seed: int = 0,
    on_step: Callable[[Scheduler], None] | None = None,
    follow_up: Callable[[Sequence, int], TraceRequest | None] | None = None,
) -> TraceResult:
    """Feed requests at their arrival step, sample random tokens, run until all are done.

    ``follow_up(finished_seq, step)`` may return a new request (a conversation's next turn).
    """
    rng = random.Random(seed)
    sched = Scheduler(config, num_blocks)
    pending = sorted(requests, key=lambda r: r.arrival_step)
    live: dict[str, Sequence] = {}
    finished: dict[str, Sequence] = {}
    acc = StatsAccumulator()
    step = 0
    while pending or sched.has_unfinished_requests():
        while pending and pending[0].arrival_step <= step:
            r = pending.pop(0)
            seq = Sequence(r.request_id, r.prompt_token_ids, SamplingParams(max_tokens=r.max_tokens),
                           session_id=r.session_id, cache_salt=r.cache_salt)
            sched.add(seq)
            live[r.request_id] = seq
        out = sched.schedule()
        sched.update(out, {s.seq.request_id: rng.randrange(VOCAB) for s in out.scheduled if s.samples})
        if on_step is not None:
            on_step(sched)
        acc.observe(sched.snapshot())
        for rid in [rid for rid, seq in live.items() if seq.is_finished]:
            finished[rid] = seq = live.pop(rid)
            nxt = follow_up(seq, step) if follow_up is not None else None
            if nxt is not None:
                pending.append(nxt)
                pending.sort(key=lambda r: r.arrival_step)
        step += 1
    return TraceResult(step, sched.stats(), acc, finished)


# -- figure 1: one system prompt, many sessions ----------------------------------------------------------


def shared_prompt_figure(num_sessions: int = 50, system_len: int = 300, burst: bool = False) -> dict[str, Any]:
    config = EngineConfig(block_size=16, max_num_seqs=64, max_num_batched_tokens=512, max_model_len=2048)
    rng = random.Random(1)
    system = [rng.randrange(VOCAB) for _ in range(system_len)]
    turn1 = [
        TraceRequest(f"s{i}-t1", system + [rng.randrange(VOCAB) for _ in range(rng.randint(10, 60))],
                     max_tokens=rng.randint(20, 60), arrival_step=0 if burst else i, session_id=f"s{i}")
        for i in range(num_sessions)
    ]
    full_blocks = system_len // config.block_size
    holders: list[set[int]] = [set() for _ in range(full_blocks)]

    def record(sched: Scheduler) -> None:
        for seq in sched.running:
            for i, block_id in enumerate(seq.block_table[:full_blocks]):
                if seq.num_computed_tokens >= (i + 1) * config.block_size:
                    holders[i].add(block_id)

    def next_turn(seq: Sequence, step: int) -> TraceRequest | None:
        if not seq.request_id.endswith("-t1"):
            return None
        # The user reads the answer for a few steps, then sends a new message on top of the history.
        message = [rng.randrange(VOCAB) for _ in range(20)]
        return TraceRequest(seq.session_id + "-t2", seq.token_ids + message, max_tokens=20,
                            arrival_step=step + 5, session_id=seq.session_id)

    res = run_trace(config, 2048, turn1, on_step=record, follow_up=next_turn)
    shared_tokens = full_blocks * config.block_size
    turns = {t: [s for rid, s in res.finished.items() if rid.endswith(t)] for t in ("-t1", "-t2")}
    queries = {t: sum(s.num_prompt_tokens for s in seqs) for t, seqs in turns.items()}
    hits = {t: sum(s.num_cached_tokens for s in seqs) for t, seqs in turns.items()}
    return {
        "sessions": num_sessions,
        "arrival": "all at step 0" if burst else "one per step",
        "system_prompt_tokens": system_len,
        "turn1_query_tokens": queries["-t1"],
        "turn1_hit_tokens": hits["-t1"],
        "turn1_hit_rate": hits["-t1"] / queries["-t1"],
        "system_prompt_share_hit": hits["-t1"] / ((num_sessions - 1) * system_len),
        "system_prompt_full_blocks": full_blocks,
        "distinct_blocks_holding_them": sum(len(h) for h in holders),
        # Sessions admitted before the system prompt was cached compute (part of) it themselves.
        "sessions_computing_it": sum(1 for seq in turns["-t1"] if seq.num_cached_tokens < shared_tokens),
        "its_tokens_computed": sum(max(0, shared_tokens - seq.num_cached_tokens) for seq in turns["-t1"]),
        "turn2_query_tokens": queries["-t2"],
        "turn2_hit_tokens": hits["-t2"],
        "turn2_hit_rate": hits["-t2"] / queries["-t2"],
        "preemptions": res.stats["num_preemptions"],
    }


# -- figure 2: paged vs contiguous in the same block budget ---------------------------------------------


def mixed_trace(num_requests: int = 200, seed: int = 2) -> list[TraceRequest]:
    """Mostly short chat turns, some medium, a few long documents; two arrivals per step."""
    rng = random.Random(seed)
    out = []
    for i in range(num_requests):
        kind = rng.random()
        if kind < 0.7:
            prompt_len = rng.randint(20, 200)
        elif kind < 0.95:
            prompt_len = rng.randint(200, 800)
        else:
            prompt_len = rng.randint(800, 1500)
        out.append(TraceRequest(f"r{i}", [rng.randrange(VOCAB) for _ in range(prompt_len)],
                                max_tokens=rng.randint(20, 300), arrival_step=i // 2))
    return out


def allocator_figure(num_blocks: int = 1024) -> dict[str, dict]:
    requests = mixed_trace()
    results = {}
    for allocator in ("paged", "contiguous"):
        # Prefix caching off for both: the only difference is the allocation policy.
        config = EngineConfig(block_size=16, max_num_seqs=64, max_num_batched_tokens=512, max_model_len=2048,
                              enable_prefix_caching=False, kv_allocator=allocator)
        fresh = [TraceRequest(r.request_id, r.prompt_token_ids, r.max_tokens, r.arrival_step) for r in requests]
        res = run_trace(config, num_blocks, fresh)
        results[allocator] = {
            "steps": res.steps,
            "avg_waste_slots": res.acc.avg_waste_slots,
            "avg_waste_fraction": res.acc.avg_waste_fraction,
            "avg_running": res.acc.avg_running,
            "max_running": res.acc.max_running,
            "preemptions": res.stats["num_preemptions"],
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()

    print("== Figure 1: shared 300-token system prompt, block_size 16 ==")
    for burst in (False, True):
        fig = shared_prompt_figure(args.sessions, burst=burst)
        print(f"-- {fig['sessions']} sessions, arrival {fig['arrival']}")
        print(f"turn 1: prefix-cache hits {fig['turn1_hit_tokens']} of {fig['turn1_query_tokens']} prompt tokens "
              f"({fig['turn1_hit_rate']:.1%}); {fig['system_prompt_share_hit']:.1%} of the later sessions' "
              f"system-prompt tokens")
        print(f"the system prompt's {fig['system_prompt_full_blocks']} full blocks were held by "
              f"{fig['distinct_blocks_holding_them']} distinct physical blocks over the whole run "
              f"(sampled after every step); {fig['sessions_computing_it']} session(s) computed "
              f"{fig['its_tokens_computed']} of their tokens")
        print(f"turn 2 (history + answer + new message): hits {fig['turn2_hit_tokens']} of "
              f"{fig['turn2_query_tokens']} prompt tokens ({fig['turn2_hit_rate']:.1%}); "
              f"preemptions {fig['preemptions']}")

    print()
    print("== Figure 2: 200 mixed requests (prompts 20-1500, outputs 20-300 tokens), 1024 blocks of 16 ==")
    results = allocator_figure()
    print(f"{'allocator':<11} {'steps':>6} {'avg waste (slots)':>18} {'avg waste %':>12} "
          f"{'avg running':>12} {'max running':>12} {'preemptions':>12}")
    for name, r in results.items():
        print(f"{name:<11} {r['steps']:>6} {r['avg_waste_slots']:>18.0f} {r['avg_waste_fraction']:>12.1%} "
              f"{r['avg_running']:>12.1f} {r['max_running']:>12} {r['preemptions']:>12}")


if __name__ == "__main__":
    main()
