"""``python -m benchmarks.linear_micro``: one row per kernel that runs here and row count, the others listed
with the reason (AMX on CPUs without it)."""

from __future__ import annotations

import pytest

from benchmarks import linear_micro
from inference.worker.attention import cpu_kernels


def test_every_kernel_is_timed_or_listed_with_its_reason(capsys) -> None:
    linear_micro.main(["--layers", "1", "--vocab", "512", "--steps", "1", "--rows", "1,17"])
    out = capsys.readouterr().out
    listed = linear_micro.kernels()
    assert "1 layers + LM head (512)" in out
    for name, (_, why) in listed.items():
        timed = [line for line in out.splitlines() if line.startswith(f"| {name} |")]
        if why:
            assert not timed and f"{name}: not run ({why})" in out
        else:
            assert [line.split(" | ")[1] for line in timed] == ["1", "17"]
            assert all(float(line.split(" | ")[2]) > 0 for line in timed)
    assert not listed["oneDNN F.linear bf16"][1]
    if cpu_kernels.load() and cpu_kernels.small_linear_shape()[2] and not cpu_kernels.amx_runs():
        assert listed["panels bf16 AMX"][1].startswith("needs AMX-BF16 (amx_bf16, amx_tile); this CPU: ")


def test_the_step_is_smollm2s_projections() -> None:
    shapes = linear_micro.step_shapes(30)
    assert len(shapes) == 121 and shapes[-1] == (49152, 576)
    assert sum(n * k for n, k in shapes) == pytest.approx(134.5e6, rel=1e-3)
