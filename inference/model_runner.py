"""Runs the model for one scheduler step: builds the step's flat tensors, owns the paged KV cache, and on CUDA
replays decode-only steps from CUDA graphs.

Interface (see docs/engine-design.md, "Model runner")::

    runner = ModelRunner(config)                     # loads weights, sizes and allocates the KV cache
    runner.num_blocks                                # KV blocks to give the block pool
    seqs = ModelRunner.sampling_sequences(output)    # which scheduled sequences sample, in order
    logits = runner.execute(output)                  # [len(seqs), vocab] float32

Both calls read ``seq.num_computed_tokens``, so they must come before ``scheduler.update``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from inference.attention import AttentionBackend, AttentionMetadata, get_attention_backend
from inference.config import EngineConfig
from inference.loader import ModelConfig, load_weights, resolve_model
from inference.models import get_model_class
from inference.models.llama import LlamaForCausalLM, build_model

if TYPE_CHECKING:
    from inference.sequence import Sequence

logger = logging.getLogger(__name__)

DEFAULT_CPU_KV_CACHE_BYTES = 1 << 30
_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
}  # fmt: skip


def resolve_dtype(name: str | torch.dtype, device: torch.device) -> torch.dtype:
    """"auto" is fp32 on CPU (fastest and exact there) and bf16 on CUDA (fp16 where bf16 is missing)."""
    if isinstance(name, torch.dtype):
        return name
    if name == "auto":
        if device.type != "cuda":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; choose auto, float32, float16 or bfloat16") from None


def kv_cache_bytes_per_block(model_config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes of one block across all layers, K and V."""
    per_token = 2 * model_config.num_hidden_layers * model_config.num_key_value_heads * model_config.head_dim
    return per_token * block_size * torch.finfo(dtype).bits // 8


def cuda_graph_batch_sizes(max_num_seqs: int) -> list[int]:
    """Decode batch sizes captured in CUDA graphs: powers of two below max_num_seqs, and max_num_seqs."""
    sizes = [1 << i for i in range(max_num_seqs.bit_length()) if (1 << i) < max_num_seqs]
    return sizes + [max_num_seqs]


class KVCacheTooSmallError(RuntimeError):
    """The model plus a KV cache for one max_model_len sequence does not fit in the memory given."""


@dataclass
class StepInputs:
    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    meta: AttentionMetadata
    logits_indices: torch.Tensor  # [N]: flat index of the last token of each sampling sequence


def _samples(seq: Sequence, num_new_tokens: int) -> bool:
    return seq.num_computed_tokens + num_new_tokens == len(seq.token_ids)


