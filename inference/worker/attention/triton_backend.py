"""Paged attention with Triton kernels (the CUDA path).

Decode-only steps use the paged decode kernel, whose launch depends only on tensor shapes and whose loop
bounds are read on the device, so the model runner can capture such steps in CUDA graphs. Steps with
prefill chunks use the varlen prefill kernel, which also serves the decodes mixed into them.
"""

from __future__ import annotations

import torch

from inference.worker.attention import AttentionBackend, AttentionMetadata
from inference.worker.attention.triton_kernels import paged_decode_attention, paged_prefill_attention, reshape_and_cache


class TritonAttentionBackend(AttentionBackend):
    name = "triton"
    supports_cuda_graphs = True

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
        reshape_and_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        if meta.decode_only:
            return paged_decode_attention(q, k_cache, v_cache, meta.block_tables, meta.context_lens, scale, out)
        return paged_prefill_attention(
            q, k_cache, v_cache, meta.block_tables, meta.context_lens, meta.query_start_loc,
            meta.max_query_len, scale, out,
        )  # fmt: skip
