"""Attention over the paged KV cache, behind one interface.

A step's tokens come as one flat, unpadded batch (prefill chunks and decodes of many sequences together).
The model runner builds one :class:`AttentionMetadata` per step; the backend's :meth:`AttentionBackend.prepare`
turns it once into whatever index tensors the backend needs, and every layer then calls
:meth:`AttentionBackend.forward`, which writes the step's new K/V into the cache and attends over the
whole context read back through the block tables.

Cache layout (per layer): V is ``[num_blocks, block_size, num_kv_heads, head_dim]``; K is the same, or, for a
backend with ``k_transposed`` (the cpu backend), ``[num_blocks, num_kv_heads, head_dim, block_size]``: each
block's keys dimension-major, so a decode kernel scores a block's tokens with one vector FMA per dimension
(vLLM's CPU and GPU kernels lay keys out for the same reason). :func:`keys_by_token` views either as the first.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch


@dataclass
class AttentionMetadata:
    """Where a step's tokens go in the cache and what each sequence attends to.

    Sequences are in scheduler order; sequence ``i`` owns the flat tokens
    ``query_start_loc[i]:query_start_loc[i + 1]``, which are its last positions: its query token ``j`` sits at
    position ``context_lens[i] - query_len_i + j`` and sees keys ``0..that position``.
    """

    slot_mapping: torch.Tensor  # [T] int64: block_id * block_size + offset; -1 = padding token, not written
    block_tables: torch.Tensor  # [S, max_blocks] int32; entries past a sequence's blocks are ignored
    context_lens: torch.Tensor  # [S] int32: tokens in the cache after this step (0 = padding sequence)
    query_start_loc: torch.Tensor  # [S + 1] int32: cumulative new-token counts
    max_query_len: int
    max_context_len: int
    # Per-step tensors a backend derives once in prepare() and every layer reuses.
    state: Any = None

    @property
    def num_seqs(self) -> int:
        return self.context_lens.shape[0]

    @property
    def decode_only(self) -> bool:
        return self.max_query_len == 1


class AttentionBackend(ABC):
    name: ClassVar[str]
    # True when forward() on a decode-only step does no host synchronisation and allocates nothing that
    # depends on the step's contents, so the model runner may capture it in a CUDA graph.
    supports_cuda_graphs: ClassVar[bool] = False
    k_transposed: ClassVar[bool] = False

    def k_cache_shape(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int) -> tuple[int, ...]:
        if self.k_transposed:
            return (num_blocks, num_kv_heads, head_dim, block_size)
        return (num_blocks, block_size, num_kv_heads, head_dim)

    def prepare(self, meta: AttentionMetadata, block_size: int) -> None:
        """Build per-step state into ``meta.state`` (called once per step, before the layers)."""
        meta.state = None

    @abstractmethod
    def forward(
        self,
        q: torch.Tensor,  # [T, num_heads, head_dim]
        k: torch.Tensor,  # [T, num_kv_heads, head_dim]
        v: torch.Tensor,  # [T, num_kv_heads, head_dim]
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:  # [T, num_heads, head_dim]
        """Write ``k``/``v`` at ``meta.slot_mapping``, then attend each query over its sequence's context."""


def keys_by_token(k_cache: torch.Tensor, transposed: bool) -> torch.Tensor:
    """The K cache as ``[num_blocks, block_size, num_kv_heads, head_dim]`` (a view, whatever its layout)."""
    return k_cache.permute(0, 3, 1, 2) if transposed else k_cache


BACKENDS = ("torch", "cpu", "triton")


def triton_interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def get_attention_backend(name: str, device: torch.device | str) -> AttentionBackend:
    """The backend called ``name`` ("auto", "torch", "cpu" or "triton") for ``device``.

    "auto" picks Triton on CUDA; on CPU, the C++ decode kernel ("cpu") when it builds on this machine, else
    plain torch. Triton off CUDA runs only under ``TRITON_INTERPRET=1`` (tests), which must be set before the
    kernels are imported.
    """
    device = torch.device(device)
    if name == "auto":
        if device.type == "cuda":
            name = "triton"
        else:
            from inference.worker.attention import cpu_kernels

            name = "cpu" if device.type == "cpu" and cpu_kernels.load() else "torch"
    if name == "torch":
        from inference.worker.attention.torch_backend import TorchAttentionBackend

        return TorchAttentionBackend()
    if name == "cpu":
        if device.type != "cpu":
            raise ValueError(f"the cpu attention backend runs on CPU only (got {device})")
        from inference.worker.attention.cpu_backend import CpuAttentionBackend

        return CpuAttentionBackend()
    if name == "triton":
        if device.type != "cuda" and not triton_interpreted():
            raise ValueError(
                f"the triton attention backend needs a CUDA device (got {device}); "
                "use attention_backend='torch', or set TRITON_INTERPRET=1 before starting (tests only)"
            )
        from inference.worker.attention.triton_backend import TritonAttentionBackend

        return TritonAttentionBackend()
    raise ValueError(f"unknown attention backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")
