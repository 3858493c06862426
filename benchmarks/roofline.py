"""The machine's measured matmul throughput: the roof our engine's achieved FLOP/s is compared with.

A large square matmul is about the best case for the math libraries, so achieved/measured says how much of
what the hardware demonstrably does the engine turns into model work (decode-heavy serving of a small model
is dominated by skinny matmuls and overheads, so expect well under 1).
"""

from __future__ import annotations

import time
from typing import Any


def matmul_gflops(
    device: str = "cpu", size: int | None = None, seconds: float = 1.5, dtype: str | None = None
) -> dict[str, Any]:
    """Best GFLOP/s of ``size``-cubed matmuls over a few rounds, in ``dtype`` (default: bf16 on CUDA, fp32 on
    CPU): pass the dtype the engine runs in, since its roofline is the matmul rate of that dtype (bf16 runs
    3-8x faster than fp32 on CPUs with AMX or AVX512-BF16)."""
    import torch

    cuda = device.startswith("cuda")
    dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if cuda else torch.float32)
    n = size or (8192 if cuda else 2048)
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    torch.matmul(a, b)  # first call: library initialisation
    sync()
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.matmul(a, b)
        sync()
        best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e9)
    return {
        "matmul_gflops": best,
        "matmul_shape": [n, n, n],
        "matmul_dtype": str(dtype).replace("torch.", ""),
        "torch_threads": torch.get_num_threads(),
    }
