"""Paged attention in plain torch (the CPU path).

Per step, ``prepare`` splits the sequences into groups: decodes (one new token each, bucketed by context
length when that saves much padding) and prefill chunks. For each group it builds, once for all layers, the
gather indices (whole blocks, through the block tables) and the boolean mask. Each layer then gathers the
group's K/V into a padded ``[S, max_ctx]`` view with one ``index_select`` per tensor (into a buffer reused by
every layer) and runs ``scaled_dot_product_attention``: no Python loop over sequences or tokens inside a layer.
Decode groups fold the query heads that share a KV head into query rows of that head, so each K/V row is
read once per KV head.

Cascade attention for decodes: when the decoding sequences start with the same physical blocks (the store's
system prompt, shared through the prefix cache), attention over that prefix is one dense product for all of
them, read once per layer instead of gathered once per sequence; each sequence then attends over its own
suffix, and the two partial results are merged through their log-sum-exp (vLLM's cascade attention, FlashInfer's
cascade inference, Hydragen).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inference.core.utils import cdiv
from inference.worker.attention import AttentionBackend, AttentionMetadata


@dataclass
class _Group:
    num_seqs: int
    max_query_len: int
    num_ctx_slots: int  # gathered key slots per sequence: whole blocks covering the longest context
    block_ids: torch.Tensor  # [num_seqs * blocks] int64, the blocks to gather, row-major per sequence
    mask: torch.Tensor  # [num_seqs, 1, max_query_len, num_ctx_slots] bool, True = attend
    # Flat token indices of the padded queries ([num_seqs * max_query_len]); None when the group is
    # exactly the step's tokens in order (then no gather/scatter of queries is needed).
    query_index: torch.Tensor | None
    # Rows of the padded output that are real tokens (None: all are), and the flat token each one goes to.
    valid_rows: torch.Tensor | None
    dest_tokens: torch.Tensor | None
    # The sequences only see this step's tokens (fresh prompts in one chunk): K/V need no gather.
    fresh: bool
    # Cascade decodes: this group's rows in the shared-prefix result (None: no shared prefix).
    prefix_rows: slice | None = None
    # Gather destinations, allocated by the first layer and reused by the others: fresh buffers every
    # layer would cost page faults on each multi-megabyte allocation.
    k_buf: torch.Tensor | None = None
    v_buf: torch.Tensor | None = None
    additive_mask: torch.Tensor | None = None  # the mask as 0 / -inf in the model dtype, for the LSE kernel


@dataclass
class _Prefix:
    """The blocks every decoding sequence starts with, and the decode tokens that attend over them."""

    block_ids: torch.Tensor  # [P] int64
    query_index: torch.Tensor  # [N] flat token index of each decode, in the order of the groups' prefix_rows


@dataclass
class _State:
    groups: list[_Group]
    num_tokens: int
    prefix: _Prefix | None = None


def _build_group(
    seq_idx: torch.Tensor,
    query_start: torch.Tensor,
    query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
    block_size: int,
    num_tokens: int,
    skip_blocks: int = 0,
) -> _Group:
    """``skip_blocks``: leading blocks attended elsewhere (the shared prefix); the group sees the rest."""
    device = query_start.device
    qs, ql = query_start[seq_idx], query_lens[seq_idx]
    cl = context_lens[seq_idx] - skip_blocks * block_size
    num_seqs = seq_idx.numel()
    max_q = int(ql.max())
    max_ctx = int(cl.max())
    num_blocks = cdiv(max_ctx, block_size)
    block_ids = block_tables[seq_idx, skip_blocks : skip_blocks + num_blocks].reshape(-1).long()
    slots = num_blocks * block_size

    offs = torch.arange(max_q, device=device)
    valid_q = offs[None, :] < ql[:, None]  # [S, max_q]
    # Padding query rows get the last real position: they stay finite (never a fully masked row).
    q_pos = cl[:, None] - ql[:, None] + torch.minimum(offs[None, :], ql[:, None] - 1)
    keys = torch.arange(slots, device=device)
    mask = (keys[None, None, :] <= q_pos[:, :, None]) & (keys[None, None, :] < cl[:, None, None])
    mask = mask.unsqueeze(1)

    fresh = bool((cl == ql).all()) and not skip_blocks
    in_order = num_seqs * max_q == num_tokens and bool(valid_q.all()) and not skip_blocks
    if in_order and num_seqs > 1:
        in_order = bool((seq_idx == torch.arange(num_seqs, device=device)).all())
    if in_order:
        return _Group(num_seqs, max_q, slots, block_ids, mask, None, None, None, fresh)
    token_idx = (qs[:, None] + torch.minimum(offs[None, :], ql[:, None] - 1)).reshape(-1)
    if max_q == 1:
        return _Group(num_seqs, max_q, slots, block_ids, mask, token_idx, None, token_idx, fresh)
    valid_rows = valid_q.reshape(-1).nonzero().squeeze(1)
    return _Group(num_seqs, max_q, slots, block_ids, mask, token_idx, valid_rows, token_idx[valid_rows], fresh)


# Shortest shared prefix worth a cascade, in tokens: below it the extra products cost more than they save.
CASCADE_MIN_TOKENS = 64


def _shared_prefix_blocks(
    seq_idx: torch.Tensor, context_lens: torch.Tensor, block_tables: torch.Tensor, block_size: int
) -> int:
    """Leading blocks that every sequence of ``seq_idx`` has in common (same physical block), each sequence
    keeping at least its last token outside them; 0 when they are too few for a cascade to pay."""
    if seq_idx.numel() < 2:
        return 0
    limit = int((context_lens[seq_idx] - 1).min()) // block_size
    tables = block_tables[seq_idx, :limit]
    same = (tables == tables[:1]).all(0)
    shared = int(same.int().cumprod(0).sum()) if limit else 0
    return shared if shared * block_size >= CASCADE_MIN_TOKENS else 0


# Cost of one more group, in gathered key slots: a group adds about five ops per layer, which take about as
# long as gathering and attending over this many slots (measured on a 2-core CPU with the bundled model).
GROUP_OVERHEAD_SLOTS = 128


def _context_buckets(seq_idx: torch.Tensor, context_lens: torch.Tensor, block_size: int) -> list[torch.Tensor]:
    """Split decodes into up to three groups of similar context length when that gathers far fewer slots.

    Every sequence in a group is padded to the group's longest context, so one 900-token conversation
    would otherwise make forty 100-token decodes gather and attend over 900 slots each.
    """
    n = seq_idx.numel()
    slots = (context_lens[seq_idx] + block_size - 1) // block_size * block_size
    order = slots.argsort(descending=True)
    c = slots[order]  # c[i]: the padded length of a group starting at sorted position i
    count = torch.arange(n, device=c.device)
    cost1 = int(c[0]) * n
    best, splits = cost1, []
    if n > 1:
        # Two groups [0, i), [i, n) and three groups [0, i), [i, j), [j, n), over all 0 < i < j < n.
        two = c[0] * count + c * (n - count) + GROUP_OVERHEAD_SLOTS
        two[0] = cost1 + 10 * GROUP_OVERHEAD_SLOTS  # i = 0 is not a split
        i2 = int(two.argmin())
        if int(two[i2]) < best:
            best, splits = int(two[i2]), [i2]
        i, j = count[:, None], count[None, :]
        three = c[0] * i + c[:, None] * (j - i) + c[None, :] * (n - j) + 2 * GROUP_OVERHEAD_SLOTS
        valid = (i > 0) & (j > i)
        three = torch.where(valid, three, torch.full_like(three, best + 1))
        flat = int(three.argmin())
        if int(three.view(-1)[flat]) < best:
            splits = [flat // n, flat % n]
    edges = [0, *splits, n]
    return [seq_idx[order[a:b]] for a, b in zip(edges[:-1], edges[1:])] if splits else [seq_idx]


class TorchAttentionBackend(AttentionBackend):
    name = "torch"

    def prepare(self, meta: AttentionMetadata, block_size: int) -> None:
        qsl = meta.query_start_loc.long()
        query_start = qsl[:-1]
        query_lens = qsl[1:] - query_start
        context_lens = meta.context_lens.long()
        num_tokens = meta.slot_mapping.shape[0]
        args = (query_start, query_lens, context_lens, meta.block_tables, block_size, num_tokens)
        all_seqs = torch.arange(meta.num_seqs, device=qsl.device)
        if meta.max_query_len == 1:
            decodes, chunks = all_seqs, all_seqs[:0]
        else:
            # Decodes and prefill chunks are padded separately, so a long chunk does not pad every decode
            # to its length.
            is_decode = query_lens == 1
            decodes, chunks = all_seqs[is_decode], all_seqs[~is_decode]
        shared = _shared_prefix_blocks(decodes, context_lens, meta.block_tables, block_size)
        suffix_lens = context_lens - shared * block_size
        buckets = _context_buckets(decodes, suffix_lens, block_size) if decodes.numel() else []
        groups = [_build_group(idx, *args, skip_blocks=shared) for idx in buckets]
        prefix = None
        if shared:
            start = 0
            for group in groups:
                group.prefix_rows = slice(start, start + group.num_seqs)
                start += group.num_seqs
            order = torch.cat(buckets)
            block_ids = meta.block_tables[order[0], :shared].long()
            prefix = _Prefix(block_ids, query_start[order])
        if chunks.numel():
            groups.append(_build_group(chunks, *args))
        meta.state = _State(groups, num_tokens, prefix)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        state: _State = meta.state
        if len(state.groups) == 1 and state.groups[0].query_index is None:
            return attend_group(state.groups[0], q, k, v, k_cache, v_cache, scale)
        out = torch.empty_like(q)
        prefix = _attend_prefix(state.prefix, q, k_cache, v_cache, scale) if state.prefix else None
        for group in state.groups:
            attend_group(group, q, k, v, k_cache, v_cache, scale, out=out, prefix=prefix)
        return out


def attend_group(
    g: _Group,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    scale: float,
    out: torch.Tensor | None = None,
    prefix: tuple[torch.Tensor, torch.Tensor] | None = None,
    k_transposed: bool = False,
) -> torch.Tensor:
    """One group's attention. A group that is the whole step in order returns its output; any other writes
    its tokens' rows of ``out`` and returns it. ``prefix``: the shared-prefix result its rows merge with.
    ``k_transposed``: the K cache stores each block's keys dimension-major (the cpu backend's layout)."""
    if g.query_index is None:
        return _attend(g, q, k, v, k_cache, v_cache, scale, k_transposed=k_transposed)
    assert out is not None
    qg = q.index_select(0, g.query_index)
    kg = k.index_select(0, g.query_index) if g.fresh else k
    vg = v.index_select(0, g.query_index) if g.fresh else v
    if g.prefix_rows is not None and prefix is not None:
        o, lse = _attend(g, qg, kg, vg, k_cache, v_cache, scale, with_lse=True, k_transposed=k_transposed)
        o = _merge(prefix[0][g.prefix_rows], prefix[1][g.prefix_rows], o, lse)
    else:
        o = _attend(g, qg, kg, vg, k_cache, v_cache, scale, k_transposed=k_transposed)
    if g.valid_rows is not None:
        o = o.index_select(0, g.valid_rows)
    return out.index_copy_(0, g.dest_tokens, o)


def write_kv_cache(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    """Store each token's K/V at its slot (the torch twin of the ``reshape_and_cache`` kernel)."""
    num_kv_heads, head_dim = k.shape[1], k.shape[2]
    k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, k)
    v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, v)


