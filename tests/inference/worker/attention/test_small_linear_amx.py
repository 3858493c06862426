"""The bf16 panel kernel's AMX path (``csrc/small_linear.cpp``, ``csrc/amx_tiles.h``) and the choice between it
and the AVX512-BF16 panels (``cpu_kernels.choose_bf16_path``).

The AMX tests run only on CPUs with AMX-BF16 (their skip reason names this CPU, so CI's log shows where they
ran). Without AMX the same checks run on the whole AMX path with a scalar stand-in for the tile instructions
(``amx_scalar_tiles.h``): the tile config, the B tiles read from the panels, the K tail, the row tiles and
their padding, the threads' tasks, the bias and the rounding; only the instructions themselves are not run."""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from inference.worker.attention import cpu_kernels

pytestmark = pytest.mark.skipif(not cpu_kernels.load(), reason="needs a C++ compiler")

AMX_FLAGS = "fpu sse2 avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile amx_int8"
ZEN4_FLAGS = "fpu sse2 avx2 avx512f avx512bw avx512_bf16 avx512_vnni"


def amx_runs() -> bool:
    return cpu_kernels.load() and cpu_kernels.amx_runs()


needs_amx = pytest.mark.skipif(
    not amx_runs(), reason=f"needs AMX-BF16 (amx_bf16, amx_tile); this CPU: {cpu_kernels.cpu_model_name()}"
)


class Asked:
    """A stand-in for the kernel's request for the tile state: answers ``granted``, counts the requests."""

    def __init__(self, granted: bool) -> None:
        self.granted, self.calls = granted, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.granted


def test_the_bf16_kernel_is_chosen_from_the_flags_and_the_permission() -> None:
    # No AMX in the flags (this machine, AMD Zen 4): AVX512-BF16, without asking Linux for the tile state.
    for flags in (ZEN4_FLAGS, "avx512_bf16 amx_bf16", "avx512_bf16 amx_tile"):
        asked = Asked(True)
        assert cpu_kernels.choose_bf16_path(flags, "auto", asked) == "avx512_bf16", flags
        assert asked.calls == 0
    # AMX in the flags: AMX once Linux grants the tile state; refused, the AVX512-BF16 panels.
    asked = Asked(True)
    assert cpu_kernels.choose_bf16_path(AMX_FLAGS, "auto", asked) == "amx" and asked.calls == 1
    assert cpu_kernels.choose_bf16_path(AMX_FLAGS, "auto", Asked(False)) == "avx512_bf16"
    # ENGINE_SMALL_LINEAR: the AVX512-BF16 panels on an AMX machine (for comparison), without asking.
    asked = Asked(True)
    assert cpu_kernels.choose_bf16_path(AMX_FLAGS, "avx512_bf16", asked) == "avx512_bf16" and asked.calls == 0
    assert cpu_kernels.choose_bf16_path(AMX_FLAGS, "amx", Asked(True)) == "amx"
    assert cpu_kernels.choose_bf16_path(ZEN4_FLAGS, "amx", Asked(True)) == "avx512_bf16"  # forced, cannot run
    with pytest.raises(ValueError, match="ENGINE_SMALL_LINEAR"):
        cpu_kernels.choose_bf16_path(AMX_FLAGS, "amx-bf16", Asked(True))


def test_this_process_runs_the_kernel_its_cpu_allows(monkeypatch) -> None:
    if not cpu_kernels.small_linear_shape()[2]:
        assert cpu_kernels.bf16_path() == ""
        return
    assert cpu_kernels.bf16_path() == ("amx" if amx_runs() else "avx512_bf16")
    monkeypatch.setenv("ENGINE_SMALL_LINEAR", "avx512_bf16")
    cpu_kernels.bf16_path.cache_clear()
    try:
        assert cpu_kernels.bf16_path() == "avx512_bf16"
    finally:
        monkeypatch.delenv("ENGINE_SMALL_LINEAR")
        cpu_kernels.bf16_path.cache_clear()


