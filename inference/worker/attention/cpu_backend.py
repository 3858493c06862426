"""Paged attention on CPU with the C++ kernels (``cpu_kernels``): every query reads the cache in place.

Every query token of a step, prefill chunk or decode, goes to ``paged_attention``: the decode kernel's walk over
its sequence's blocks, up to its own position, from position 0, in one fixed order. Nothing is copied, nothing
is padded, and a token's attention is the same sums in the same order whether its context was computed in the
same chunk, an earlier chunk or taken from the prefix cache, and whatever else runs in the step: the engine's
answer does not depend on the prefix cache, the chunking or the batch (with the panel projections of
``models/llama.py``, ``EngineConfig.batch_invariant``; tests/inference/test_engine.py checks it end to end).

Cascade (``cascade = True``, off by default, ``EngineConfig(batch_invariant=False)`` turns it on): when the
decodes share leading blocks (the store's system prompt), attention over those is one dense product for all of
them (``prefix_attention``, C++: tiles of query rows of any sequences share each key load), and the decode
kernel continues each sequence's softmax from that partial result. That sums a decode's scores in another order
depending on which other sequences share its prefix in that step, so it is not batch invariant. In the
benchmark's busy step (48 decodes over a 464-token prompt, bf16, 2-core AVX512-BF16 EPYC, torch.profiler) the
kernel took 37 ms without the cascade against 27 + 7 ms with it. Prefill chunks run ``paged_attention`` in both
modes.

The K cache is stored transposed per block (``k_transposed``, see ``attention/__init__.py``): the kernel then
scores a block's 16 keys with one vector FMA per dimension instead of 16 dot products and their horizontal sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.worker.attention import AttentionBackend, AttentionMetadata, cpu_kernels, torch_backend
from inference.worker.attention.torch_backend import _Prefix, _shared_prefix_blocks


@dataclass
class _Decodes:
    rows: torch.Tensor  # [N] int64: each decode's flat token (its row of q and of the output)
    block_tables: torch.Tensor  # [N, W] int32, contiguous
    context_lens: torch.Tensor  # [N] int32
    shared_blocks: int  # leading blocks attended through the prefix
    prefix: _Prefix
    prefix_blocks: torch.Tensor  # [shared_blocks] int32: the prefix's blocks, for the C++ prefix kernel


@dataclass
class _CpuState:
    query_start_loc: torch.Tensor  # [S + 1] int32
    block_tables: torch.Tensor  # [S, W] int32, contiguous
    context_lens: torch.Tensor  # [S] int32
    # The sequences paged_attention runs (int64; None: all of them); the others are cascade decodes.
    others: torch.Tensor | None
    decodes: _Decodes | None  # cascade decodes (None: no cascade this step)


class CpuAttentionBackend(AttentionBackend):
    name = "cpu"
    k_transposed = True
    cascade = False  # shared leading blocks of decodes through one dense product (see above); not batch invariant

    def __init__(self) -> None:
        if not cpu_kernels.load():
            raise RuntimeError(f"the cpu attention backend needs its C++ kernels: {cpu_kernels.unavailable_reason()}")

    def prepare(self, meta: AttentionMetadata, block_size: int) -> None:
        state = _CpuState(
            meta.query_start_loc.to(torch.int32).contiguous(),
            meta.block_tables.to(torch.int32).contiguous(),
            meta.context_lens.to(torch.int32).contiguous(),
            None,
            None,
        )
        meta.state = state
        if not self.cascade:
            return
        qsl = meta.query_start_loc.long()
        query_start = qsl[:-1]
        is_decode = (qsl[1:] - query_start) == 1
        all_seqs = torch.arange(meta.num_seqs)
        decode_idx = all_seqs[is_decode]
        shared = _shared_prefix_blocks(decode_idx, meta.context_lens.long(), meta.block_tables, block_size)
        if not shared:
            return
        rows = query_start[decode_idx].contiguous()
        prefix_blocks = meta.block_tables[decode_idx[0], :shared].to(torch.int32).contiguous()
        state.decodes = _Decodes(
            rows,
            state.block_tables.index_select(0, decode_idx).contiguous(),
            state.context_lens.index_select(0, decode_idx).contiguous(),
            shared,
            _Prefix(prefix_blocks.long(), rows),
            prefix_blocks,
        )
        state.others = all_seqs[~is_decode].contiguous()

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
        state: _CpuState = meta.state
        cpu_kernels.store_kv(k, v, k_cache, v_cache, meta.slot_mapping, k_transposed=True)
        out = torch.empty(q.shape, dtype=q.dtype)
        if state.others is None or state.others.numel():
            cpu_kernels.paged_attention(
                out, q, k_cache, v_cache, state.query_start_loc, state.block_tables, state.context_lens, scale,
                state.others,
            )
        d = state.decodes
        if d is not None:
            prefix = self._attend_prefix(d, q, k_cache, v_cache, scale)
            cpu_kernels.paged_decode_attention(
                out, q, k_cache, v_cache, d.rows, d.block_tables, d.context_lens, scale, d.shared_blocks, prefix
            )
        return out

    @staticmethod
    def _attend_prefix(
        d: _Decodes, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if cpu_kernels.prefix_attention_supported(q.shape[2], k_cache.shape[3]):
            return cpu_kernels.prefix_attention(q, k_cache, v_cache, d.rows, d.prefix_blocks, scale)
        out, lse = torch_backend._attend_prefix(d.prefix, q, k_cache, v_cache, scale, k_transposed=True)
        return out, lse.float().contiguous()
