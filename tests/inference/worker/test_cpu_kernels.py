"""The fused C++ CPU ops (``attention/cpu_kernels``): each against the torch ops it replaces in the model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inference.worker.attention import cpu_kernels, keys_by_token
from inference.worker.models.llama import RMSNorm, apply_rope

pytestmark = pytest.mark.skipif(not cpu_kernels.load(), reason="needs a C++ compiler")

DTYPES = [torch.float32, torch.bfloat16]


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: fp32 statistics, the normalised value cast back, then the weight."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,hidden", [(1, 576), (48, 576), (130, 64), (5, 100)])  # 100: a scalar tail
def test_rms_norm_with_the_residual_add(dtype, rows, hidden) -> None:
    gen = torch.Generator().manual_seed(rows * hidden)
    x, residual = (torch.randn(rows, hidden, generator=gen).to(dtype) for _ in range(2))
    weight = (1 + 0.1 * torch.randn(hidden, generator=gen)).to(dtype)
    expected_sum = x + residual  # rounded to dtype, as the layer's residual stream is
    fused_residual = residual.clone()
    out = cpu_kernels.rms_norm(x, weight, 1e-5, fused_residual)
    assert torch.equal(fused_residual, expected_sum)
    expected = torch_rms_norm(expected_sum, weight, 1e-5)
    # The sum of squares runs in another order than torch's: the scale may differ in its last bit, which bf16
    # rounding then shows in a rare element as one unit of its last place.
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=0, rtol=2**-7)
    torch.testing.assert_close(out, expected, **tolerance)
    if dtype == torch.bfloat16:
        assert (out != expected).float().mean() < 0.01
    torch.testing.assert_close(cpu_kernels.rms_norm(x, weight, 1e-5), torch_rms_norm(x, weight, 1e-5), **tolerance)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_module_uses_the_op_when_fused(dtype) -> None:
    norm = RMSNorm(64, 1e-6).to(dtype)
    x, residual = torch.randn(7, 64).to(dtype), torch.randn(7, 64).to(dtype)
    plain_out, plain_residual = norm(x, residual.clone())
    norm.fused = True
    fused_out, fused_residual = norm(x, residual.clone())
    assert torch.equal(fused_residual, plain_residual)
    torch.testing.assert_close(fused_out, plain_out, atol=1e-5, rtol=1e-5 if dtype == torch.float32 else 2**-7)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,n", [(48, 1536), (3, 40)])  # 40: a scalar tail after the vectors
def test_silu_and_mul(dtype, rows, n) -> None:
    gen = torch.Generator().manual_seed(n)
    gate_up = (3 * torch.randn(rows, 2 * n, generator=gen)).to(dtype)
    gate_up[0, :4] = torch.tensor([-200.0, -90.0, 90.0, 0.0])  # exp's clamps: silu(-200) = -0, silu(90) = 90
    gate, up = gate_up.split(n, dim=-1)
    out = cpu_kernels.silu_and_mul(gate_up)
    expected = F.silu(gate) * up
    # Our exp is within 2 ulp of libm's (fp32); after bf16 rounding that shows in a rare element.
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-6 if dtype == torch.float32 else 2**-7)
    assert torch.isfinite(out).all()
    if dtype == torch.bfloat16:
        assert (out != expected).float().mean() < 0.01


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [64, 24])  # 24: half of 12, below one vector
def test_rotary_embedding_in_place_equals_apply_rope(dtype, dim) -> None:
    """Bit for bit, on the strided q/k view of a fused qkv projection: every product rounded as torch does."""
    gen = torch.Generator().manual_seed(dim)
    rows, heads, kv_heads = 11, 9, 3
    qkv = torch.randn(rows, (heads + 2 * kv_heads) * dim, generator=gen).to(dtype)
    angles = torch.rand(rows, dim // 2, generator=gen) * 100
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    qk = qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, dim)
    expected = apply_rope(qk, cos.unsqueeze(1), sin.unsqueeze(1))
    v_before = qkv[:, (heads + kv_heads) * dim :].clone()
    cpu_kernels.rotary_embedding_(qk, cos, sin)
    assert torch.equal(qk, expected)
    assert torch.equal(qkv[:, (heads + kv_heads) * dim :], v_before)  # V, beside q and k, untouched


@pytest.mark.parametrize("k_transposed", [True, False])
def test_store_kv_writes_each_slot_and_skips_padding(k_transposed) -> None:
    gen = torch.Generator().manual_seed(1)
    blocks, bs, heads, dim = 6, 4, 3, 8
    k, v = (torch.randn(5, heads, dim, generator=gen) for _ in range(2))
    slots = torch.tensor([0, 7, -1, 21, 9])
    v_cache = torch.zeros(blocks, bs, heads, dim)
    k_cache = torch.zeros(blocks, heads, dim, bs) if k_transposed else torch.zeros(blocks, bs, heads, dim)
    cpu_kernels.store_kv(k, v, k_cache, v_cache, slots, k_transposed)
    keys, values = keys_by_token(k_cache, k_transposed).reshape(-1, heads, dim), v_cache.view(-1, heads, dim)
    written = slots >= 0
    assert torch.equal(keys[slots[written]], k[written]) and torch.equal(values[slots[written]], v[written])
    untouched = torch.ones(blocks * bs, dtype=torch.bool)
    untouched[slots[written]] = False
    assert not keys[untouched].any() and not values[untouched].any()
    with pytest.raises(RuntimeError, match="outside the cache"):
        cpu_kernels.store_kv(k, v, k_cache, v_cache, torch.tensor([0, 1, 2, 3, blocks * bs]), k_transposed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n,heads,kv_heads,dim,prefix_blocks", [(48, 9, 3, 64, 29), (5, 9, 3, 64, 3),
                                                                  (3, 8, 2, 128, 4), (1, 4, 4, 64, 1)])
def test_prefix_attention_matches_the_dense_product(dtype, n, heads, kv_heads, dim, prefix_blocks) -> None:
    """The C++ cascade prefix (tiles of 8 query rows, the last one partial) against the torch backend's one
    dense SDPA product per KV head over the same blocks: outputs and log-sum-exps."""
    from inference.worker.attention import torch_backend

    gen, bs, num_blocks = torch.Generator().manual_seed(n * dim), 16, 64
    k_cache = torch.randn(num_blocks, kv_heads, dim, bs, generator=gen).to(dtype)  # transposed per block
    v_cache = torch.randn(num_blocks, bs, kv_heads, dim, generator=gen).to(dtype)
    q = torch.randn(n + 7, heads, dim, generator=gen).to(dtype)
    rows = torch.randperm(n + 7, generator=gen)[:n].sort().values
    blocks = torch.randperm(num_blocks, generator=gen)[:prefix_blocks].to(torch.int32)
    out, lse = cpu_kernels.prefix_attention(q, k_cache, v_cache, rows, blocks, dim**-0.5)
    prefix = torch_backend._Prefix(blocks.long(), rows)
    expected, expected_lse = torch_backend._attend_prefix(prefix, q.float(), k_cache.float(), v_cache.float(),
                                                          dim**-0.5, k_transposed=True)
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(out.float(), expected, **tolerance)
    torch.testing.assert_close(lse, expected_lse.float(), **tolerance)


def small_linear_dtypes() -> list[torch.dtype]:
    return [torch.float32, torch.bfloat16] if cpu_kernels.small_linear_shape()[2] else [torch.float32]


@pytest.mark.parametrize("dtype", small_linear_dtypes(), ids=str)
@pytest.mark.parametrize("rows", [1, 2, 7, 14, 15, 16, 17, 40, 131])  # past 16: tile by tile against each panel
@pytest.mark.parametrize("panels,k", [(3, 38), (60, 576), (4, 1536)])  # 3: an odd panel left over
def test_small_linear_equals_the_product(dtype, rows, panels, k) -> None:
    lanes, most, _ = cpu_kernels.small_linear_shape()
    gen = torch.Generator().manual_seed(rows * panels * k)
    weight = torch.randn(panels * lanes, k, generator=gen).to(dtype)
    x, bias = torch.randn(rows, k, generator=gen).to(dtype), torch.randn(panels * lanes, generator=gen).to(dtype)
    packed = cpu_kernels.pack_panels(weight)
    assert packed.dtype == dtype and packed.shape[0] == panels and packed.numel() == weight.numel()
    # The exact product (every bf16 product fits an fp32), rounded once to the dtype.
    exact = x.double() @ weight.double().T
    # The fp32 sums run in another order than the exact one. Its error is small against the terms (magnitude
    # about 1, the sums about sqrt(K)), but against an output that cancels to near 0 it can reach a unit or two
    # of bf16's last place; most outputs round to exactly the exact product's bf16.
    tolerance = dict(atol=1e-4, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2**-7)
    got = cpu_kernels.small_linear(x, packed)
    torch.testing.assert_close(got, exact.to(dtype), **tolerance)
    if dtype == torch.bfloat16:
        assert (got != exact.to(dtype)).float().mean() < 0.01
    # The bias joins the fp32 sums before the one rounding (as oneDNN adds it).
    with_bias = cpu_kernels.small_linear(x, packed, bias)
    torch.testing.assert_close(with_bias, (exact + bias.double()).to(dtype), **tolerance)
    if dtype == torch.bfloat16:
        assert (with_bias != (exact + bias.double()).to(dtype)).float().mean() < 0.01
    # A row view of a wider tensor: strided rows are read in place.
    wide = torch.randn(rows, k + 6, generator=gen).to(dtype)
    expected = (wide[:, :k].double() @ weight.double().T).to(dtype)
    torch.testing.assert_close(cpu_kernels.small_linear(wide[:, :k], packed), expected, **tolerance)


@pytest.mark.parametrize("dtype", small_linear_dtypes(), ids=str)
@pytest.mark.parametrize("panels,k", [(60, 576), (36, 1536), (5, 38)])
def test_small_linear_rows_do_not_depend_on_the_batch(dtype, panels, k) -> None:
    """Batch invariance: a row's output is bit for bit the same alone, among 16 (one register tile) or among
    hundreds (a prefill chunk, tile by tile), at any place in the batch, strided or not."""
    lanes = cpu_kernels.small_linear_shape()[0]
    gen = torch.Generator().manual_seed(panels * k)
    weight = (torch.randn(panels * lanes, k, generator=gen) / k**0.5).to(dtype)
    x = torch.randn(300, k, generator=gen).to(dtype)
    packed = cpu_kernels.pack_panels(weight)
    bias = torch.randn(panels * lanes, generator=gen).to(dtype)
    full, full_bias = cpu_kernels.small_linear(x, packed), cpu_kernels.small_linear(x, packed, bias)
    for start, count in [(0, 1), (7, 1), (299, 1), (3, 2), (0, 15), (5, 16), (16, 17), (100, 33), (1, 299)]:
        assert torch.equal(cpu_kernels.small_linear(x[start : start + count], packed), full[start : start + count])
        rows = cpu_kernels.small_linear(x[start : start + count], packed, bias)
        assert torch.equal(rows, full_bias[start : start + count])
    wide = torch.cat([x, torch.randn(300, 10, generator=gen).to(dtype)], dim=1)
    assert torch.equal(cpu_kernels.small_linear(wide[40:90, :k], packed), full[40:90])


def test_small_linear_refuses_what_it_cannot_take() -> None:
    lanes, most, _ = cpu_kernels.small_linear_shape()
    assert cpu_kernels.pack_panels(torch.randn(lanes + 1, 8)) is None  # not whole panels: oneDNN runs it
    assert cpu_kernels.pack_panels(torch.randn(lanes, 7, dtype=torch.bfloat16)) is None  # odd K: no pairs
    assert cpu_kernels.pack_panels(torch.randn(lanes, 8, dtype=torch.float16)) is None
    packed = cpu_kernels.pack_panels(torch.randn(lanes, 8))
    with pytest.raises(RuntimeError, match="shapes disagree"):
        cpu_kernels.small_linear(torch.randn(2, 9), packed)
    with pytest.raises(RuntimeError, match="one dtype"):
        cpu_kernels.small_linear(torch.randn(2, 8, dtype=torch.bfloat16), packed)


def test_a_build_killed_midway_does_not_hang_the_next_engine_start() -> None:
    """torch's builder leaves its ``lock`` file when killed mid-build and waits for it forever; ours clears it."""
    import subprocess
    import sys

    directory = cpu_kernels.build_directory(cpu_kernels._build_name())
    (directory / "lock").touch()  # what a killed builder leaves
    code = "from inference.worker.attention import cpu_kernels; assert cpu_kernels.load(), cpu_kernels.unavailable_reason()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    assert not (directory / "lock").exists()
