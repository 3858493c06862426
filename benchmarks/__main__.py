"""``python -m benchmarks``: run every system on the same requests, print a table, write JSON and a plot.

Each system runs in a fresh ``python -m benchmarks --_worker NAME`` process, one after another, on the
workload file this process writes first. See docs/benchmark.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks import workload as workload_mod
from benchmarks.systems import (
    SYSTEMS,
    llama_cpp_python,
    missing_package,
    parse_systems,
    resolved_dtype,
    vllm_python,
)

FULL_SESSIONS = 48
QUICK_SESSIONS = 12
KV_MEMORY_MB = 512  # the app's CPU default KV memory (README: ENGINE_KV_CACHE_MEMORY)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    w = ap.add_argument_group("workload")
    w.add_argument("--workload", choices=workload_mod.WORKLOADS, default="ecommerce")
    w.add_argument("--workload-file", help="JSON file of sessions (the format of the saved *.workload.json)")
    w.add_argument("--requests", type=int, help=f"sessions (default {FULL_SESSIONS}; {QUICK_SESSIONS} with --quick); "
                   "a support conversation is one session of several requests")
    w.add_argument("--rate", type=float, help="Poisson arrivals of sessions per second (default: all at once)")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--ignore-eos", action="store_true", help="outputs run to the workload's exact lengths")
    w.add_argument("--quick", action="store_true", help="the same comparison, smaller: a few minutes on 2 cores")
    w.add_argument("--parallel-sampling", type=int, metavar="N",
                   help="instead of the systems: the workload's first prompts with n=N and with n=1 on our engine "
                        "(prefix caching on and off): output tokens/s, time per request, peak KV blocks")
    s = ap.add_argument_group("systems")
    s.add_argument("--model", help="every system's model: a name (smollm2-135m, qwen2.5-1.5b), a .gguf file or a "
                   "Hugging Face folder, as ENGINE_MODEL takes (default: the bundled SmolLM2-135M-Instruct)")
    s.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {', '.join(SYSTEMS)}")
    s.add_argument("--device", default="cpu")
    s.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto",
                   help="of our engine's systems and vLLM (auto: the engine's choice, bf16 on CUDA and on CPUs with bf16 instructions); hf-static "
                        "stays float32 on CPU")
    s.add_argument("--quantization", choices=["none", "int8", "int4", "auto"], default="none",
                   help="our engine's weights (CPU, bf16; EngineConfig.quantization); peers run theirs as they are")
    s.add_argument("--kv-memory-mb", type=float, default=KV_MEMORY_MB, help="KV budget of our engine's systems")
    s.add_argument("--kv-blocks", type=int, help="KV budget in blocks (overrides --kv-memory-mb)")
    s.add_argument("--block-size", type=int, default=16)
    s.add_argument("--max-num-seqs", type=int, default=64)
    s.add_argument("--max-num-batched-tokens", type=int, default=512)
    s.add_argument("--max-model-len", type=int, default=2048)
    s.add_argument("--hf-batch-size", type=int, default=16)
    s.add_argument("--vllm-python", help="python of vllm's venv (default $BENCH_VLLM_PYTHON)")
    s.add_argument("--vllm-kv-gib", type=int, default=1, help="vLLM's KV space on CPU, whole GiB (it takes no less)")
    s.add_argument("--llama-cpp-python",
                   help="python with llama-cpp-python (default $BENCH_LLAMA_CPP_PYTHON or this one)")
    s.add_argument("--peer-timeout", type=float, default=3600.0, help="seconds before a peer is stopped")
    s.add_argument("--omp-wait-policy", choices=["passive", "active", "spin-then-sleep"],
                   help="of every system (OMP_WAIT_POLICY; default: the environment's, else libgomp's own "
                        "spin-then-sleep)")
    ap.add_argument("--out", help="result JSON (default bench-results/<timestamp>.json); the PNG goes next to it")
    ap.add_argument("--no-plot", action="store_true")
    # Internal: one system in a fresh process.
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    ap.add_argument("--_result", help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    ap.add_argument("--gguf", help=argparse.SUPPRESS)
    return ap


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: str) -> dict[str, Any]:
    import psutil
    import torch
    import transformers

    info = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
        "loadavg_start": list(os.getloadavg()),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset (libgomp: spin, then sleep)"),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def model_info(args: argparse.Namespace) -> dict[str, Any]:
    """Which model every system ran: the name asked for, the converted folder (its dtype) and the GGUF."""
    from inference.worker.loader import BUNDLED_ALIAS

    config = json.loads((Path(args.model_dir) / "config.json").read_text())
    return {"name": args.model or BUNDLED_ALIAS, "folder": args.model_dir, "weights_dtype": config.get("dtype"),
            "gguf": args.gguf}


def block_bytes(model_dir: str, device: str, block_size: int, dtype: str = "auto") -> int:
    """Bytes of one KV block (K and V, all layers) in the engine's dtype (``resolved_dtype``)."""
    from inference.worker.loader import load_model_config

    mc = load_model_config(model_dir)
    dtype_bytes = 4 if resolved_dtype(dtype, device) == "float32" else 2
    return 2 * mc.num_hidden_layers * mc.num_key_value_heads * mc.head_dim * block_size * dtype_bytes


