"""Triton kernels for the paged KV cache: ``reshape_and_cache``, paged decode attention and prefill (varlen,
causal) attention reading K/V through block tables.

Cache layout: ``[num_blocks, block_size, num_kv_heads, head_dim]``, head_dim contiguous. Keys are visited in
tiles of ``BLOCK_N`` positions; each position's page comes from the block table, so a tile may span pages and
any block size works. Softmax is the online (flash) form, accumulated in fp32.

They also run on CPU tensors under ``TRITON_INTERPRET=1`` (set before this module is imported), which is how
the tests check them against the torch backend without a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _reshape_and_cache_kernel(
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
    stride_kt, stride_vt, stride_slot,
    KV_SIZE: tl.constexpr, KV_PAD: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    offs = tl.arange(0, KV_PAD)
    # slot -1 marks a padding token (CUDA-graph batches): nothing is written for it.
    mask = (offs < KV_SIZE) & ((slot + offs * 0) >= 0)
    k = tl.load(k_ptr + token * stride_kt + offs, mask=mask)
    v = tl.load(v_ptr + token * stride_vt + offs, mask=mask)
    tl.store(k_cache_ptr + slot * stride_slot + offs, k, mask=mask)
    tl.store(v_cache_ptr + slot * stride_slot + offs, v, mask=mask)


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_tables_ptr, context_lens_ptr,
    scale,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_bt,
    stride_cb, stride_cs, stride_ch,
    BLOCK_SIZE: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # One program per (sequence, kv head): it serves the GROUP query heads sharing that kv head, so each
    # K/V tile is read once for the whole group.
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    ctx = tl.load(context_lens_ptr + seq)
    g = tl.arange(0, GROUP_PAD)
    d = tl.arange(0, HEAD_DIM_PAD)
    gm = g < GROUP
    dm = d < HEAD_DIM
    heads = kv_head * GROUP + g
    q_mask = gm[:, None] & dm[None, :]
    q = tl.load(q_ptr + seq * stride_qt + heads[:, None] * stride_qh + d[None, :], mask=q_mask, other=0.0)
    q = q.to(tl.float32) * scale

    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM_PAD], dtype=tl.float32)
    for start in range(0, ctx, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        nm = n < ctx
        block = tl.load(block_tables_ptr + seq * stride_bt + n // BLOCK_SIZE, mask=nm, other=0).to(tl.int64)
        offs = block * stride_cb + (n % BLOCK_SIZE) * stride_cs + kv_head * stride_ch
        kv_mask = nm[:, None] & dm[None, :]
        k = tl.load(k_cache_ptr + offs[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GROUP_PAD, BLOCK_N]
        scores = tl.where(nm[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_cache_ptr + offs[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m_i = m_new
    # A padding sequence (context 0) has l_i == 0: it writes zeros instead of NaN.
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(
        out_ptr + seq * stride_ot + heads[:, None] * stride_oh + d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=gm[:, None] & dm[None, :],
    )


@triton.jit
def _paged_prefill_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_tables_ptr, context_lens_ptr, query_start_ptr,
    scale,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_bt,
    stride_cb, stride_cs, stride_ch,
    BLOCK_SIZE: tl.constexpr, GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    # One program per (sequence, query head, tile of BLOCK_M query tokens).
    seq = tl.program_id(0)
    head = tl.program_id(1)
    tile = tl.program_id(2)
    kv_head = head // GROUP
    q_start = tl.load(query_start_ptr + seq)
    q_len = tl.load(query_start_ptr + seq + 1) - q_start
    ctx = tl.load(context_lens_ptr + seq)
    i = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    im = i < q_len
    q_pos = ctx - q_len + i  # the query tokens are the last q_len positions of the context
    d = tl.arange(0, HEAD_DIM_PAD)
    dm = d < HEAD_DIM
    q_offs = (q_start + i)[:, None] * stride_qt + head * stride_qh + d[None, :]
    q = tl.load(q_ptr + q_offs, mask=im[:, None] & dm[None, :], other=0.0)

    # Causal: the tile's last query sees keys up to its own position. A tile past the sequence's queries
    # (the grid is sized for the longest) loops zero times and stores nothing.
    last = tl.minimum((tile + 1) * BLOCK_M, q_len)
    kv_end = tl.where(tile * BLOCK_M < q_len, ctx - q_len + last, 0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    for start in range(0, kv_end, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        nm = n < kv_end
        block = tl.load(block_tables_ptr + seq * stride_bt + n // BLOCK_SIZE, mask=nm, other=0).to(tl.int64)
        offs = block * stride_cb + (n % BLOCK_SIZE) * stride_cs + kv_head * stride_ch
        kv_mask = nm[:, None] & dm[None, :]
        k = tl.load(k_cache_ptr + offs[:, None] + d[None, :], mask=kv_mask, other=0.0)
        if IEEE:
            scores = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            scores = tl.dot(q, tl.trans(k))
        scores = scores * scale
        allowed = nm[None, :] & (n[None, :] <= q_pos[:, None])
        scores = tl.where(allowed, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        # Rows with nothing allowed yet keep m = -inf; use 0 there so exp() sees no (-inf) - (-inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_cache_ptr + offs[:, None] + d[None, :], mask=kv_mask, other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(
        out_ptr + (q_start + i)[:, None] * stride_ot + head * stride_oh + d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=im[:, None] & dm[None, :],
    )


def _check_cache(k_cache: torch.Tensor) -> None:
    if k_cache.stride(3) != 1 or k_cache.stride(2) != k_cache.shape[3]:
        raise ValueError("KV cache must be [num_blocks, block_size, num_kv_heads, head_dim] with heads packed")


def reshape_and_cache(
    k: torch.Tensor,  # [T, num_kv_heads, head_dim]
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T], -1 = skip
) -> None:
    """Write each token's K/V into its cache slot."""
    _check_cache(k_cache)
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    if k.stride(2) != 1 or k.stride(1) != head_dim:
        k = k.contiguous()
    if v.stride(2) != 1 or v.stride(1) != head_dim:
        v = v.contiguous()
    kv_size = num_kv_heads * head_dim
    _reshape_and_cache_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), v.stride(0), k_cache.stride(1),
        KV_SIZE=kv_size, KV_PAD=triton.next_power_of_2(kv_size),
    )  # fmt: skip