@pytest.mark.skipif(amx_runs(), reason="AMX runs on this CPU")
def test_the_amx_path_refuses_to_run_without_amx() -> None:
    """Asked for AMX where it does not run, the kernel raises instead of executing a tile instruction."""
    if not cpu_kernels.small_linear_shape()[2]:
        pytest.skip("no bf16 panels on this CPU (needs AVX512-BF16)")
    lanes = cpu_kernels.small_linear_shape()[0]
    packed = cpu_kernels.pack_panels(torch.randn(lanes, 64).to(torch.bfloat16))
    with pytest.raises(RuntimeError, match="AMX-BF16 is not available"):
        cpu_kernels.small_linear(torch.randn(2, 64).to(torch.bfloat16), packed, bf16="amx")


def model_shapes() -> list[tuple[int, int]]:
    """(N, K) of SmolLM2-135M's projections (q/o 576x576, k/v 192x576, gate/up 1536x576, down 576x1536, the
    vocabulary 49152x576) and tails: K not a multiple of 32 (38, 62: the narrower tail tiles) and panel counts
    that leave a partial group of 4 (3 and 5 panels)."""
    return [(576, 576), (192, 576), (1536, 576), (576, 1536), (49152, 576), (48, 38), (80, 62), (16, 2)]


Linear = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def amx(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return cpu_kernels.small_linear(x, panels, bias, bf16="amx")


def check_against_float64(linear: Linear, rows: int, n: int, k: int) -> None:
    gen = torch.Generator().manual_seed(rows * n + k)
    weight = (torch.randn(n, k, generator=gen) / k**0.25).to(torch.bfloat16)
    x, bias = torch.randn(rows, k, generator=gen).to(torch.bfloat16), torch.randn(n, generator=gen).to(torch.bfloat16)
    packed = cpu_kernels.pack_panels(weight)
    exact = x.double() @ weight.double().T
    # fp32 sums in another order than the exact one: a unit or two of bf16's last place where an output cancels
    # to near 0; most outputs round to exactly the exact product's bf16 (as test_cpu_kernels' bf16 panels).
    tolerance = dict(atol=2e-2, rtol=2**-7)
    for b, expected in [(None, exact), (bias, exact + bias.double())]:
        got = linear(x, packed, b)
        torch.testing.assert_close(got, expected.to(torch.bfloat16), **tolerance)
        assert (got != expected.to(torch.bfloat16)).float().mean() < 0.01
    # Strided rows (a view of wider ones) are read in place.
    wide = torch.randn(rows, k + 6, generator=gen).to(torch.bfloat16)
    expected = (wide[:, :k].double() @ weight.double().T).to(torch.bfloat16)
    torch.testing.assert_close(linear(wide[:, :k], packed, None), expected, **tolerance)


def check_batch_invariance(linear: Linear, n: int, k: int) -> None:
    """Every row goes through a 16-row tile (the last padded with zero rows), so a row's output is bit for bit
    the same alone, in a partial tile, a whole one or hundreds of rows, strided or not."""
    gen = torch.Generator().manual_seed(n * k)
    weight = (torch.randn(n, k, generator=gen) / k**0.5).to(torch.bfloat16)
    x = torch.randn(300, k, generator=gen).to(torch.bfloat16)
    bias = torch.randn(n, generator=gen).to(torch.bfloat16)
    packed = cpu_kernels.pack_panels(weight)
    full, full_bias = linear(x, packed, None), linear(x, packed, bias)
    for start, count in [(0, 1), (7, 1), (299, 1), (3, 2), (0, 15), (5, 16), (16, 17), (100, 33), (1, 299)]:
        part = x[start : start + count]
        assert torch.equal(linear(part, packed, None), full[start : start + count])
        assert torch.equal(linear(part, packed, bias), full_bias[start : start + count])
    wide = torch.cat([x, torch.randn(300, 10, generator=gen).to(torch.bfloat16)], dim=1)
    assert torch.equal(linear(wide[40:90, :k], packed, None), full[40:90])


@needs_amx
@pytest.mark.parametrize("rows", [1, 3, 16, 17, 40])
@pytest.mark.parametrize("n,k", model_shapes())
def test_amx_equals_the_float64_product(rows, n, k) -> None:
    check_against_float64(amx, rows, n, k)


@needs_amx
@pytest.mark.parametrize("n,k", [(576, 576), (1536, 576), (576, 1536), (80, 62)])
def test_amx_rows_do_not_depend_on_the_batch(n, k) -> None:
    check_batch_invariance(amx, n, k)


needs_x86_avx512 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64") or shutil.which("g++") is None
    or "avx512f" not in cpu_kernels.cpu_flags().split(),
    reason="needs g++ on x86-64 with AVX-512 (avx512f)",
)


