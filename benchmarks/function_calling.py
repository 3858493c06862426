"""``python -m benchmarks.function_calling``: does the model pick the right tool, with the right arguments?

Issue 36's target: with ``tool_choice: "auto"``, the right tool and arguments on at least 90% of 50 held-out
shopper prompts over three store tools (``benchmarks/function_calling_prompts.json``: the tools, one system
prompt for all, and each prompt's expected call; written once and never used to tune a prompt or template).

Each prompt goes the way a /v1/chat/completions request with ``tools`` and ``tool_choice: "auto"`` goes: the
body is validated by the API's schema (``shop_assistant.api.schemas``), its tool calling set by
``shop_assistant.api.tools.tool_calling``, the conversation and tools rendered by
``inference.chat_template.encode_chat``, generated greedily (temperature 0) by the engine under the same
constraint (``auto``'s structural tag: calls in the model's format, or prose; ``--unconstrained``: free text, as
before the constraint), and the answer read by the same call reader (Hermes blocks). One prompt at a time, so
each prompt's seconds are its latency.

The scorer (``score``), on the first call of the answer:

- the tool: its name is the expected tool's;
- the arguments: parse as a JSON object; with its null values dropped, validate against the tool's JSON schema
  (``benchmarks.structured_schemas.validate``); every expected argument equals the model's (numbers by value,
  strings and enums as written, after stripping spaces); every free-text field with key words holds at least
  one of them, case-insensitively (English or the prompt's language); and no other argument is set (beyond
  nulls): an unasked ``in_stock: true`` changes the search, so it is a wrong call.

Each miss is put in one category (``miss``): by the wrapper the model wrote instead of a call when it made none
(``<tools>``, doubled braces, a bare JSON object, a fenced block that is no call, prose, or cut by max_tokens),
else a wrong tool or wrong arguments.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.structured_schemas import validate

DATA = Path(__file__).with_name("function_calling_prompts.json")
MODEL = "benchmark"  # the request's model field: the schema wants one, nothing reads it here


def load(path: Path = DATA) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tool_schemas(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each tool's parameters schema, by name."""
    return {t["function"]["name"]: t["function"]["parameters"] for t in data["tools"]}


def expected_example(item: dict[str, Any]) -> dict[str, Any]:
    """A call that meets the prompt's expectations: its arguments with each key-word field's first word."""
    return {**item["arguments"], **{k: words[0] for k, words in item["keywords"].items()}}