def _worker_command(name: str, args: argparse.Namespace, workload_file: str, result: str) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks", "--_worker", name, "--_result", result,
           "--workload-file", workload_file, "--model-dir", args.model_dir, "--device", args.device, "--dtype", args.dtype,
           "--kv-blocks", str(args.kv_blocks), "--block-size", str(args.block_size),
           "--max-num-seqs", str(args.max_num_seqs), "--max-num-batched-tokens", str(args.max_num_batched_tokens),
           "--max-model-len", str(args.max_model_len), "--hf-batch-size", str(args.hf_batch_size),
           "--vllm-kv-gib", str(args.vllm_kv_gib), "--peer-timeout", str(args.peer_timeout),
           "--quantization", args.quantization]
    for flag, value in (("--vllm-python", args.vllm_python), ("--llama-cpp-python", args.llama_cpp_python),
                        ("--gguf", args.gguf)):
        if value:
            cmd += [flag, value]
    return cmd


def _skip_reason(name: str, args: argparse.Namespace, selected: list[str]) -> str | None:
    if name not in selected:
        return "not selected (--systems)"
    if name == "vllm":
        return missing_package(vllm_python(args.vllm_python), "vllm")
    if name == "llama-cpp":
        if not args.gguf:
            return "the model has no GGUF file (llama.cpp runs GGUF files only)"
        why = missing_package(llama_cpp_python(args.llama_cpp_python), "llama_cpp")
        if why is None and args.device != "cpu":
            return "runs on the CPU only here"
        return why
    return None


