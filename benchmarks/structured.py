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

The issue's full target (10,000 samples over 20 schemas, on SmolLM2-135M and Qwen2.5-1.5B) is
``--samples 500 --model PATH``; docs/benchmark.md ("Structured output") has what was run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from typing import Any

from benchmarks.structured_schemas import SCHEMAS, validate


def schema_prompt(tokenizer: Any, ask: str, schema: dict[str, Any]) -> str:
    text = f"Reply with JSON only, following this JSON schema: {json.dumps(schema)}\nThe JSON: {ask}."
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)


def run_validity(llm: Any, schemas: int, samples: int, max_tokens: int, seed: int = 0) -> dict[str, Any]:
    """Per schema and in total: samples, stopped, parsed, validated; output tokens and tokens/s."""
    from inference import SamplingParams
    from inference.core.sampling_params import StructuredOutputsParams

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


def run_throughput(llm: Any, requests: int, max_tokens: int, seed: int = 0, repeats: int = 1) -> dict[str, Any]:
    """The mix with every other request constrained, then the same mix free with each request generating exactly
    as many tokens as it did constrained (``ignore_eos``): the same batch shapes step by step, so the ratio of
    the runs' output tokens/s is the cost of the constraints alone. The first constrained run (which also sets
the lengths) is a warm-up; then ``repeats`` pairs, alternated, and each side's median run is reported."""
    from inference import SamplingParams
    from inference.core.sampling_params import StructuredOutputsParams

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
    ap.add_argument("--out", help="write the figures as JSON here")
    return ap


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    from inference import LLM

    llm = LLM(args.model, device=args.device, dtype=args.dtype, max_num_seqs=args.max_num_seqs)
    result: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "model": llm.llm_engine.model_path, "args": vars(args)}
    try:
        v = run_validity(llm, args.schemas, args.samples, args.max_tokens, args.seed)
        result["validity"] = v
        print(f"{'schema':<16} {'samples':>7} {'stopped':>7} {'parsed':>7} {'valid':>7} {'stopped, invalid':>16}")
        for name, row in [*v["per_schema"].items(), ("total", v["total"])]:
            print(f"{name:<16} {row['samples']:>7} {row['stopped']:>7} {row['parsed']:>7} {row['validated']:>7} "
                  f"{row['stopped_invalid']:>16}")
        print(f"{v['output_tokens']} tokens in {v['wall_s']:.1f} s: {v['output_tokens_per_s']:.1f} tokens/s")
        if args.mix:
            tp = result["throughput"] = run_throughput(llm, args.mix, args.max_tokens, args.seed, args.repeats)
            for label in ("0%", "50%"):
                r = tp[label]
                print(f"mix {label:>3} constrained: {r['output_tokens']} tokens in {r['wall_s']:.1f} s = "
                      f"{r['output_tokens_per_s']:.1f} tokens/s")
            print(f"ratio 50% / 0%: {tp['ratio']:.3f}")
    finally:
        llm.close()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