def _same(want: Any, got: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and float(got) == float(want)
    if isinstance(want, str):
        return isinstance(got, str) and got.strip() == want
    return want == got


def argument_errors(item: dict[str, Any], arguments: Any, schema: dict[str, Any]) -> list[str]:
    """Why the model's ``arguments`` (the decoded object) are not the expected ones (empty: they are)."""
    if not isinstance(arguments, dict):
        return [f"arguments are not an object: {arguments!r}"]
    given = {k: v for k, v in arguments.items() if v is not None}
    errors = validate(given, schema)
    for key, want in item["arguments"].items():
        if key not in given:
            errors.append(f"missing {key!r}")
        elif not _same(want, given[key]):
            errors.append(f"{key}: {given[key]!r} != {want!r}")
    for key, words in item["keywords"].items():
        value = given.get(key)
        if not isinstance(value, str) or not any(w.casefold() in value.casefold() for w in words):
            errors.append(f"{key}: {value!r} holds none of {words}")
    extra = sorted(set(given) - set(item["arguments"]) - set(item["keywords"]))
    errors += [f"unasked {key}={given[key]!r}" for key in extra]
    return errors


def score(item: dict[str, Any], calls: list[tuple[str, str]], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One prompt's verdict on the answer's ``calls`` (name, arguments as JSON text), as the API returns them."""
    if not calls:
        return {"called": False, "right_tool": False, "right_arguments": False, "why": "no call"}
    name, text = calls[0]
    if name != item["tool"]:
        return {"called": True, "right_tool": False, "right_arguments": False,
                "why": f"called {name}, not {item['tool']}"}
    try:
        arguments = json.loads(text)
    except ValueError:
        return {"called": True, "right_tool": True, "right_arguments": False, "why": f"arguments not JSON: {text!r}"}
    errors = argument_errors(item, arguments, schemas[name])
    return {"called": True, "right_tool": True, "right_arguments": not errors, "why": "; ".join(errors)}


def request_body(data: dict[str, Any], item: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The /v1/chat/completions body the prompt stands for."""
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": data["system"]}, {"role": "user", "content": item["prompt"]}],
        "tools": data["tools"],
        "tool_choice": "auto",
        "temperature": 0,
        "max_tokens": max_tokens,
    }


def miss(row: dict[str, Any]) -> str | None:
    """The category of a prompt's miss (None: right). No call: what the answer's text starts with."""
    if row["right_arguments"]:
        return None
    if row["called"]:
        return "wrong arguments" if row["right_tool"] else "wrong tool"
    text = row["text"].lstrip()
    if row["finish_reason"] == "length":
        return "cut by max_tokens"
    for start, category in (("<tools>", "<tools> wrapper"), ("{{", "{{...}} wrapper"), ("<", "other tag"),
                            ("{", "bare JSON"), ("[", "bare JSON"), ("```", "fenced, no call")):
        if text.startswith(start):
            return category
    return "prose"


def answer(llm: Any, body: dict[str, Any], constrained: bool = True) -> dict[str, Any]:
    """The body through the API's tool calling and the engine: the calls read, the content, tokens, seconds.
    ``constrained``: under the API's constraint of an ``auto`` answer (False: free text)."""
    from inference import SamplingParams
    from inference.chat_template import encode_chat
    from shop_assistant.api import schemas as api_schemas
    from shop_assistant.api.tools import Call, Content, tool_calling

    request = api_schemas.validate(body, "chat")
    calling = tool_calling(request)
    assert calling is not None and calling.schema is None, "tool_choice auto: text read for calls"
    conversation = [{"role": m.role, "content": m.content} for m in request.messages]
    prompt_ids = encode_chat(llm.get_tokenizer(), conversation, tools=calling.rendered)
    params = SamplingParams(temperature=float(request.temperature), max_tokens=request.max_tokens,
                            structured_outputs=calling.constraint() if constrained else None)
    start = time.monotonic()
    out = llm.generate([{"prompt_token_ids": prompt_ids}], params)[0].outputs[0]
    seconds = time.monotonic() - start
    reader = calling.reader()
    events = reader.feed(out.text) + reader.finish()
    return {
        "calls": [(e.name, e.arguments) for e in events if isinstance(e, Call)],
        "content": "".join(e.text for e in events if isinstance(e, Content)),
        "text": out.text,
        "finish_reason": out.finish_reason,
        "prompt_tokens": len(prompt_ids),
        "output_tokens": len(out.token_ids),
        "seconds": seconds,
    }


def tally(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    rows = list(rows)
    n = len(rows)
    counts = {
        "prompts": n,
        "right": sum(r["right_arguments"] for r in rows),  # right tool and right arguments
        "right_tool": sum(r["right_tool"] for r in rows),
        "no_call": sum(not r["called"] for r in rows),
    }
    return {**counts, "accuracy": counts["right"] / n if n else 0.0}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall, per tool and per language; speed over the prompts."""
    tokens = sum(r["output_tokens"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    return {
        "overall": tally(rows),
        "per_tool": {t: tally(r for r in rows if r["tool"] == t) for t in dict.fromkeys(r["tool"] for r in rows)},
        "per_language": {lang: tally(r for r in rows if r["language"] == lang)
                         for lang in dict.fromkeys(r["language"] for r in rows)},
        "output_tokens": tokens,
        "seconds": seconds,
        "output_tokens_per_s": tokens / seconds if seconds else 0.0,
        "misses": dict(Counter(m for r in rows if (m := r.get("miss")) is not None).most_common()),
        "seconds_per_prompt_median": statistics.median(r["seconds"] for r in rows) if rows else 0.0,
        "seconds_per_prompt_mean": seconds / len(rows) if rows else 0.0,
    }


def run(llm: Any, data: dict[str, Any], limit: int | None = None, max_tokens: int = 128,
        ids: list[str] | None = None, constrained: bool = True) -> dict[str, Any]:
    """The prompts (the first ``limit``, or those of ``ids``), one at a time."""
    schemas = tool_schemas(data)
    items = [p for p in data["prompts"] if p["id"] in ids] if ids else data["prompts"][:limit]
    rows = []
    for item in items:
        got = answer(llm, request_body(data, item, max_tokens), constrained)
        verdict = score(item, got["calls"], schemas)
        row = {"id": item["id"], "tool": item["tool"], "language": item["language"], "kind": item["kind"],
               **verdict, **got}
        rows.append({**row, "miss": miss(row)})
    return {"summary": summarize(rows), "prompts": rows}


def table(summary: dict[str, Any]) -> str:
    lines = [f"{'':<20} {'prompts':>7} {'right':>6} {'tool ok':>7} {'no call':>7} {'accuracy':>8}"]
    groups = [("overall", summary["overall"]), *summary["per_tool"].items(),
              *((f"lang {k}", v) for k, v in summary["per_language"].items())]
    for label, t in groups:
        lines.append(f"{label:<20} {t['prompts']:>7} {t['right']:>6} {t['right_tool']:>7} {t['no_call']:>7} "
                     f"{t['accuracy']:>8.1%}")
    lines.append(f"{summary['output_tokens']} output tokens in {summary['seconds']:.1f} s: "
                 f"{summary['output_tokens_per_s']:.1f} tokens/s; seconds per prompt: median "
                 f"{summary['seconds_per_prompt_median']:.2f}, mean {summary['seconds_per_prompt_mean']:.2f}")
    if summary.get("misses"):
        lines.append("misses: " + ", ".join(f"{k} {v}" for k, v in summary["misses"].items()))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.function_calling", description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a model folder or GGUF path, or a name the loader knows (qwen2.5-1.5b); "
                                    "default: the bundled SmolLM2-135M")
    ap.add_argument("--limit", type=int, help="only the first N prompts")
    ap.add_argument("--ids", type=lambda text: text.split(","), help="only these prompts (comma-separated ids)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--unconstrained", action="store_true",
                    help="generate free text read for calls, without the constraint of an auto answer")
    ap.add_argument("--device", help="default: cuda when there is one, else cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path, help="write the summary and every prompt's answer here")
    return ap


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    import torch

    from inference import LLM

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    llm = LLM(args.model, device=device, dtype=args.dtype, max_num_seqs=1)
    try:
        result = run(llm, load(args.data), args.limit, args.max_tokens, args.ids, not args.unconstrained)
    finally:
        llm.close()
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "model": llm.llm_engine.model_path, "device": device,
              "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, **result}
    print(table(result["summary"]))
    for row in result["prompts"]:
        if not row["right_arguments"]:
            print(f"  {row['id']} ({row['miss']}): {row['why']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    return result


if __name__ == "__main__":
    main()
