"""Paged attention on CPU with the C++ decode kernel (``cpu_kernels``): decodes read the cache in place.

Decodes, the bulk of every busy step, go to ``paged_decode_attention``: each sequence walks its own blocks,
so nothing is copied and nothing is padded. When the decodes share leading blocks (the store's system prompt),
attention over those is one dense product for all of them (``prefix_attention``, C++: tiles of query rows of
any sequences share each key load), and the kernel continues each sequence's softmax from that partial result
(cascade attention). Without the cascade (``cascade = False``) the kernel reads the shared blocks once per
sequence, from the CPU's cache after the first: in the benchmark's busy step (48 decodes over a 464-token
prompt, bf16, 2-core AVX512-BF16 EPYC, torch.profiler) 37 ms of kernel against 27 + 7 ms with the cascade;
torch's flash SDPA as the prefix product took 14 ms, more than it saved. Prefill chunks are compute-bound
matrix products, which torch's kernels already do well: they take the torch backend's path.

The K cache is stored transposed per block (``k_transposed``, see ``attention/__init__.py``): the kernel then
scores a block's 16 keys with one vector FMA per dimension instead of 16 dot products and their horizontal sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.worker.attention import AttentionMetadata, cpu_kernels, torch_backend
from inference.worker.attention.torch_backend import (
    TorchAttentionBackend,
    _build_group,
    _Group,
    _Prefix,
    _shared_prefix_blocks,
    attend_group,
)


@dataclass
class _Decodes:
    rows: torch.Tensor  # [N] int64: each decode's flat token (its row of q and of the output)
    block_tables: torch.Tensor  # [N, W] int32, contiguous
    context_lens: torch.Tensor  # [N] int32
    shared_blocks: int  # leading blocks attended through the prefix (0: none)
    prefix: _Prefix | None
    prefix_blocks: torch.Tensor | None  # [shared_blocks] int32: the prefix's blocks, for the C++ prefix kernel


@dataclass
class _CpuState:
    decodes: _Decodes | None
    chunks: _Group | None


class CpuAttentionBackend(TorchAttentionBackend):
    name = "cpu"
    k_transposed = True
    cascade = True  # shared leading blocks through one dense product for all decodes (see above)

    def __init__(self) -> None:
        if not cpu_kernels.load():
            raise RuntimeError(f"the cpu attention backend needs its C++ kernels: {cpu_kernels.unavailable_reason()}")

    def prepare(self, meta: AttentionMetadata, block_size: int) -> None:
        qsl = meta.query_start_loc.long()
        query_start = qsl[:-1]
        query_lens = qsl[1:] - query_start
        context_lens = meta.context_lens.long()
        num_tokens = meta.slot_mapping.shape[0]
        all_seqs = torch.arange(meta.num_seqs)
        is_decode = query_lens == 1
        decode_idx, chunk_idx = all_seqs[is_decode], all_seqs[~is_decode]
        decodes = None
        if decode_idx.numel():
            shared = _shared_prefix_blocks(decode_idx, context_lens, meta.block_tables, block_size) if self.cascade else 0
            rows = query_start[decode_idx].contiguous()
            prefix_blocks = meta.block_tables[decode_idx[0], :shared].contiguous() if shared else None
            decodes = _Decodes(
                rows,
                meta.block_tables.index_select(0, decode_idx).contiguous(),
                meta.context_lens.index_select(0, decode_idx).contiguous(),
                shared,
                _Prefix(prefix_blocks.long(), rows) if prefix_blocks is not None else None,
                prefix_blocks,
            )
        chunks = None
        if chunk_idx.numel():
            chunks = _build_group(
                chunk_idx, query_start, query_lens, context_lens, meta.block_tables, block_size, num_tokens
            )
        meta.state = _CpuState(decodes, chunks)

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
        if state.decodes is None and state.chunks is not None and state.chunks.query_index is None:
            return attend_group(state.chunks, q, k, v, k_cache, v_cache, scale, k_transposed=True)  # prefills only
        out = torch.empty(q.shape, dtype=q.dtype)
        if state.chunks is not None:
            attend_group(state.chunks, q, k, v, k_cache, v_cache, scale, out=out, k_transposed=True)
        d = state.decodes
        if d is not None:
            prefix = None
            if d.prefix is not None:
                prefix = self._attend_prefix(d, q, k_cache, v_cache, scale)
            cpu_kernels.paged_decode_attention(
                out, q, k_cache, v_cache, d.rows, d.block_tables, d.context_lens, scale, d.shared_blocks, prefix
            )
        return out

    @staticmethod
    def _attend_prefix(
        d: _Decodes, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        assert d.prefix is not None
        if cpu_kernels.prefix_attention_supported(q.shape[2], k_cache.shape[3]):
            return cpu_kernels.prefix_attention(q, k_cache, v_cache, d.rows, d.prefix_blocks, scale)
        out, lse = torch_backend._attend_prefix(d.prefix, q, k_cache, v_cache, scale, k_transposed=True)
        return out, lse.float().contiguous()
