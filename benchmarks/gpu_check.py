"""One-call GPU validation: ``python -m benchmarks.gpu_check``.

On a CUDA machine it (1) checks the Triton kernels against the torch backend on the bundled model's shapes
and a Llama-8B-like shape, in fp32 / fp16 / bf16, with timings; (2) runs the Triton kernel and model parity
tests on CUDA (pytest); (3) measures the model runner's decode throughput (CUDA graphs and eager) and
prefill speed on the bundled model. It prints one short table per part and exits non-zero if any check
fails. Without CUDA it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from inference.core.utils import cdiv

REPO_ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}
SHAPES = {"smollm2": (9, 3, 64), "llama8b": (32, 8, 128)}  # heads, kv heads, head dim


def _layout(query_lens: list[int], context_lens: list[int], block_size: int, device: str, seed: int):
    from inference.worker.attention import AttentionMetadata

    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(cdiv(c, block_size) for c in context_lens) + 8
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables, slots, qsl = [], [], [0]
    for q, c in zip(query_lens, context_lens):
        need = cdiv(c, block_size)
        table, perm = perm[:need], perm[need:]
        tables.append(table)
        slots += [table[p // block_size] * block_size + p % block_size for p in range(c - q, c)]
        qsl.append(qsl[-1] + q)
    width = max(len(t) for t in tables)
    meta = AttentionMetadata(
        slot_mapping=torch.tensor(slots, device=device),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32, device=device),
        context_lens=torch.tensor(context_lens, dtype=torch.int32, device=device),
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=device),
        max_query_len=max(query_lens),
        max_context_len=max(context_lens),
    )
    return meta, num_blocks


def _time_ms(fn: Callable[[], object], repeat: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


def check_kernels() -> bool:
    from inference.worker.attention import triton_kernels as tk
    from inference.worker.attention.torch_backend import TorchAttentionBackend

    decode_lens = torch.randint(16, 2000, (64,), generator=torch.Generator().manual_seed(0)).tolist()
    cases = {
        "decode 64x~1k": ([1] * 64, decode_lens),
        "prefill 512": ([512], [512]),
        "mixed": ([1] * 30 + [300, 200], [700] * 30 + [900, 200]),
    }  # fmt: skip
    print("\n== Triton kernels vs torch backend (fp32 reference) ==")
    print(f"{'shape':8} {'case':14} {'dtype':9} {'max err':>9} {'tol':>7} {'triton ms':>9} {'torch ms':>9}  ok")
    ok = True
    for shape_name, (heads, kv_heads, head_dim) in SHAPES.items():
        for case_name, (qlens, ctxs) in cases.items():
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                meta, num_blocks = _layout(qlens, ctxs, 16, "cuda", seed=1)
                gen = torch.Generator(device="cuda").manual_seed(2)
                T = sum(qlens)

                def rand(*shape):
                    return torch.randn(*shape, generator=gen, device="cuda").to(dtype)

                kc, vc = rand(num_blocks, 16, kv_heads, head_dim), rand(num_blocks, 16, kv_heads, head_dim)
                q, k, v = rand(T, heads, head_dim), rand(T, kv_heads, head_dim), rand(T, kv_heads, head_dim)
                scale = head_dim**-0.5
                backend = TorchAttentionBackend()
                backend.prepare(meta, 16)
                kr, vr = kc.float().clone(), vc.float().clone()
                ref = backend.forward(q.float(), k.float(), v.float(), kr, vr, meta, scale)

                def run_triton():
                    tk.reshape_and_cache(k, v, kc, vc, meta.slot_mapping)
                    if meta.decode_only:
                        return tk.paged_decode_attention(q, kc, vc, meta.block_tables, meta.context_lens, scale)
                    return tk.paged_prefill_attention(q, kc, vc, meta.block_tables, meta.context_lens,
                                                      meta.query_start_loc, meta.max_query_len, scale)  # fmt: skip

                out = run_triton()
                err = (out.float() - ref).abs().max().item()
                cache_ok = torch.equal(kc.float(), kr) and torch.equal(vc.float(), vr)
                kc16, vc16 = kc.clone(), vc.clone()
                t_triton = _time_ms(run_triton)
                t_torch = _time_ms(lambda: backend.forward(q, k, v, kc16, vc16, meta, scale))
                good = err <= TOLERANCE[dtype] and cache_ok
                ok &= good
                print(f"{shape_name:8} {case_name:14} {str(dtype)[6:]:9} {err:9.2e} {TOLERANCE[dtype]:7.0e} "
                      f"{t_triton:9.3f} {t_torch:9.3f}  {'yes' if good else 'NO'}")  # fmt: skip
    return ok


def run_pytest() -> bool:
    print("\n== pytest on CUDA: Triton kernels and model parity ==", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("HF_HUB_OFFLINE", "1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           "tests/inference/worker/test_triton_kernels.py", "tests/inference/worker/test_model.py"]  # fmt: skip
    result = subprocess.run(cmd, cwd=REPO_ROOT, env=env)
    return result.returncode == 0


def measure_throughput() -> bool:
    from inference.core.config import EngineConfig
    from inference.worker.model_runner import ModelRunner
    from inference.core.scheduler import ScheduledSeq, SchedulerOutput
    from inference.core.sequence import Sequence

    print("\n== Model runner on CUDA (bundled model, bf16, Triton) ==")
    print(f"{'mode':8} {'batch':>5} {'ctx':>5} {'step ms':>8} {'tokens/s':>9}")
    for eager in (False, True):
        runner = ModelRunner(EngineConfig(device="cuda", dtype="bfloat16", max_num_seqs=64, max_model_len=2048,
                                          num_gpu_blocks_override=64 * 130, enforce_eager=eager))  # fmt: skip
        for batch in (1, 16, 64):
            seqs = []
            for i in range(batch):
                seq = Sequence(str(i), [7] * 1024)
                seq.block_table = list(range(i * 130, (i + 1) * 130))
                seq.num_computed_tokens = 1023
                seqs.append(seq)
            output = SchedulerOutput([ScheduledSeq(s, 1) for s in seqs])
            ms = _time_ms(lambda: runner.execute(output))
            print(f"{'eager' if eager else 'graphs':8} {batch:5} {1024:5} {ms:8.2f} {batch / ms * 1000:9.0f}")
        if not eager:
            seq = Sequence("p", list(range(2048)))
            seq.block_table = list(range(128))
            output = SchedulerOutput([ScheduledSeq(seq, 2048)])
            ms = _time_ms(lambda: runner.execute(output), repeat=5)
            print(f"{'prefill':8} {1:5} {2048:5} {ms:8.2f} {2048 / ms * 1000:9.0f}")
        del runner
        torch.cuda.empty_cache()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-pytest", action="store_true", help="only the kernel table and the throughput")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check needs a CUDA GPU: torch.cuda.is_available() is False on this machine", file=sys.stderr)
        return 2
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: gpu_check runs the compiled kernels", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    start = time.perf_counter()
    results = {"kernels": check_kernels()}
    if not args.skip_pytest:
        results["pytest"] = run_pytest()
    results["throughput"] = measure_throughput()
    print(f"\n== summary ({time.perf_counter() - start:.0f}s) ==")
    for name, passed in results.items():
        print(f"{name:10} {'ok' if passed else 'FAILED'}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
