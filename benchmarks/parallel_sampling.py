"""``python -m benchmarks --parallel-sampling N``: the same prompts with n = N and with n = 1, on one engine.

Every session's first prompt is submitted at once, sampled (temperature 1, one seed per request) to the
workload's output length with ``ignore_eos``, so n = N generates exactly N times the tokens of n = 1. Both
runs use one loaded model; the scheduler and prefix cache start empty for each (``LLMEngine.reset``), and
each pair runs with prefix caching on (``paged``) and off (``paged-no-prefix``). With the fork, the N
candidates of a request hold the prompt's KV blocks once and compute it once, so the peak KV blocks of
n = N stay far below N times those of n = 1 (which is what N separate requests would need without prefix
caching).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from benchmarks.engine_runner import ComputeCounter, _warm_up
from benchmarks.workload import Workload
from inference.core.config import EngineConfig


def run_once(engine: Any, workload: Workload, n: int) -> dict[str, Any]:
    """All first turns at once with ``n`` candidates each; the figures of that run."""
    from inference.core.sampling_params import SamplingParams

    counter = ComputeCounter()
    engine.step_observers.append(counter)
    latencies: list[float] = []
    output_tokens = peak_blocks = peak_running = 0
    start = time.monotonic()
    try:
        for i, session in enumerate(workload.sessions):
            turn = session.turns[0]
            params = SamplingParams(n=n, temperature=1.0, seed=i, max_tokens=turn.max_tokens, ignore_eos=True)
            engine.add_request(f"ps{n}-{i}", {"prompt_token_ids": turn.token_ids}, params, arrival_time=start)
        while engine.has_unfinished():
            for out in engine.step():
                output_tokens += sum(len(c.token_ids) for c in out.outputs)
                if out.finished:
                    latencies.append(out.metrics.e2e_latency)
            snap = engine.snapshot()  # after the step: what the running candidates hold
            peak_blocks = max(peak_blocks, snap.kv.num_blocks_used)
            peak_running = max(peak_running, snap.num_running)
    finally:
        engine.step_observers.remove(counter)
    wall = time.monotonic() - start
    return {
        "n": n,
        "requests": len(latencies),
        "sequences": n * len(latencies),
        "output_tokens": output_tokens,
        "wall_s": wall,
        "output_tokens_per_s": output_tokens / wall,
        "time_per_request_s": sum(latencies) / len(latencies),
        "computed_tokens": counter.tokens,
        "peak_kv_blocks": peak_blocks,
        "peak_running_seqs": peak_running,
        "num_preemptions": engine.snapshot().num_preemptions,
    }


def compare(workload: Workload, config: EngineConfig, n: int) -> dict[str, Any]:
    """n = 1 and n = ``n`` on the same prompts, with prefix caching on and off."""
    from inference.engine import LLMEngine
    from inference.core.sampling_params import SamplingParams

    engine = LLMEngine(dataclasses.replace(config, enable_prefix_caching=True))
    _warm_up(engine, SamplingParams)
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, caching in (("paged", True), ("paged-no-prefix", False)):
        runs[name] = []
        for candidates in (1, n):
            engine.reset(enable_prefix_caching=caching)
            runs[name].append(run_once(engine, workload, candidates))
    return {"n": n, "kv_blocks": engine.snapshot().kv.num_blocks_total, "block_size": config.block_size,
            "dtype": str(engine.runner.dtype).removeprefix("torch."), "runs": runs}


def summary_text(doc: dict[str, Any]) -> str:
    n = doc["n"]
    header = (f"{'system':<16} {'n':>2} {'seqs':>5} {'out tok':>8} {'out tok/s':>10} {'s/request':>10} "
              f"{'computed':>9} {'peak KV blocks':>15} {'preempted':>10}")
    lines = [f"parallel sampling: n={n} against n=1 on the same prompts ({doc['dtype']}, KV pool {doc['kv_blocks']} "
             f"blocks of {doc['block_size']})", header]
    for name, (one, many) in doc["runs"].items():
        for r in (one, many):
            lines.append(f"{name:<16} {r['n']:>2} {r['sequences']:>5} {r['output_tokens']:>8} "
                         f"{r['output_tokens_per_s']:>10.1f} {r['time_per_request_s']:>10.2f} "
                         f"{r['computed_tokens']:>9} {r['peak_kv_blocks']:>15} {r['num_preemptions']:>10}")
        lines.append(f"{'':<16} n={n}/n=1: {many['output_tokens_per_s'] / one['output_tokens_per_s']:.2f}x output "
                     f"tokens/s, {many['peak_kv_blocks'] / one['peak_kv_blocks']:.2f}x peak KV blocks "
                     f"({n} separate requests sharing nothing: {n}x)")
    return "\n".join(lines)