@pytest.fixture(scope="module")
def scalar_tiles_amx(tmp_path_factory) -> Linear:
    """small_linear.cpp's AMX path (its threads, row tiles, padding, bias and rounding as they are) built with
    the scalar stand-in tiles in place of the instructions, as the ops ``shop_assistant_stand_in::*``."""
    if not (cpu_kernels.load() and cpu_kernels.small_linear_shape()[2]):
        pytest.skip("no bf16 panels on this CPU (needs AVX512-BF16), so no AMX path in the build")
    source = (cpu_kernels.CSRC / "small_linear.cpp").read_text()
    replacements = [
        ('#include "amx_tiles.h"\n', '#include "amx_tiles.h"\n#include "amx_scalar_tiles.h"\n', 1),
        ("amx::AmxTiles", "amx::ScalarTiles", 6),
        ("bool request_amx() {", "bool request_amx() { return true; }\n[[maybe_unused]] bool linux_request() {", 2),
        ("TORCH_LIBRARY_FRAGMENT(shop_assistant,", "TORCH_LIBRARY_FRAGMENT(shop_assistant_stand_in,", 1),
        ("TORCH_LIBRARY_IMPL(shop_assistant,", "TORCH_LIBRARY_IMPL(shop_assistant_stand_in,", 1),
    ]
    for old, new, count in replacements:
        assert source.count(old) == count, old  # small_linear.cpp changed: update the stand-in build
        source = source.replace(old, new)
    directory = tmp_path_factory.mktemp("amx_stand_in")
    (directory / "small_linear_stand_in.cpp").write_text(source)
    from torch.utils import cpp_extension

    cpp_extension.load(
        name="shop_assistant_amx_stand_in", sources=[str(directory / "small_linear_stand_in.cpp")],
        build_directory=str(directory), extra_include_paths=[str(cpu_kernels.CSRC), str(Path(__file__).parent)],
        extra_cflags=["-O2", "-march=native", "-fopenmp", "-ffp-contract=fast", "-fno-trapping-math",
                      "-mprefer-vector-width=512"],
        extra_ldflags=["-fopenmp"], is_python_module=False,
    )
    lanes = cpu_kernels.small_linear_shape()[0]

    def linear(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        out = x.new_empty(x.shape[0], panels.shape[0] * lanes)
        torch.ops.shop_assistant_stand_in.small_linear_amx_(out, x, panels, bias)
        return out

    return linear


@pytest.mark.slow
@needs_x86_avx512
@pytest.mark.parametrize("rows", [1, 17, 40])
@pytest.mark.parametrize("n,k", [(576, 576), (192, 576), (48, 38), (80, 62), (16, 2)])
def test_the_amx_path_on_scalar_tiles_equals_the_float64_product(scalar_tiles_amx, rows, n, k) -> None:
    """Without AMX hardware: the whole AMX path, the instructions replaced by amx_scalar_tiles.h."""
    check_against_float64(scalar_tiles_amx, rows, n, k)


@pytest.mark.slow
@needs_x86_avx512
@pytest.mark.parametrize("n,k", [(192, 576), (80, 62)])
def test_the_amx_path_on_scalar_tiles_keeps_rows_independent_of_the_batch(scalar_tiles_amx, n, k) -> None:
    check_batch_invariance(scalar_tiles_amx, n, k)


@needs_x86_avx512
def test_the_tile_loop_on_a_scalar_stand_in_for_the_tile_instructions(tmp_path: Path) -> None:
    """The tile config, the B tiles read from the bf16 panels and the K tail, checked without AMX: the loop of
    amx_tiles.h on scalar tile instructions gives every output the in-order fp32 sum of its pairs."""
    source = Path(__file__).with_name("amx_tiles_emulation.cpp")
    binary = tmp_path / "amx_tiles_emulation"
    subprocess.run(["g++", "-std=c++20", "-O1", f"-I{cpu_kernels.CSRC}", str(source), "-o", str(binary)],
                   check=True, capture_output=True, timeout=300)
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout
    assert run.stdout.count(": ok") == 9 * 4, run.stdout
