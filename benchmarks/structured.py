"""``python -m benchmarks.structured``: structured output's validity and its cost, on our engine.

Validity: each of the 20 JSON schemas (``benchmarks.structured_schemas``: nested objects, enums, arrays with
min/max items, bounded numbers, pattern strings) is asked for ``--samples`` times at temperature 1.0 (one seed
per sample), all requests submitted at once; each output is counted as stopped (the grammar ended it, not
``max_tokens``), parsed (``json.loads``) and validated (the schema, by ``structured_schemas.validate``).
Constrained decoding guarantees every stopped output validates; an output cut by ``max_tokens`` is a prefix.

Throughput: one request mix (each schema's prompt, round robin, ``--mix`` requests, temperature 1.0) run twice
on the same engine: with 50% of the requests constrained to their schema (the others free, to ``max_tokens``),
then with none, each request generating exactly the tokens it did in the first run; output tokens/s of each and
their ratio (50% / 0%), the cost of the constraints (masks, matchers) at equal work (median of ``--repeats``
alternated pairs, after a warm-up run).

vLLM beside it (``--vllm-python PATH``): the same two parts, the same prompts, seeds and schemas, on the same
weights (the folder our loader made of the model) and dtype, with vLLM's own structured outputs (its default
backend), in vLLM's virtual environment: this module again, run by that python with ``--engine vllm``. Both
engines take the same request API (``SamplingParams(structured_outputs=StructuredOutputsParams(json=...))``,
``generate``), so one code path measures both.

The issue's full target (10,000 samples over 20 schemas, on SmolLM2-135M and Qwen2.5-1.5B) is
``--samples 500 --model PATH``; docs/benchmark.md ("Structured output") has what was run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from typing import Any

from benchmarks.structured_schemas import SCHEMAS, validate

RESULT_PREFIX = "BENCH_RESULT "  # the line a peer's run prints its figures on (benchmarks.peers)


def request_api(engine: str) -> tuple[Any, Any]:
    """(SamplingParams, StructuredOutputsParams) of ``engine``: "ours" or "vllm" (run by vLLM's python)."""
    if engine == "vllm":
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams
    else:
        from inference import SamplingParams
        from inference.core.sampling_params import StructuredOutputsParams
    return SamplingParams, StructuredOutputsParams


def schema_prompt(tokenizer: Any, ask: str, schema: dict[str, Any]) -> str:
    text = f"Reply with JSON only, following this JSON schema: {json.dumps(schema)}\nThe JSON: {ask}."
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)


def run_validity(llm: Any, schemas: int, samples: int, max_tokens: int, seed: int = 0,
                 engine: str = "ours") -> dict[str, Any]:
    """Per schema and in total: samples, stopped, parsed, validated; output tokens and tokens/s."""
    SamplingParams, StructuredOutputsParams = request_api(engine)

    tokenizer = llm.get_tokenizer()
    prompts, params, names = [], [], []
    for name, schema, ask in SCHEMAS[:schemas]:
        so = StructuredOutputsParams(json=schema)
        for i in range(samples):
            prompts.append(schema_prompt(tokenizer, ask, schema))
            params.append(SamplingParams(temperature=1.0, seed=seed + i, max_tokens=max_tokens, structured_outputs=so))
            names.append(name)
    start = time.monotonic()
    outs = llm.generate(prompts, params)
    wall = time.monotonic() - start
    keys = ("samples", "stopped", "parsed", "validated", "stopped_invalid")
    per: dict[str, dict[str, int]] = {name: dict.fromkeys(keys, 0) for name, _, _ in SCHEMAS[:schemas]}
    schema_of = {name: schema for name, schema, _ in SCHEMAS}
    tokens = 0
    for name, out in zip(names, outs):
        c = out.outputs[0]
        tokens += len(c.token_ids)
        row = per[name]
        row["samples"] += 1
        stopped = c.finish_reason == "stop"
        row["stopped"] += stopped
        try:
            value = json.loads(c.text)
        except json.JSONDecodeError:
            row["stopped_invalid"] += stopped
            continue
        row["parsed"] += 1
        valid = not validate(value, schema_of[name])
        row["validated"] += valid
        row["stopped_invalid"] += stopped and not valid
    total = {k: sum(r[k] for r in per.values()) for k in keys}
    return {"per_schema": per, "total": total, "output_tokens": tokens, "wall_s": wall, "output_tokens_per_s": tokens / wall}


