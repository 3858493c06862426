"""The llama-cpp peer: ``python -m benchmarks.llama_cpp_script --workload-file ... --gguf ...``.

llama-cpp-python's API serves one request at a time, so requests run first come, first served. Its
``generate`` keeps the KV of the previous context and reuses the longest common prefix with the next prompt;
that reuse is reported as its prefix-cache hits. Prints one ``BENCH_RESULT`` JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from benchmarks.driver import DueRequest, SessionDriver
from benchmarks.metrics import summarize
from benchmarks.workload import load

RESULT_PREFIX = "BENCH_RESULT "


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload-file", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--max-model-len", type=int, default=2048)
    args = ap.parse_args(argv)

    from llama_cpp import Llama

    workload = load(args.workload_file)
    llm = Llama(model_path=args.gguf, n_ctx=args.max_model_len, n_threads=os.cpu_count(), n_batch=512,
                seed=0, verbose=False)
    eos = set(workload.eos_token_ids) | {llm.token_eos()}
    context: list[int] = []  # what the model's KV holds now

    def serve(r: DueRequest, driver: SessionDriver | None) -> None:
        nonlocal context
        cached = min(_common_prefix(context, r.prompt_token_ids), len(r.prompt_token_ids) - 1)
        tokens: list[int] = []
        reason = "length"
        for token in llm.generate(r.prompt_token_ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0,
                                  repeat_penalty=1.0, reset=True):
            if driver is not None:
                driver.first_token(r.request_id)
            tokens.append(int(token))
            if not workload.ignore_eos and token in eos:
                reason = "stop"
                break
            if len(tokens) >= r.max_tokens:
                break
        # The last token was sampled but not yet run through the model, so its KV is not in the context.
        context = list(r.prompt_token_ids) + tokens[:-1]
        if driver is not None:
            driver.finish(r.request_id, tokens, reason, cached)

    serve(DueRequest("warmup", workload.sessions[0], 0, list(range(1000, 1064)), 4, 0.0), None)
    context = []
    try:
        from tqdm import tqdm

        bar: Any = tqdm(total=workload.num_requests, desc="llama-cpp", unit="req", file=sys.stderr)
    except ImportError:
        bar = None
    driver = SessionDriver(workload)
    driver.start()
    queue: list[DueRequest] = []
    while not driver.done:
        queue.extend(driver.due())
        if not queue:
            driver.wait_for_arrival()
            continue
        serve(queue.pop(0), driver)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    result = summarize(driver.records, driver.wall_s, None, max_concurrent=1)
    result["records"] = [r.as_dict() for r in driver.records]
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
