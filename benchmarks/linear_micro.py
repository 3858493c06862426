"""The projections of one decode step, by kernel: ``python -m benchmarks.linear_micro``.

SmolLM2-135M's shapes (30 layers of q/k/v 576 -> 960, o 576 -> 576, gate/up 576 -> 3072, down 1536 -> 576, and
the vocabulary 576 -> 49152), each layer with its own weights, so that a step streams them from memory as the
engine's does. For each row count (the step's sequences) and each kernel that runs here: the C++ panel
kernel in fp32, its bf16 panels on AVX512-BF16 and on AMX-BF16 tiles, and oneDNN's bf16 ``F.linear``. Steps of
the kernels interleaved (a machine whose speed drifts hits them alike); medians; GB/s counts the weights read
once per step, GFLOP/s two per weight per row. A kernel that does not run here is listed with the reason.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from inference.worker.attention import cpu_kernels

HIDDEN, KV, INTERMEDIATE, VOCAB, LAYERS = 576, 192, 1536, 49152, 30


def step_shapes(layers: int, vocab: int = VOCAB) -> list[tuple[int, int]]:
    """(N, K) of every projection of one decode step, in the order the model runs them."""
    layer = [(HIDDEN + 2 * KV, HIDDEN), (HIDDEN, HIDDEN), (2 * INTERMEDIATE, HIDDEN), (HIDDEN, INTERMEDIATE)]
    return layer * layers + [(vocab, HIDDEN)]


def kernels() -> dict[str, tuple[torch.dtype, str]]:
    """Kernel name -> (dtype, why it cannot run here, "" where it can)."""
    built = cpu_kernels.load()
    bf16_panels = built and cpu_kernels.small_linear_shape()[2]
    no_panels = "" if built else f"no C++ kernels ({cpu_kernels.unavailable_reason()})"
    no_bf16 = no_panels or ("" if bf16_panels else "no AVX512-BF16 (bf16 panels)")
    no_amx = no_bf16 or ("" if cpu_kernels.amx_runs() else
                         f"needs AMX-BF16 (amx_bf16, amx_tile); this CPU: {cpu_kernels.cpu_model_name()}")
    return {
        "panels fp32": (torch.float32, no_panels),
        "panels bf16 AVX512-BF16": (torch.bfloat16, no_bf16),
        "panels bf16 AMX": (torch.bfloat16, no_amx),
        "oneDNN F.linear bf16": (torch.bfloat16, ""),
    }


def make_step(name: str, dtype: torch.dtype, shapes: list[tuple[int, int]], gen: torch.Generator,
              ) -> Callable[[dict[int, torch.Tensor]], None]:
    """One decode step's projections on kernel ``name``, its weights made here (random, scaled as trained)."""
    weights = [(torch.randn(n, k, generator=gen) / k**0.5).to(dtype) for n, k in shapes]
    if name.startswith("oneDNN"):
        def step(inputs: dict[int, torch.Tensor]) -> None:
            for w in weights:
                F.linear(inputs[w.shape[1]], w)
        return step
    panels = [(cpu_kernels.pack_panels(w), w.shape[1]) for w in weights]
    del weights
    bf16 = "amx" if name.endswith("AMX") else "avx512_bf16"

    def step(inputs: dict[int, torch.Tensor]) -> None:
        for p, k in panels:
            cpu_kernels.small_linear(inputs[k], p, bf16=bf16)
    return step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,4,8,16,48", help="rows per step (sequences decoding)")
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--vocab", type=int, default=VOCAB, help="LM head rows (a multiple of 16)")
    parser.add_argument("--steps", type=int, default=9, help="timed steps per kernel and row count")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = step_shapes(args.layers, args.vocab)
    params = sum(n * k for n, k in shapes)
    listed = kernels()
    available = {name: dtype for name, (dtype, why) in listed.items() if not why}
    gen = torch.Generator().manual_seed(0)
    steps = {name: make_step(name, dtype, shapes, gen) for name, dtype in available.items()}
    print(f"one decode step's projections: {args.layers} layers + LM head ({args.vocab}), "
          f"{params / 1e6:.1f} M weights, {torch.get_num_threads()} threads, {cpu_kernels.cpu_model_name()}; "
          f"medians of {args.steps} steps")
    print("| kernel | rows | ms / step | GB/s (weights) | GFLOP/s |")
    print("| --- | --- | --- | --- | --- |")
    for rows in (int(r) for r in args.rows.split(",")):
        inputs = {dtype: {k: torch.randn(rows, k, generator=gen).to(dtype) for k in (HIDDEN, INTERMEDIATE)}
                  for dtype in set(available.values())}
        times: dict[str, list[float]] = {name: [] for name in steps}
        with torch.inference_mode():
            for name, step in steps.items():
                step(inputs[available[name]])  # warm-up
            for _ in range(args.steps):
                for name, step in steps.items():
                    start = time.perf_counter()
                    step(inputs[available[name]])
                    times[name].append(time.perf_counter() - start)
        for name, ts in times.items():
            seconds = statistics.median(ts)
            size = torch.finfo(available[name]).bits // 8
            print(f"| {name} | {rows} | {seconds * 1e3:.2f} | {params * size / seconds / 1e9:.1f} "
                  f"| {2 * rows * params / seconds / 1e9:.1f} |")
    for name, (_, why) in listed.items():
        if why:
            print(f"{name}: not run ({why})")


if __name__ == "__main__":
    main()
