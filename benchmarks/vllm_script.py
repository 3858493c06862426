"""The vllm peer, run by vllm's own python: ``python -m benchmarks.vllm_script --workload-file ...``.

It drives vLLM's ``LLMEngine.step()`` with the same loop and clock as our engine's runner (same sessions, turns
and arrivals) and prints its figures as one JSON line prefixed with ``BENCH_RESULT`` on stdout. It imports only
the standard-library parts of ``benchmarks`` besides vllm, so it runs in vllm's virtual environment.

Set up by the caller (``peers.py``): ``VLLM_CPU_KVCACHE_SPACE`` (GiB), ``VLLM_CPU_OMP_THREADS_BIND`` and
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the engine core runs in this process, so ``step()`` is synchronous like
ours and both cores compute instead of one being kept for a separate scheduler process).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from benchmarks.driver import SessionDriver
from benchmarks.metrics import summarize
from benchmarks.workload import load

RESULT_PREFIX = "BENCH_RESULT "


class _Stats:
    """A vLLM stat logger that keeps the most running requests and the mean KV usage over steps."""

    max_running = 0
    usage_sum = 0.0
    steps = 0

    def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
        pass

    def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
               engine_idx: int = 0) -> None:
        if scheduler_stats is None:
            return
        cls = type(self)
        cls.max_running = max(cls.max_running, scheduler_stats.num_running_reqs)
        cls.usage_sum += scheduler_stats.kv_cache_usage
        cls.steps += 1

    def log_engine_initialized(self) -> None:
        pass

    def log(self) -> None:
        pass

    def record_sleep_state(self, is_awake: int, level: int) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload-file", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--no-prefix-caching", action="store_true")
    args = ap.parse_args(argv)

    from vllm import EngineArgs, SamplingParams
    from vllm.v1.engine.llm_engine import LLMEngine
    from vllm.v1.metrics.loggers import StatLoggerBase

    stats_cls = type("BenchStats", (_Stats, StatLoggerBase), {})
    workload = load(args.workload_file)
    engine_args = EngineArgs(
        model=args.model,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        enable_prefix_caching=not args.no_prefix_caching,
        disable_log_stats=False,
        seed=0,
    )
    engine = LLMEngine.from_engine_args(engine_args, stat_loggers=[stats_cls])

    warm = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    engine.add_request("warmup", {"prompt_token_ids": list(range(1000, 1100))}, warm)
    while engine.has_unfinished_requests():
        engine.step()
    engine.reset_prefix_cache()
    stats_cls.max_running, stats_cls.usage_sum, stats_cls.steps = 0, 0.0, 0

    try:
        from tqdm import tqdm

        bar: Any = tqdm(total=workload.num_requests, desc="vllm", unit="req", file=sys.stderr)
    except ImportError:
        bar = None
    driver = SessionDriver(workload)
    ids: dict[str, str] = {}  # vLLM's internal id (it appends a random suffix) -> ours
    outputs: dict[str, list[int]] = {}
    driver.start()
    while not driver.done:
        for r in driver.due():
            params = SamplingParams(temperature=0.0, max_tokens=r.max_tokens, ignore_eos=workload.ignore_eos)
            internal = engine.add_request(r.request_id, {"prompt_token_ids": r.prompt_token_ids}, params,
                                          arrival_time=time.time())
            ids[internal] = ids[r.request_id] = r.request_id
            outputs[r.request_id] = []
        if not engine.has_unfinished_requests():
            driver.wait_for_arrival()
            continue
        step_outputs = engine.step()
        now = time.monotonic()
        for out in step_outputs:
            rid = ids.get(out.request_id, out.request_id)
            completion = out.outputs[0]
            # Cumulative outputs (vLLM's default kind): the tokens so far, not a delta.
            if completion.token_ids:
                driver.first_token(rid, now)
                outputs[rid] = list(completion.token_ids)
            if out.finished:
                driver.finish(rid, outputs.pop(rid), completion.finish_reason or "stop", out.num_cached_tokens or 0,
                              now)
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    result = summarize(driver.records, driver.wall_s, None, max_concurrent=stats_cls.max_running,
                       has_prefix_cache=not args.no_prefix_caching)
    result["kv_usage_mean"] = stats_cls.usage_sum / stats_cls.steps if stats_cls.steps else None
    result["records"] = [r.as_dict() for r in driver.records]
    sched = engine.vllm_config.scheduler_config
    result["engine_config"] = {
        "max_num_batched_tokens": sched.max_num_batched_tokens,
        "max_num_seqs": sched.max_num_seqs,
        "block_size": engine.vllm_config.cache_config.block_size,
        "dtype": args.dtype,
    }
    try:
        import vllm

        result["version"] = vllm.__version__
    except Exception:  # noqa: BLE001 - the version is a detail of the report
        result["version"] = None
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
