"""The run's PNG: throughput and TTFT p99 per system, and KV usage over time for paged vs contiguous."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(doc: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    measured = {n: e for n, e in doc["systems"].items() if not e.get("skipped")}
    names = list(measured)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # One colour per system in every panel, whichever systems this run measured.
    color = {name: cycle[i % len(cycle)] for i, name in enumerate(doc["systems"])}

    ax = axes[0]
    tps = [measured[n]["output_tokens_per_s"] or 0 for n in names]
    ax.bar(names, tps, color=[color[n] for n in names])
    for i, v in enumerate(tps):
        ax.annotate(f"{v:.0f}", (i, v), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput")
    ax.tick_params(axis="x", rotation=30)

    ax = axes[1]
    width = 0.4
    xs = range(len(names))
    ax.bar([x - width / 2 for x in xs], [measured[n]["ttft_p99_s"] or 0 for n in names], width, label="all")
    ax.bar([x + width / 2 for x in xs], [measured[n]["ttft_short_p99_s"] or 0 for n in names], width,
           label="short questions")
    ax.set_xticks(list(xs), names, rotation=30)
    ax.set_ylabel("seconds")
    ax.set_title("Time to first token, p99")
    ax.legend(fontsize=8)

    ax = axes[2]
    series = doc.get("series", {})
    for name in (n for n in ("paged", "contiguous") if n in series):
        s = series[name]
        ax.plot(s["t"], [u * 100 for u in s["usage"]], color=color[name], label=f"{name}: blocks in use")
        holding = [u * (1 - w) * 100 for u, w in zip(s["usage"], s["waste"])]
        ax.plot(s["t"], holding, color=color[name], linestyle="--", label=f"{name}: slots holding tokens")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("% of the KV budget")
    ax.set_ylim(0, 105)
    ax.set_title(f"KV cache over time ({doc['config']['kv_blocks']} blocks)")
    ax.legend(fontsize=7)

    wl = doc["workload"]
    fig.suptitle(f"{wl['name']}: {wl['num_sessions']} sessions, {wl['num_requests']} requests, "
                 f"{doc['machine']['device']}, {doc['machine']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
