"""Runs a workload on our engine: the bench owns the loop and calls ``LLMEngine.step()`` itself.

That way arrivals are real wall-clock events (Poisson first turns, later turns when the previous one
finishes), and after every step the runner samples the scheduler's KV counters (for waste, usage and
concurrency) and counts the tokens the model computed (for the roofline).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.driver import SessionDriver
from benchmarks.metrics import KVSample, KVTrace, summarize
from benchmarks.workload import Workload
from inference.core.config import EngineConfig


class ComputeCounter:
    """Counts what the model computes each step (an ``LLMEngine.step_observers`` hook).

    ``tokens``: tokens run through the model (prefill chunks, recomputation after preemption, decodes);
    ``attended``: sum over those tokens of the context each one attends to (for attention FLOPs);
    ``sampled``: tokens that went through the LM head.
    """

    def __init__(self) -> None:
        self.tokens = 0
        self.attended = 0
        self.sampled = 0

    def __call__(self, scheduler_output: Any) -> None:
        for item in scheduler_output.scheduled:
            start, n = item.seq.num_computed_tokens, item.num_new_tokens
            self.tokens += n
            self.attended += n * start + n * (n + 1) // 2
            self.sampled += int(item.samples)


def model_flops(model_config: Any, tokens: int, attended: int, sampled: int) -> float:
    """FLOPs of the work counted by ``ComputeCounter``: 2 per weight per token, plus attention.

    The LM head runs only for sampled tokens (the runner keeps the last position of each sequence); attention
    costs 2 FLOPs per (query, key) pair per head dimension for QK^T and as much again for the weighted sum.
    """
    mc = model_config
    q = mc.num_attention_heads * mc.head_dim
    kv = mc.num_key_value_heads * mc.head_dim
    per_layer = mc.hidden_size * (q + 2 * kv) + q * mc.hidden_size + 3 * mc.hidden_size * mc.intermediate_size
    linear = 2 * per_layer * mc.num_hidden_layers * tokens
    head = 2 * mc.hidden_size * mc.vocab_size * sampled
    attention = 4 * mc.num_hidden_layers * q * attended
    return float(linear + head + attention)


def _warm_up(engine: Any, sampling_params_cls: Any) -> None:
    """One small request first: the first steps pay one-off costs (allocator, kernels) that are not serving."""
    params = sampling_params_cls(temperature=0.0, max_tokens=8, ignore_eos=True)
    engine.add_request("warmup", {"prompt_token_ids": list(range(1000, 1100))}, params)
    while engine.has_unfinished():
        engine.step()
    # The run starts with a cold prefix cache, as every other system does.
    engine.reset_prefix_cache()


def run(workload: Workload, config: EngineConfig, progress: Any = None) -> dict[str, Any]:
    from inference.core.sampling_params import SamplingParams
    from inference.engine import LLMEngine

    engine = LLMEngine(config)
    _warm_up(engine, SamplingParams)
    counter = ComputeCounter()
    engine.step_observers.append(counter)
    preemptions_before = engine.snapshot().num_preemptions
    kv = KVTrace()
    driver = SessionDriver(workload)
    outputs: dict[str, list[int]] = {}
    reasons: dict[str, str] = {}
    t0 = last = driver.start()
    while not driver.done:
        for r in driver.due():
            params = SamplingParams(temperature=0.0, max_tokens=r.max_tokens, ignore_eos=workload.ignore_eos)
            # The session id as retention hint, as the app passes its conversation ids: the engine keeps such
            # blocks longer in the prefix cache, for the conversation's next turn.
            engine.add_request(r.request_id, {"prompt_token_ids": r.prompt_token_ids}, params,
                               session_id=r.session.session_id, arrival_time=r.arrival)
            outputs[r.request_id] = []
        if not engine.has_unfinished():
            driver.wait_for_arrival()
            last = time.monotonic()
            continue
        deltas = engine.step()
        now = time.monotonic()
        snap = engine.snapshot()
        kv.add(KVSample(now - t0, now - last, snap.kv.num_slots_allocated, snap.kv.num_tokens_stored,
                        snap.kv.kv_cache_usage, snap.num_running, snap.num_waiting))
        last = now
        for delta in deltas:
            rid = delta.request_id
            for c in delta.outputs:
                if c.token_ids:
                    driver.first_token(rid, now)
                    outputs[rid].extend(c.token_ids)
                if c.finish_reason is not None:
                    reasons[rid] = c.finish_reason
            if delta.finished:
                driver.finish(rid, outputs.pop(rid), reasons.pop(rid, "stop"), delta.num_cached_tokens, now)
                if progress is not None:
                    progress.update(1)

    result = summarize(driver.records, driver.wall_s, kv, has_prefix_cache=config.enable_prefix_caching)
    flops = model_flops(engine.model_config, counter.tokens, counter.attended, counter.sampled)
    result.update(
        computed_tokens=counter.tokens,
        model_gflop=flops / 1e9,
        achieved_gflops=flops / 1e9 / driver.wall_s if driver.wall_s else None,
        num_preemptions=engine.snapshot().num_preemptions - preemptions_before,
        kv_blocks=engine.snapshot().kv.num_blocks_total,
        projections=engine.runner.projections,  # the projections' kernel: panels-amx, panels-avx512_bf16, ...
        quantization=engine.runner.quantization,  # the weights' scheme applied: none, int8, int4
        steps=kv.step_summary(),
        kv_series=kv.series(),
        records=[r.as_dict() for r in driver.records],
    )
    return result
