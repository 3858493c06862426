"""Runs a peer's script with the peer's own python and reads its figures back.

The peers live in their own virtual environments (their pins conflict with ours), so they run as child
processes of the worker: stdout carries one ``BENCH_RESULT`` JSON line, stderr (logs, progress bar) passes
through. Peak memory is the peak of the summed RSS of the child's whole process tree, polled every 0.2 s,
since vLLM may start helper processes of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.systems import resolved_dtype

RESULT_PREFIX = "BENCH_RESULT "
REPO_ROOT = Path(__file__).resolve().parents[1]


class PeerError(RuntimeError):
    pass


def _tree_rss(proc: Any) -> int:
    import psutil

    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def run_script(python: str, module: str, args: list[str], env: dict[str, str] | None = None,
               timeout: float | None = None) -> dict[str, Any]:
    """Run ``python -m module args`` from the repo root; its result dict, with ``peak_rss_mb`` added."""
    import psutil

    full_env = dict(os.environ)
    full_env.update(env or {})
    # Only the standard-library modules of benchmarks are imported there; the repo root makes them visible.
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    proc = subprocess.Popen([python, "-m", module, *args], cwd=REPO_ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=None, text=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout if timeout else None
    while proc.poll() is None:
        peak = max(peak, _tree_rss(ps))
        if deadline and time.monotonic() > deadline:
            proc.kill()
            raise PeerError(f"{module} ran past {timeout:.0f} s")
        time.sleep(0.2)
    reader.join(timeout=10)
    result_lines = [line for line in lines if line.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not result_lines:
        tail = "".join(lines[-5:]).strip()
        raise PeerError(f"{module} exited with code {proc.returncode} without a result. {tail}")
    for line in lines:
        if not line.startswith(RESULT_PREFIX):
            sys.stderr.write(line)  # its own log lines, kept visible
    result = json.loads(result_lines[-1][len(RESULT_PREFIX):])
    result["peak_rss_mb"] = peak / 2**20
    result["rss_method"] = "peak of the summed RSS of the peer's process tree, polled every 0.2 s"
    return result


def run_vllm(python: str, workload_file: str, model_dir: str, max_model_len: int, max_num_seqs: int,
             kv_gib: int, device: str, timeout: float | None = None, dtype: str = "auto") -> dict[str, Any]:
    """vLLM on the same workload, in ``dtype`` ("auto": our engine's choice on this machine)."""
    args = ["--workload-file", workload_file, "--model", model_dir, "--max-model-len", str(max_model_len),
            "--max-num-seqs", str(max_num_seqs), "--dtype", resolved_dtype(dtype, device)]
    return run_script(python, "benchmarks.vllm_script", args, vllm_env(kv_gib, device), timeout)


def vllm_env(kv_gib: int, device: str) -> dict[str, str]:
    """How every vLLM peer runs: its engine core in the calling process (``step()`` synchronous like ours, both
    cores computing instead of one kept for a scheduler process), offline; on CPU both cores bound."""
    env = {
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    if device == "cpu":
        # Binding both cores gave +67%; the KV space is whole GiB.
        cores = os.cpu_count() or 1
        # Without OMP_NUM_THREADS it drops torch to one thread when the engine core runs in-process.
        env.update(VLLM_CPU_KVCACHE_SPACE=str(kv_gib), VLLM_CPU_OMP_THREADS_BIND=f"0-{cores - 1}",
                   OMP_NUM_THREADS=str(cores))
    return env


def run_llama_cpp(python: str, workload_file: str, gguf: str, max_model_len: int,
                  timeout: float | None = None) -> dict[str, Any]:
    args = ["--workload-file", workload_file, "--gguf", gguf, "--max-model-len", str(max_model_len)]
    return run_script(python, "benchmarks.llama_cpp_script", args, None, timeout)
