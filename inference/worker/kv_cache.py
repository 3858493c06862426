"""The KV-cache tensors: how many blocks fit in the memory given, and their allocation.

Per layer a K and a V tensor of shape ``[num_blocks, block_size, num_kv_heads, head_dim]`` in the model dtype
(K transposed per block for backends that ask for it: see ``attention/__init__.py``).
On CPU the budget is ``EngineConfig.kv_cache_memory`` bytes; on CUDA it is what ``gpu_memory_utilization``
leaves after a worst-case step (``ModelRunner`` profiles it). ``num_gpu_blocks_override`` wins over both.
"""

from __future__ import annotations

import torch

from inference.core.config import EngineConfig
from inference.worker.loader import ModelConfig
from inference.worker.models.llama import LlamaForCausalLM


class KVCacheTooSmallError(RuntimeError):
    """The model plus a KV cache for one max_model_len sequence does not fit in the memory given."""


def kv_cache_bytes_per_block(
    model_config: ModelConfig, block_size: int, dtype: torch.dtype, num_kv_heads: int | None = None
) -> int:
    """Bytes of one block across all layers, K and V (``num_kv_heads``: a tensor-parallel rank's share)."""
    heads = model_config.num_key_value_heads if num_kv_heads is None else num_kv_heads
    per_token = 2 * model_config.num_hidden_layers * heads * model_config.head_dim
    return per_token * block_size * torch.finfo(dtype).bits // 8


def num_blocks_for(config: EngineConfig, bytes_per_block: int, budget: int, what: str) -> int:
    """Blocks in ``budget`` bytes; an error naming the sizes when one max_model_len sequence does not fit."""
    if config.num_gpu_blocks_override is not None:
        if config.num_gpu_blocks_override < 1:
            raise ValueError("num_gpu_blocks_override must be at least 1")
        return config.num_gpu_blocks_override
    num_blocks = budget // bytes_per_block
    need = config.max_blocks_per_seq
    if num_blocks < need:
        raise KVCacheTooSmallError(
            f"{what}: {budget} bytes hold {max(budget, 0) // bytes_per_block} KV blocks, but one "
            f"max_model_len={config.max_model_len} sequence needs {need} blocks of {bytes_per_block} "
            f"bytes ({need * bytes_per_block} bytes, block_size={config.block_size}); give the cache at least "
            f"that much or lower max_model_len"
        )
    return int(num_blocks)


def cpu_budget(config: EngineConfig, bytes_per_block: int) -> int:
    """``kv_cache_memory``, refused when the machine does not have that much memory available."""
    budget = config.kv_cache_memory
    available = available_host_memory()
    if available is not None and budget > available:
        raise KVCacheTooSmallError(
            f"kv_cache_memory={budget} bytes exceeds the {available} bytes of memory available after "
            f"loading the model; at {bytes_per_block} bytes per block, one max_model_len sequence "
            f"needs {config.max_blocks_per_seq * bytes_per_block} bytes"
        )
    return budget


def allocate_kv_cache(
    model: LlamaForCausalLM, num_blocks: int, block_size: int, dtype: torch.dtype, device: torch.device
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Zeroed K/V tensors bound to the model's attention layers (a masked-out slot must hold a finite value,
    since 0 * NaN would leak into the output)."""
    caches = []
    for attn in model.kv_cache_layers():
        shape = (num_blocks, block_size, attn.num_kv_heads, attn.head_dim)  # this rank's KV heads
        k_shape = attn.backend.k_cache_shape(*shape)  # the backend may store a block's keys transposed
        k = torch.zeros(k_shape, dtype=dtype, device=device)
        v = torch.zeros(shape, dtype=dtype, device=device)
        attn.k_cache, attn.v_cache = k, v
        caches.append((k, v))
    return caches


def copy_blocks(
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]], pairs: list[tuple[int, int]], device: torch.device
) -> None:
    """Copy whole blocks ``src -> dst`` in every layer's K and V (the scheduler's copies on write).

    All sources are read before any destination is written, so the result does not depend on the order of
    the pairs. Dim 0 is the block in both cache layouts (K transposed per block or not)."""
    src = torch.tensor([s for s, _ in pairs], dtype=torch.long, device=device)
    dst = torch.tensor([d for _, d in pairs], dtype=torch.long, device=device)
    for k, v in kv_caches:
        k.index_copy_(0, dst, k.index_select(0, src))
        v.index_copy_(0, dst, v.index_select(0, src))


def release_kv_cache(model: LlamaForCausalLM, device: torch.device) -> None:
    for attn in model.kv_cache_layers():
        attn.k_cache = attn.v_cache = torch.empty(0, device=device)


def available_host_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