def run_throughput(llm: Any, requests: int, max_tokens: int, seed: int = 0, repeats: int = 1,
                   engine: str = "ours") -> dict[str, Any]:
    """The mix with every other request constrained, then the same mix free with each request generating exactly
    as many tokens as it did constrained (``ignore_eos``): the same batch shapes step by step, so the ratio of
    the runs' output tokens/s is the cost of the constraints alone. The first constrained run (which also sets
the lengths) is a warm-up; then ``repeats`` pairs, alternated, and each side's median run is reported."""
    SamplingParams, StructuredOutputsParams = request_api(engine)

    tokenizer = llm.get_tokenizer()
    prompts = [schema_prompt(tokenizer, SCHEMAS[i % len(SCHEMAS)][2], SCHEMAS[i % len(SCHEMAS)][1]) for i in range(requests)]

    def run(params: list[Any]) -> tuple[list[int], dict[str, Any]]:
        start = time.monotonic()
        outs = llm.generate(prompts, params)
        wall = time.monotonic() - start
        lengths = [len(o.outputs[0].token_ids) for o in outs]
        n_constrained = sum(p.structured_outputs is not None for p in params)
        return lengths, {"requests": requests, "constrained": n_constrained, "output_tokens": sum(lengths),
                         "wall_s": wall, "output_tokens_per_s": sum(lengths) / wall}

    half = []
    for i in range(requests):
        so = StructuredOutputsParams(json=SCHEMAS[i % len(SCHEMAS)][1]) if i % 2 == 0 else None
        half.append(SamplingParams(temperature=1.0, seed=seed + i, max_tokens=max_tokens, ignore_eos=so is None,
                                   structured_outputs=so))
    lengths, _ = run(half)
    free = [SamplingParams(temperature=1.0, seed=seed + i, max_tokens=n, ignore_eos=True) for i, n in enumerate(lengths)]
    # Alternated, the median of each: a shared machine's noise falls on both runs alike.
    runs: dict[str, list[dict[str, Any]]] = {"0%": [], "50%": []}
    for _ in range(repeats):
        runs["50%"].append(run(half)[1])
        runs["0%"].append(run(free)[1])
    median = {k: sorted(v, key=lambda r: r["wall_s"])[len(v) // 2] for k, v in runs.items()}
    return {**median, "ratio": median["50%"]["output_tokens_per_s"] / median["0%"]["output_tokens_per_s"],
            "repeats": repeats}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.structured", description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a model folder or GGUF path, or a name the loader knows (default: the bundled SmolLM2-135M)")
    ap.add_argument("--schemas", type=int, default=len(SCHEMAS), help=f"how many of the {len(SCHEMAS)} schemas")
    ap.add_argument("--samples", type=int, default=25, help="samples per schema (the issue's target: 500)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--mix", type=int, default=32, help="requests of the throughput mix (0: skip it)")
    ap.add_argument("--repeats", type=int, default=3, help="throughput pairs to take the median of")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--max-num-seqs", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vllm-python", help="also run vLLM (its virtual environment's python) on the same requests")
    ap.add_argument("--engine", choices=("ours", "vllm"), default="ours", help=argparse.SUPPRESS)  # vllm: the peer's run
    ap.add_argument("--out", help="write the figures as JSON here")
    return ap


def measure(llm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Both parts on one loaded engine (``--mix 0``: validity only), printed as they finish."""
    result: dict[str, Any] = {}
    v = result["validity"] = run_validity(llm, args.schemas, args.samples, args.max_tokens, args.seed, args.engine)
    print(f"{args.engine}:\n{'schema':<16} {'samples':>7} {'stopped':>7} {'parsed':>7} {'valid':>7} {'stopped, invalid':>16}")
    for name, row in [*v["per_schema"].items(), ("total", v["total"])]:
        print(f"{name:<16} {row['samples']:>7} {row['stopped']:>7} {row['parsed']:>7} {row['validated']:>7} "
              f"{row['stopped_invalid']:>16}")
    print(f"{v['output_tokens']} tokens in {v['wall_s']:.1f} s: {v['output_tokens_per_s']:.1f} tokens/s")
    if args.mix:
        tp = result["throughput"] = run_throughput(llm, args.mix, args.max_tokens, args.seed, args.repeats, args.engine)
        for label in ("0%", "50%"):
            r = tp[label]
            print(f"mix {label:>3} constrained: {r['output_tokens']} tokens in {r['wall_s']:.1f} s = "
                  f"{r['output_tokens_per_s']:.1f} tokens/s")
        print(f"ratio 50% / 0%: {tp['ratio']:.3f}")
    return result


def run_peer(args: argparse.Namespace) -> dict[str, Any]:
    """This module's run by vLLM's python (``--engine vllm``): its figures on one ``RESULT_PREFIX`` line."""
    from vllm import LLM

    llm = LLM(model=args.model, dtype=args.dtype, max_num_seqs=args.max_num_seqs, max_model_len=2048, seed=args.seed)
    result = {"engine": "vllm", "structured_outputs_backend": "auto (vLLM's default)", **measure(llm, args)}
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    if args.engine == "vllm":
        return run_peer(args)
    from benchmarks.peers import run_script, vllm_env
    from benchmarks.systems import resolved_dtype
    from inference import LLM

    llm = LLM(args.model, device=args.device, dtype=args.dtype, max_num_seqs=args.max_num_seqs)
    result: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "model": llm.llm_engine.model_path, "args": vars(args)}
    try:
        result |= measure(llm, args)
    finally:
        llm.close()
    if args.vllm_python:
        peer_args = [*(argv if argv is not None else sys.argv[1:])]
        peer_args = _without(peer_args, "--vllm-python", "--out", "--model", "--dtype")
        peer_args += ["--engine", "vllm", "--model", result["model"], "--dtype", resolved_dtype(args.dtype, args.device)]
        result["vllm"] = run_script(args.vllm_python, "benchmarks.structured", peer_args, vllm_env(4, args.device))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return result


def _without(argv: list[str], *options: str) -> list[str]:
    """``argv`` less ``options`` and their values (``--opt value`` or ``--opt=value``)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        elif arg.split("=", 1)[0] not in options:
            kept.append(arg)
    return kept


if __name__ == "__main__":
    main()
