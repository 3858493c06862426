"""Triton kernels against the torch backend on small paged layouts, in fp32 and fp16.

Without a GPU they run under TRITON_INTERPRET=1 (set by conftest.py before the kernels are imported); the
interpreter computes bf16 wrongly, so bf16 is only checked on CUDA. On a GPU the same tests run on the device.
"""

from __future__ import annotations

import pytest
import torch

from inference.worker.attention import triton_interpreted
from inference.worker.attention.torch_backend import TorchAttentionBackend, write_kv_cache
from inference.core.config import EngineConfig
from inference.worker.model_runner import ModelRunner

if not torch.cuda.is_available() and not triton_interpreted():
    pytest.skip("Triton needs CUDA or TRITON_INTERPRET=1 (conftest sets it)", allow_module_level=True)

from inference.worker.attention import triton_kernels as tk  # noqa: E402  (after TRITON_INTERPRET is settled)

DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if torch.cuda.is_available() else [])
TOLERANCE = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}

LAYOUTS = {
    "decodes": ([1, 1, 1, 1], [1, 9, 33, 17]),
    "fresh": ([20], [20]),
    "mixed": ([1, 7, 3, 1, 19], [6, 7, 12, 40, 37]),
    "long-chunk": ([70], [90]),
}


def build(name: str, dtype: torch.dtype, device: str, paged_layout, heads=6, kv_heads=2, head_dim=32, bs=4):
    gen = torch.Generator().manual_seed(list(LAYOUTS).index(name))
    query_lens, context_lens = LAYOUTS[name]
    num_blocks = sum(-(-c // bs) for c in context_lens) + 3
    meta = paged_layout(query_lens, context_lens, bs, num_blocks, gen, device=device)
    num_tokens = sum(query_lens)

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)

    k_cache, v_cache = rand(num_blocks, bs, kv_heads, head_dim), rand(num_blocks, bs, kv_heads, head_dim)
    q = rand(num_tokens, heads, head_dim)
    k, v = rand(num_tokens, kv_heads, head_dim), rand(num_tokens, kv_heads, head_dim)
    return meta, q, k, v, k_cache, v_cache


def torch_reference(meta, q, k, v, k_cache, v_cache, scale, block_size):
    """The torch backend in fp32 on the same (possibly fp16) inputs."""
    k_ref, v_ref = k_cache.float().clone(), v_cache.float().clone()
    backend = TorchAttentionBackend()
    backend.prepare(meta, block_size)
    return backend.forward(q.float(), k.float(), v.float(), k_ref, v_ref, meta, scale), k_ref, v_ref


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_kernels_match_torch_backend(name, dtype, paged_layout, test_device) -> None:
    meta, q, k, v, k_cache, v_cache = build(name, dtype, test_device, paged_layout)
    scale = q.shape[-1] ** -0.5
    expected, k_ref, v_ref = torch_reference(meta, q, k, v, k_cache, v_cache, scale, 4)

    tk.reshape_and_cache(k, v, k_cache, v_cache, meta.slot_mapping)
    assert torch.equal(k_cache.float(), k_ref) and torch.equal(v_cache.float(), v_ref)
    if meta.decode_only:
        out = tk.paged_decode_attention(q, k_cache, v_cache, meta.block_tables, meta.context_lens, scale)
    else:
        out = tk.paged_prefill_attention(
            q, k_cache, v_cache, meta.block_tables, meta.context_lens, meta.query_start_loc, meta.max_query_len, scale
        )
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_prefill_kernel_serves_decodes_too(dtype, paged_layout, test_device) -> None:
    meta, q, k, v, k_cache, v_cache = build("decodes", dtype, test_device, paged_layout)
    scale = 0.2
    expected, _, _ = torch_reference(meta, q, k, v, k_cache, v_cache, scale, 4)
    tk.reshape_and_cache(k, v, k_cache, v_cache, meta.slot_mapping)
    out = tk.paged_prefill_attention(
        q, k_cache, v_cache, meta.block_tables, meta.context_lens, meta.query_start_loc, 1, scale
    )
    torch.testing.assert_close(out.float(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def test_padding_rows_write_nothing_and_output_zeros(paged_layout, test_device) -> None:
    """CUDA-graph padding: slot -1 is not written, a sequence with context 0 yields zeros (not NaN)."""
    meta, q, k, v, k_cache, v_cache = build("decodes", torch.float32, test_device, paged_layout)
    slots = meta.slot_mapping.clone()
    slots[2] = -1
    before = k_cache.clone()
    tk.reshape_and_cache(k, v, k_cache, v_cache, slots)
    changed = (k_cache != before).flatten(1).any(1)  # blocks that were written
    written_blocks = {int(s) // 4 for i, s in enumerate(meta.slot_mapping.tolist()) if i != 2}
    assert set(changed.nonzero().flatten().tolist()) <= written_blocks
    skipped = int(meta.slot_mapping[2])
    assert torch.equal(k_cache.view(-1, 2, 32)[skipped], before.view(-1, 2, 32)[skipped])

    context_lens = meta.context_lens.clone()
    context_lens[1] = 0
    out = tk.paged_decode_attention(q, k_cache, v_cache, meta.block_tables, context_lens, 0.2)
    assert torch.isfinite(out).all()
    assert torch.count_nonzero(out[1]) == 0


def test_model_with_triton_backend_matches_torch_backend(
    tmp_path, make_tiny_checkpoint, step_helper, test_device
) -> None:
    path = make_tiny_checkpoint(tmp_path / "tiny", "llama")
    logits = {}
    for backend in ("torch", "triton"):
        config = EngineConfig(model=str(path), device=test_device, dtype="float32", attention_backend=backend,
                              block_size=4, num_gpu_blocks_override=64, max_model_len=128)  # fmt: skip
        runner = ModelRunner(config)
        helper = step_helper(runner.num_blocks, runner.block_size, seed=9)
        a = helper.new_seq("a", list(range(3, 40)))
        b = helper.new_seq("b", list(range(50, 61)))
        helper.step(runner, [(a, 20)])
        first = helper.step(runner, [(b, 11), (a, 17)])
        a.append_token(5)
        b.append_token(6)
        second = helper.step(runner, [(a, 1), (b, 1)])
        logits[backend] = torch.cat([first, second]).cpu()
    torch.testing.assert_close(logits["triton"], logits["torch"], atol=1e-4, rtol=1e-4)