def _attend_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """SDPA that also returns each row's log-sum-exp ([B, H, L] float32), for merging partial attentions.

    The CPU flash kernel behind ``scaled_dot_product_attention`` computes it anyway; ``mask`` is additive."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, False, attn_mask=mask, scale=scale
    )
    return out, lse


def _attend_prefix(
    prefix: _Prefix,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    scale: float,
    k_transposed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every decode's attention over the shared blocks: ``([N, H, D], lse [N, H])``.

    One product per KV head over all decodes' query heads: the prefix is read once, not once per sequence."""
    num_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = v_cache.shape[2]
    group = num_heads // num_kv_heads
    n = prefix.query_index.numel()
    qp = q.index_select(0, prefix.query_index).view(n, num_kv_heads, group, head_dim)
    qp = qp.permute(1, 0, 2, 3).reshape(1, num_kv_heads, n * group, head_dim)
    if k_transposed:  # [P, kv_heads, head_dim, block_size] -> [1, kv_heads, P * block_size, head_dim]
        # contiguous: for one block the reshape is a view with head_dim strided, which torch's CPU flash
        # kernel reads wrongly (torch 2.13).
        kp = k_cache.index_select(0, prefix.block_ids).permute(1, 0, 3, 2).reshape(1, num_kv_heads, -1, head_dim)
        kp = kp.contiguous()
    else:
        kp = k_cache.index_select(0, prefix.block_ids).view(-1, num_kv_heads, head_dim).transpose(0, 1).unsqueeze(0)
    vp = v_cache.index_select(0, prefix.block_ids).view(-1, num_kv_heads, head_dim).transpose(0, 1).unsqueeze(0)
    out, lse = _attend_with_lse(qp, kp, vp, None, scale)
    out = out.view(num_kv_heads, n, group, head_dim).permute(1, 0, 2, 3).reshape(n, num_heads, head_dim)
    lse = lse.view(num_kv_heads, n, group).permute(1, 0, 2).reshape(n, num_heads)
    return out, lse


