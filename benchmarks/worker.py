"""One system's measurement, run in a fresh process (``python -m benchmarks --_worker NAME ...``).

A fresh process per system keeps the systems from sharing allocator state or warm caches, and makes the peak
RSS (``getrusage``) that system's own: interpreter, libraries, weights and KV cache included.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

from benchmarks import workload as workload_mod
from benchmarks.systems import SYSTEMS, llama_cpp_python, resolved_dtype, vllm_python
from inference.core.config import EngineConfig

OWN_RSS_METHOD = "peak RSS of the system's own worker process (getrusage ru_maxrss): weights and KV cache included"


def _progress(name: str, total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=f"{name:>15}", unit="req", file=sys.stderr, dynamic_ncols=True)


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import engine_runner, hf_static, peers

    system = SYSTEMS[name]
    workload = workload_mod.load(args.workload_file)
    if system.family == "peer":
        if name == "vllm":
            return peers.run_vllm(str(vllm_python(args.vllm_python)), args.workload_file, args.model_dir,
                                  args.max_model_len, args.max_num_seqs, args.vllm_kv_gib, args.device,
                                  args.peer_timeout, args.dtype)
        return peers.run_llama_cpp(llama_cpp_python(args.llama_cpp_python), args.workload_file, args.gguf,
                                   args.max_model_len, args.peer_timeout)
    bar = _progress(name, workload.num_requests)
    try:
        if system.family == "hf":
            result = hf_static.run(workload, args.model_dir, args.device, args.hf_batch_size, bar)
        else:
            config = EngineConfig(
                model=args.model_dir,
                kv_allocator="contiguous" if name == "contiguous" else "paged",
                # Only "paged" shares prefixes: contiguous is the pre-PagedAttention baseline, whose per-request
                # reservations share nothing (and paged-no-prefix vs contiguous isolates the allocation policy).
                enable_prefix_caching=name == "paged",
                num_gpu_blocks_override=args.kv_blocks,
                device=args.device,
                dtype=args.dtype,
                block_size=args.block_size,
                max_num_seqs=args.max_num_seqs,
                max_num_batched_tokens=args.max_num_batched_tokens,
                max_model_len=args.max_model_len,
                quantization=args.quantization,
            )
            result = engine_runner.run(workload, config, bar)
    finally:
        bar.close()
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result["rss_method"] = OWN_RSS_METHOD
    if args.device.startswith("cuda"):
        import torch

        # RSS is host memory only; the weights and KV cache live on the GPU there.
        result["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return result


def main(args: argparse.Namespace) -> None:
    from benchmarks.roofline import matmul_gflops

    # How much of the machine this system had: others' load swings during a run, and the systems run one
    # after another, so each one records the matmul rate just before it and the load around it.
    before = matmul_gflops(args.device, seconds=1.0, dtype=resolved_dtype(args.dtype, args.device))["matmul_gflops"]
    load_start = os.getloadavg()[0]
    result = measure(args._worker, args)
    result["conditions"] = {"matmul_gflops_before": before, "loadavg_1min": [load_start, os.getloadavg()[0]]}
    Path(args._result).write_text(json.dumps(result))