def run_system(name: str, args: argparse.Namespace, workload_file: str) -> tuple[dict[str, Any] | None, str | None]:
    """(result, None), or (None, why it did not run)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = f.name
    try:
        proc = subprocess.run(_worker_command(name, args, workload_file, result_path), stdout=sys.stderr)
        text = Path(result_path).read_text()
        if proc.returncode != 0 or not text:
            return None, f"failed (worker exit code {proc.returncode}; see its output above)"
        return json.loads(text), None
    finally:
        Path(result_path).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Set before torch loads; the workers (and the peers they start) inherit it, so every system runs under
    # the same policy. Unset, libgomp's idle threads spin a little, then sleep: between a step's ~250
    # parallel regions that saves a wake-up each (a fp32 decode step 15-20% faster than PASSIVE on a 2-core
    # EPYC), and a process that sits idle (this one, after measuring the matmul rate) stops spinning soon.
    # ACTIVE spins forever, which on a shared machine stalls every op behind a descheduled spinner.
    if args.omp_wait_policy == "spin-then-sleep":
        os.environ.pop("OMP_WAIT_POLICY", None)
    elif args.omp_wait_policy is not None:
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    if args._worker:
        from benchmarks import worker

        worker.main(args)
        return 0

    from inference.worker import loader
    from benchmarks.roofline import matmul_gflops

    try:
        selected = parse_systems(args.systems)
    except ValueError as e:
        parser.error(str(e))
    args.model_dir = str(loader.resolve_model(args.model))
    try:
        gguf = loader.source_gguf(args.model)
    except FileNotFoundError:
        gguf = None
    args.gguf = str(gguf) if gguf else None
    tokenizer = loader.load_tokenizer(args.model_dir)
    eos = loader.load_model_config(args.model_dir).eos_token_ids
    if args.kv_blocks is None:
        per_block = block_bytes(args.model_dir, args.device, args.block_size, args.dtype)
        args.kv_blocks = int(args.kv_memory_mb * 2**20 // per_block)

    if args.workload_file:
        workload = workload_mod.load(args.workload_file, lambda text: tokenizer.encode(text, add_special_tokens=False))
        workload.eos_token_ids = workload.eos_token_ids or list(eos)
        workload.ignore_eos = workload.ignore_eos or args.ignore_eos
    else:
        shape = workload_mod.QUICK_SHAPE if args.quick else workload_mod.FULL_SHAPE
        sessions = args.requests or (QUICK_SESSIONS if args.quick else FULL_SESSIONS)
        workload = workload_mod.generate(args.workload, tokenizer, sessions, args.seed, args.rate, args.ignore_eos,
                                         shape, eos)

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"bench-results/{stamp}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    workload_file = str(out.with_suffix(".workload.json"))
    workload.save(workload_file)
    if args.parallel_sampling:
        return _parallel_sampling(args, workload, out)

    machine = machine_info(args.device)
    machine.update(matmul_gflops(args.device, dtype=resolved_dtype(args.dtype, args.device)))
    print(f"workload: {workload.summary()}", file=sys.stderr)
    print(f"machine: matmul {machine['matmul_gflops']:.0f} GFLOP/s, load {machine['loadavg_start']}", file=sys.stderr)

    raw: dict[str, dict[str, Any] | None] = {}
    skipped: dict[str, str | None] = {}
    started = time.monotonic()
    for i, name in enumerate(SYSTEMS):
        reason = _skip_reason(name, args, selected)
        if reason is None:
            print(f"[{i + 1}/{len(SYSTEMS)}] {name}: {SYSTEMS[name].description}", file=sys.stderr)
            raw[name], reason = run_system(name, args, workload_file)
        else:
            raw[name] = None
            if name in selected:
                print(f"[{i + 1}/{len(SYSTEMS)}] {name}: skipped: {reason}", file=sys.stderr)
        skipped[name] = reason
    machine["loadavg_end"] = list(os.getloadavg())
    machine["bench_seconds"] = time.monotonic() - started

    systems = {n: report.system_entry(raw[n], skipped[n], machine["matmul_gflops"]) for n in SYSTEMS}
    for name, entry in systems.items():
        entry["description"] = SYSTEMS[name].description
    r = report.ratios(systems)
    doc: dict[str, Any] = {
        "model": model_info(args),
        "workload": {**workload.summary(), "file": workload_file},
        "machine": machine,
        "config": {
            "kv_blocks": args.kv_blocks,
            "block_size": args.block_size,
            "kv_budget_mb": args.kv_blocks * block_bytes(args.model_dir, args.device, args.block_size, args.dtype)
            / 2**20,
            "dtype": resolved_dtype(args.dtype, args.device),
            "max_num_seqs": args.max_num_seqs,
            "max_num_batched_tokens": args.max_num_batched_tokens,
            "max_model_len": args.max_model_len,
            "hf_batch_size": args.hf_batch_size,
            "vllm_kv_gib": args.vllm_kv_gib,
            "quick": args.quick,
            "command": " ".join(["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])]),
        },
        "systems": systems,
        "ratios": r,
        "targets": report.targets(systems, r, len(workload.sessions)),
        "series": {n: raw[n]["kv_series"] for n in SYSTEMS if raw[n] and raw[n].get("kv_series")},
        "records": {n: raw[n]["records"] for n in SYSTEMS if raw[n] and raw[n].get("records")},
    }
    out.write_text(json.dumps(doc, indent=1))
    if not args.no_plot:
        from benchmarks.plot import plot

        plot(doc, out.with_suffix(".png"))
    print(report.summary_text(doc))
    print(f"\nwrote {out}" + ("" if args.no_plot else f" and {out.with_suffix('.png')}"))
    return 0


def _parallel_sampling(args: argparse.Namespace, workload: workload_mod.Workload, out: Path) -> int:
    from benchmarks import parallel_sampling
    from inference.core.config import EngineConfig

    if args.parallel_sampling < 1:
        raise SystemExit("--parallel-sampling needs N >= 1")
    config = EngineConfig(model=args.model_dir, num_gpu_blocks_override=args.kv_blocks, device=args.device,
                          dtype=args.dtype,
                          block_size=args.block_size, max_num_seqs=args.max_num_seqs,
                          max_num_batched_tokens=args.max_num_batched_tokens, max_model_len=args.max_model_len)
    doc = parallel_sampling.compare(workload, config, args.parallel_sampling)
    doc["model"] = model_info(args)
    doc["workload"] = workload.summary()
    doc["machine"] = machine_info(args.device)
    out.write_text(json.dumps(doc, indent=1))
    print(parallel_sampling.summary_text(doc))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