def paged_decode_attention(
    q: torch.Tensor,  # [S, num_heads, head_dim]: one query token per sequence
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [S, max_blocks]
    context_lens: torch.Tensor,  # [S]
    scale: float,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    _check_cache(k_cache)
    num_seqs, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_heads // num_kv_heads
    if out is None:
        out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    # Smaller key tiles for big GQA groups keep the [group, BLOCK_N, head_dim] product in registers.
    block_n = 32 if group <= 4 else 16
    _paged_decode_kernel[(num_seqs, num_kv_heads)](
        q, k_cache, v_cache, out, block_tables, context_lens,
        scale,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), block_tables.stride(0),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        BLOCK_SIZE=k_cache.shape[1], GROUP=group, GROUP_PAD=triton.next_power_of_2(group),
        HEAD_DIM=head_dim, HEAD_DIM_PAD=max(16, triton.next_power_of_2(head_dim)), BLOCK_N=block_n,
    )  # fmt: skip
    return out


def paged_prefill_attention(
    q: torch.Tensor,  # [T, num_heads, head_dim], flat over sequences
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [S, max_blocks]
    context_lens: torch.Tensor,  # [S]
    query_start_loc: torch.Tensor,  # [S + 1]
    max_query_len: int,
    scale: float,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of each sequence's new tokens over its whole cached context (new tokens included)."""
    _check_cache(k_cache)
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    num_seqs = context_lens.shape[0]
    if out is None:
        out = torch.empty_like(q)
    if num_tokens == 0:
        return out
    block_m = 16 if max_query_len <= 16 else 64
    block_n = 64 if head_dim <= 64 else 32
    grid = (num_seqs, num_heads, triton.cdiv(max_query_len, block_m))
    _paged_prefill_kernel[grid](
        q, k_cache, v_cache, out, block_tables, context_lens, query_start_loc,
        scale,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), block_tables.stride(0),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        BLOCK_SIZE=k_cache.shape[1], GROUP=num_heads // num_kv_heads,
        HEAD_DIM=head_dim, HEAD_DIM_PAD=max(16, triton.next_power_of_2(head_dim)),
        BLOCK_M=block_m, BLOCK_N=block_n, IEEE=q.dtype == torch.float32,
    )  # fmt: skip
    return out