class ModelRunner:
    def __init__(self, config: EngineConfig, model_source: str | os.PathLike[str] | None = None) -> None:
        self.config = config
        self.device = torch.device(config.device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.block_size = config.block_size
        self.dtype = resolve_dtype(config.dtype, self.device)
        start = time.perf_counter()
        self.model_path: Path = resolve_model(model_source if model_source is not None else config.model)
        self.model_config, weights = load_weights(self.model_path, self.dtype, self.device)
        self._check_lengths()
        self.backend: AttentionBackend = get_attention_backend(config.attention_backend, self.device)
        get_model_class(self.model_config.architecture)  # clear error before building anything
        self.model: LlamaForCausalLM = build_model(
            self.model_config, weights, self.backend, config.max_model_len, self.dtype, self.device
        )
        del weights
        self.load_seconds = time.perf_counter() - start
        self.bytes_per_block = kv_cache_bytes_per_block(self.model_config, self.block_size, self.dtype)
        self.num_blocks = self._determine_num_blocks()
        self.kv_caches = self._allocate_kv_cache(self.num_blocks)
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._graph_vars: dict[str, torch.Tensor] = {}
        if self._use_cuda_graphs():
            self._capture_cuda_graphs()

    # ------------------------------------------------------------------ setup

    def _check_lengths(self) -> None:
        mc, max_len = self.model_config, self.config.max_model_len
        if max_len > mc.max_position_embeddings:
            raise ValueError(
                f"max_model_len={max_len} exceeds the model's max_position_embeddings={mc.max_position_embeddings}"
            )
        if mc.sliding_window is not None and max_len > mc.sliding_window:
            raise ValueError(
                f"the model uses sliding-window attention ({mc.sliding_window} tokens), which this engine does not "
                f"implement; set max_model_len <= {mc.sliding_window}"
            )

    def _too_small(self, what: str, budget: int) -> KVCacheTooSmallError:
        need = self.config.max_blocks_per_seq
        return KVCacheTooSmallError(
            f"{what}: {budget} bytes hold {max(budget, 0) // self.bytes_per_block} KV blocks, but one "
            f"max_model_len={self.config.max_model_len} sequence needs {need} blocks of {self.bytes_per_block} "
            f"bytes ({need * self.bytes_per_block} bytes, block_size={self.block_size}); give the cache at least "
            f"that much or lower max_model_len"
        )

    def _determine_num_blocks(self) -> int:
        if self.config.num_gpu_blocks_override is not None:
            if self.config.num_gpu_blocks_override < 1:
                raise ValueError("num_gpu_blocks_override must be at least 1")
            return self.config.num_gpu_blocks_override
        if self.device.type == "cuda":
            budget = self._profile_cuda_budget()
            what = f"gpu_memory_utilization={self.config.gpu_memory_utilization} leaves too little"
        else:
            budget = self.config.kv_cache_memory or DEFAULT_CPU_KV_CACHE_BYTES
            available = _available_host_memory()
            if available is not None and budget > available:
                raise KVCacheTooSmallError(
                    f"kv_cache_memory={budget} bytes exceeds the {available} bytes of memory available after "
                    f"loading the model; at {self.bytes_per_block} bytes per block, one max_model_len sequence "
                    f"needs {self.config.max_blocks_per_seq * self.bytes_per_block} bytes"
                )
            what = f"kv_cache_memory={budget} is too small"
        num_blocks = budget // self.bytes_per_block
        if num_blocks < self.config.max_blocks_per_seq:
            raise self._too_small(what, budget)
        return int(num_blocks)

    def _allocate_kv_cache(self, num_blocks: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        mc = self.model_config
        shape = (num_blocks, self.block_size, mc.num_key_value_heads, mc.head_dim)
        # Zeroed: a masked-out slot must hold a finite value, since 0 * NaN would leak into the output.
        caches = []
        for attn in self.model.kv_cache_layers():
            k = torch.zeros(shape, dtype=self.dtype, device=self.device)
            v = torch.zeros(shape, dtype=self.dtype, device=self.device)
            attn.k_cache, attn.v_cache = k, v
            caches.append((k, v))
        return caches

    @torch.inference_mode()
    def _profile_cuda_budget(self) -> int:
        """Bytes left for the KV cache after a worst-case step, from ``gpu_memory_utilization``."""
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(self.device)
        num_tokens = min(self.config.max_num_batched_tokens, self.config.max_num_seqs * self.config.max_model_len)
        seq_len = min(self.config.max_model_len, num_tokens)
        lens = [seq_len] * (num_tokens // seq_len) + ([num_tokens % seq_len] if num_tokens % seq_len else [])
        scratch_blocks = sum(-(-n // self.block_size) for n in lens)
        self._allocate_kv_cache(scratch_blocks)
        self._run_dummy_prefill(lens)
        torch.cuda.synchronize(self.device)
        peak = torch.cuda.max_memory_allocated(self.device)
        for attn in self.model.kv_cache_layers():
            attn.k_cache = attn.v_cache = torch.empty(0, device=self.device)
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(self.device)
        used = total - free  # weights, CUDA context, other processes
        # The activations' peak recurs every step: keep room for it beside the cache.
        activations = peak - torch.cuda.memory_allocated(self.device) - scratch_blocks * self.bytes_per_block
        return int(total * self.config.gpu_memory_utilization - used - max(activations, 0))

    def _run_dummy_prefill(self, lens: list[int]) -> None:
        block = 0
        tables, ids, pos, slots = [], [], [], []
        for n in lens:
            nb = -(-n // self.block_size)
            tables.append(list(range(block, block + nb)))
            ids.extend([0] * n)
            pos.extend(range(n))
            slots.extend(range(block * self.block_size, block * self.block_size + n))
            block += nb
        width = max(len(t) for t in tables)
        qsl = [0]
        for n in lens:
            qsl.append(qsl[-1] + n)
        meta = AttentionMetadata(
            slot_mapping=self._tensor(slots, torch.int64),
            block_tables=self._tensor([t + [0] * (width - len(t)) for t in tables], torch.int32),
            context_lens=self._tensor(lens, torch.int32),
            query_start_loc=self._tensor(qsl, torch.int32),
            max_query_len=max(lens),
            max_context_len=max(lens),
        )
        self.backend.prepare(meta, self.block_size)
        hidden = self.model(self._tensor(ids, torch.int64), self._tensor(pos, torch.int64), meta)
        rows = min(self.config.max_num_seqs, hidden.shape[0])
        self.model.compute_logits(hidden[:rows]).float()

    # ------------------------------------------------------------------ per step

    @staticmethod
    def sampling_sequences(scheduler_output: Any) -> list[Sequence]:
        """The scheduled sequences that sample a token this step (they reach the end of their tokens), in
        scheduler order: row ``i`` of :meth:`execute`'s logits belongs to the ``i``-th of them."""
        return [s.seq for s in scheduler_output.scheduled if _samples(s.seq, s.num_new_tokens)]

    def _tensor(self, data: list, dtype: torch.dtype) -> torch.Tensor:
        t = torch.tensor(data, dtype=dtype)
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def prepare_inputs(self, scheduled: list[Any]) -> StepInputs:
        """The step's flat tensors from the scheduled ``(seq, num_new_tokens)`` items."""
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        query_start = [0]
        context_lens: list[int] = []
        tables: list[list[int]] = []
        logits_indices: list[int] = []
        for item in scheduled:
            seq, n = item.seq, item.num_new_tokens
            start, end = seq.num_computed_tokens, seq.num_computed_tokens + n
            table = seq.block_table
            input_ids.extend(seq.token_ids[start:end])
            positions.extend(range(start, end))
            for b in range(start // bs, (end - 1) // bs + 1):
                base = table[b] * bs - b * bs  # slot of position p in block b is base + p
                slots.extend(range(base + max(start, b * bs), base + min(end, (b + 1) * bs)))
            query_start.append(query_start[-1] + n)
            context_lens.append(end)
            tables.append(table)
            if end == len(seq.token_ids):
                logits_indices.append(query_start[-1] - 1)
        width = -(-max(context_lens) // bs)
        padded = [t[:width] + [0] * (width - min(len(t), width)) for t in tables]
        meta = AttentionMetadata(
            slot_mapping=self._tensor(slots, torch.int64),
            block_tables=self._tensor(padded, torch.int32),
            context_lens=self._tensor(context_lens, torch.int32),
            query_start_loc=self._tensor(query_start, torch.int32),
            max_query_len=max(query_start[i + 1] - query_start[i] for i in range(len(scheduled))),
            max_context_len=max(context_lens),
        )
        return StepInputs(
            input_ids=self._tensor(input_ids, torch.int64),
            positions=self._tensor(positions, torch.int64),
            meta=meta,
            logits_indices=self._tensor(logits_indices, torch.int64),
        )

    @torch.inference_mode()
    def execute(self, scheduler_output: Any) -> torch.Tensor:
        """Run one step; logits ``[N, vocab]`` (float32) of the sequences :meth:`sampling_sequences` lists."""
        scheduled = scheduler_output.scheduled
        if not scheduled:
            return torch.empty(0, self.model_config.vocab_size, device=self.device)
        inputs = self.prepare_inputs(scheduled)
        if inputs.logits_indices.numel() == 0:
            # Middle-of-prompt chunks only: the K/V writes are all this step needs.
            self._forward(inputs)
            return torch.empty(0, self.model_config.vocab_size, device=self.device)
        hidden = self._forward(inputs)
        return self.model.compute_logits(hidden, inputs.logits_indices).float()

    def _forward(self, inputs: StepInputs) -> torch.Tensor:
        num_seqs = inputs.meta.num_seqs
        if self._graphs and inputs.meta.decode_only and num_seqs <= self._max_graph_batch:
            return self._replay(inputs)
        self.backend.prepare(inputs.meta, self.block_size)
        return self.model(inputs.input_ids, inputs.positions, inputs.meta)

    # ------------------------------------------------------------------ CUDA graphs

    def _use_cuda_graphs(self) -> bool:
        return self.device.type == "cuda" and not self.config.enforce_eager and self.backend.supports_cuda_graphs

    @property
    def _max_graph_batch(self) -> int:
        return max(self._graphs) if self._graphs else 0

    @torch.inference_mode()
    def _capture_cuda_graphs(self) -> None:
        sizes = cuda_graph_batch_sizes(self.config.max_num_seqs)
        max_bs = sizes[-1]
        dev = self.device
        v = {
            "input_ids": torch.zeros(max_bs, dtype=torch.int64, device=dev),
            "positions": torch.zeros(max_bs, dtype=torch.int64, device=dev),
            "slot_mapping": torch.full((max_bs,), -1, dtype=torch.int64, device=dev),
            "context_lens": torch.zeros(max_bs, dtype=torch.int32, device=dev),
            "block_tables": torch.zeros(max_bs, self.config.max_blocks_per_seq, dtype=torch.int32, device=dev),
            "query_start_loc": torch.arange(max_bs + 1, dtype=torch.int32, device=dev),
            "hidden": torch.zeros(max_bs, self.model_config.hidden_size, dtype=self.dtype, device=dev),
        }
        self._graph_vars = v
        pool = None
        for bs in reversed(sizes):  # largest first, so smaller graphs fit in its memory pool
            meta = self._graph_meta(bs)
            self.backend.prepare(meta, self.block_size)
            v["hidden"][:bs] = self.model(v["input_ids"][:bs], v["positions"][:bs], meta)  # warm-up
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool):
                v["hidden"][:bs] = self.model(v["input_ids"][:bs], v["positions"][:bs], meta)
            if pool is None:
                pool = graph.pool()
            self._graphs[bs] = graph
            torch.cuda.synchronize(dev)
        logger.info("captured CUDA graphs for decode batch sizes %s", sizes)

    def _graph_meta(self, bs: int) -> AttentionMetadata:
        v = self._graph_vars
        return AttentionMetadata(
            slot_mapping=v["slot_mapping"][:bs],
            block_tables=v["block_tables"][:bs],
            context_lens=v["context_lens"][:bs],
            query_start_loc=v["query_start_loc"][: bs + 1],
            max_query_len=1,
            max_context_len=self.config.max_model_len,
        )

    def _replay(self, inputs: StepInputs) -> torch.Tensor:
        num_seqs = inputs.meta.num_seqs
        graph_bs = min(b for b in self._graphs if b >= num_seqs)
        v = self._graph_vars
        width = inputs.meta.block_tables.shape[1]
        v["input_ids"][:num_seqs] = inputs.input_ids
        v["positions"][:num_seqs] = inputs.positions
        v["positions"][num_seqs:graph_bs] = 0
        v["slot_mapping"][:num_seqs] = inputs.meta.slot_mapping
        v["slot_mapping"][num_seqs:graph_bs] = -1  # padding rows write nothing...
        v["context_lens"][:num_seqs] = inputs.meta.context_lens
        v["context_lens"][num_seqs:graph_bs] = 0  # ...and read nothing
        v["block_tables"][:num_seqs, :width] = inputs.meta.block_tables
        self._graphs[graph_bs].replay()
        return v["hidden"][:num_seqs]


def _available_host_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