def _merge(o1: torch.Tensor, lse1: torch.Tensor, o2: torch.Tensor, lse2: torch.Tensor) -> torch.Tensor:
    """Softmax attention over the union of two key sets, from each set's normalised output and log-sum-exp."""
    lse = torch.logaddexp(lse1, lse2)
    w1 = torch.exp(lse1 - lse).unsqueeze(-1).to(o1.dtype)
    w2 = torch.exp(lse2 - lse).unsqueeze(-1).to(o2.dtype)
    return o1 * w1 + o2 * w2


def _attend(
    g: _Group,
    q: torch.Tensor,  # [S * max_q, H, D], padded queries in sequence-major order
    k: torch.Tensor,  # this step's keys in the same order (used when the group is fresh)
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    scale: float,
    with_lse: bool = False,
    k_transposed: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:  # [S * max_q, H, D] (and lse [S * max_q, H])
    num_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = v_cache.shape[2]
    if g.max_query_len == 1:
        # One query per sequence: its heads sharing a KV head become the "query rows" of that KV head, so
        # each K/V row is read once per group instead of once per query head (2-3x faster than enable_gqa).
        qp = q.view(g.num_seqs, num_kv_heads, num_heads // num_kv_heads, head_dim)
    else:
        qp = q.view(g.num_seqs, g.max_query_len, num_heads, head_dim).transpose(1, 2)
    if g.fresh:
        # Every key is one of this step's tokens: attend to them directly, skipping the cache read.
        kp = k.view(g.num_seqs, g.max_query_len, num_kv_heads, head_dim).transpose(1, 2)
        vp = v.view(g.num_seqs, g.max_query_len, num_kv_heads, head_dim).transpose(1, 2)
        mask = g.mask[..., : g.max_query_len]
    else:
        if g.k_buf is None:
            g.k_buf = k_cache.new_empty((g.block_ids.shape[0], *k_cache.shape[1:]))
            g.v_buf = v_cache.new_empty((g.block_ids.shape[0], *v_cache.shape[1:]))
        torch.index_select(k_cache, 0, g.block_ids, out=g.k_buf)
        torch.index_select(v_cache, 0, g.block_ids, out=g.v_buf)
        if k_transposed:  # [S * blocks, kv_heads, head_dim, block_size] -> [S, kv_heads, slots, head_dim]
            blocks = g.k_buf.view(g.num_seqs, -1, num_kv_heads, head_dim, k_cache.shape[-1])
            kp = blocks.permute(0, 2, 1, 4, 3).reshape(g.num_seqs, num_kv_heads, g.num_ctx_slots, head_dim)
        else:
            kp = g.k_buf.view(g.num_seqs, g.num_ctx_slots, num_kv_heads, head_dim).transpose(1, 2)
        vp = g.v_buf.view(g.num_seqs, g.num_ctx_slots, num_kv_heads, head_dim).transpose(1, 2)
        mask = g.mask
    if g.max_query_len == 1:
        if with_lse:
            if g.additive_mask is None:
                g.additive_mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill_(~mask, float("-inf"))
            out, lse = _attend_with_lse(qp, kp, vp, g.additive_mask, scale)
            return out.reshape(-1, num_heads, head_dim), lse.reshape(-1, num_heads)
        out = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, scale=scale)
        return out.reshape(-1, num_heads, head_dim)
    out = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, scale=scale, enable_gqa=num_heads != num_kv_heads)
    return out.transpose(1, 2).reshape(-1, num_heads, head_dim)
