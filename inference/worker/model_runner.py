"""Runs the model for one scheduler step: loads the weights, sizes and owns the KV cache, builds the step's
inputs and, on CUDA, replays decode-only steps from graphs.

Interface (see docs/engine-design.md, "Model runner")::

    runner = ModelRunner(config)                     # loads weights, sizes and allocates the KV cache
    runner.num_blocks                                # KV blocks to give the block pool
    seqs = ModelRunner.sampling_sequences(output)    # which scheduled sequences sample, in order
    logits = runner.execute(output)                  # [len(seqs), vocab] float32
    runner.close()                                   # stops tensor-parallel workers (none: nothing to do)

``execute`` first copies the blocks of ``output.blocks_to_copy`` (copies on write of forked candidates).
Both calls read ``seq.num_computed_tokens``, so they must come before ``scheduler.update``.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from inference.core.config import EngineConfig
from inference.core.utils import cdiv
from inference.worker import kv_cache, quantization
from inference.worker.attention import AttentionBackend, cpu_kernels, get_attention_backend
from inference.worker.cuda_graphs import CudaGraphs
from inference.worker.loader import load_model_config, load_weights, resolve_model
from inference.worker.models import get_model_class
from inference.worker.models.llama import LlamaForCausalLM, build_model
from inference.worker.parallel import (
    TensorParallel,
    WorkerGroup,
    check_shapes,
    rank_device,
    serve_rank,
    shard_weights,
)
from inference.worker.step_inputs import StepInputs, build_step_inputs, dummy_prefill_inputs

if TYPE_CHECKING:
    from inference.core.scheduler import ScheduledSeq, SchedulerOutput
    from inference.core.sequence import Sequence

logger = logging.getLogger(__name__)

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
}  # fmt: skip


def resolve_dtype(name: str | torch.dtype, device: torch.device, quantized: bool = False) -> torch.dtype:
    """"auto": bf16 on CUDA (fp16 where bf16 is missing) and on CPUs with bf16 instructions (AVX512-BF16,
    AMX), where it is the faster mode; fp32 on other CPUs (faster there, and the exact-parity mode), unless the
    weights are to be quantized (``quantized``): the quantized kernels take bf16 activations on any CPU that runs
    them (AVX2 included), and int8/int4 weights are the point of asking for them."""
    if isinstance(name, torch.dtype):
        return name
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if device.type == "cpu" and quantized:
            return torch.bfloat16
        return torch.bfloat16 if device.type == "cpu" and cpu_kernels.cpu_has_bf16_instructions() else torch.float32
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; choose auto, float32, float16 or bfloat16") from None


def _cpu_tensor(data: list, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(data, dtype=dtype)


class ModelRunner:
    """``tp``: this process's rank in a tensor-parallel group (worker processes pass theirs); left None with
    ``tensor_parallel_size > 1`` the runner is rank 0: it starts the other ranks and drives them each step."""

    def __init__(
        self,
        config: EngineConfig,
        model_source: str | os.PathLike[str] | None = None,
        *,
        tp: TensorParallel | None = None,
    ) -> None:
        self.config = config
        self.block_size = config.block_size
        start = time.perf_counter()
        self.model_path: Path = resolve_model(model_source if model_source is not None else config.model)
        self.workers: WorkerGroup | None = None
        if tp is None and config.tensor_parallel_size > 1:
            check_shapes(load_model_config(self.model_path), config.tensor_parallel_size)  # before any process starts
            self.workers = WorkerGroup(config, str(self.model_path), rank_device(config.device, 0), run_worker)
            tp = self.workers.tp
        self.tp = tp or TensorParallel()
        try:
            self._load(config, start)
        except BaseException as exc:
            if self.workers is not None:
                failure = self.workers.wrap(exc) if isinstance(exc, RuntimeError) else None
                self.workers.close()
                if failure is not None:
                    raise failure from exc
            raise

    def _load(self, config: EngineConfig, start: float) -> None:
        tp = self.tp
        self.device = rank_device(config.device, tp.rank)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        one_cpu = self.device.type == "cpu" and tp.size == 1  # where quantized weights can run
        scheme = quantization.resolve_scheme(config.quantization) if one_cpu else config.quantization
        self.dtype = resolve_dtype(config.dtype, self.device, quantized=one_cpu and scheme != "none")
        if tp.size == 1:
            self.model_config, weights = load_weights(self.model_path, self.dtype, self.device)
        else:  # sliced on the host: a device only ever holds its rank's share
            self.model_config, weights = load_weights(self.model_path, self.dtype, "cpu")
            check_shapes(self.model_config, tp.size)
            weights = shard_weights(weights, self.model_config, tp.rank, tp.size)
            weights = {name: t.to(self.device) for name, t in weights.items()}
        self._check_lengths()
        self.backend: AttentionBackend = get_attention_backend(config.attention_backend, self.device)
        get_model_class(self.model_config.architecture)  # clear error before building anything
        self.model: LlamaForCausalLM = build_model(
            self.model_config, weights, self.backend, config.max_model_len, self.dtype, self.device, tp
        )
        del weights
        self.quantization = self._quantize(scheme)
        self.packed_linears = config.cpu_packed_linears and self.model.pack_for_cpu(
            config.max_num_seqs, panels=config.cpu_small_linears, all_rows=config.batch_invariant
        )
        if not config.batch_invariant and hasattr(self.backend, "cascade"):
            self.backend.cascade = True
        self.small_linears = self.packed_linears and self.model.lm_head_panels is not None
        self.fused_cpu_ops = config.cpu_fused_ops and self.model.use_fused_cpu_ops()
        self.projections = self._projections_kernel()
        if self.device.type == "cpu":
            logger.info("CPU projections: %s (%s)", self.projections, self.dtype)
        self.load_seconds = time.perf_counter() - start
        self.bytes_per_block = kv_cache.kv_cache_bytes_per_block(
            self.model_config, self.block_size, self.dtype, self.model.layers[0].self_attn.num_kv_heads
        )
        # Every rank must hold the same blocks (one scheduler): the smallest count wins.
        self.num_blocks = tp.all_min(self._determine_num_blocks(), self.device)
        self.kv_caches = kv_cache.allocate_kv_cache(
            self.model, self.num_blocks, self.block_size, self.dtype, self.device
        )
        self.cuda_graphs: CudaGraphs | None = None
        # Not with tensor parallelism: the ranks' graphs would have to replay their collectives in lockstep.
        eager = config.enforce_eager or tp.size > 1
        if self.device.type == "cuda" and not eager and self.backend.supports_cuda_graphs:
            self.cuda_graphs = CudaGraphs(self.model, self.backend, config, self.dtype, self.device)
            self.cuda_graphs.capture()

    # ------------------------------------------------------------------ setup

    def _quantize(self, requested: str) -> str:
        """The weights' scheme after load: ``requested`` where the quantized kernels run (CPU, bf16, one rank),
        else "none", logged."""
        scheme = quantization.resolve_scheme(requested)
        if scheme == "none":
            return scheme
        if not self.model.quantize_for_cpu(scheme):
            logger.warning("quantization=%s needs bf16 weights on one CPU rank (here %s on %s, %d ranks): not applied",
                           scheme, self.dtype, self.device, self.tp.size)
            return "none"
        return self.model.quantization

    def _projections_kernel(self) -> str:
        """What runs the projections: "panels-fp32", "panels-amx" or "panels-avx512_bf16" (the C++ panel kernel;
        its bf16 path chosen once from the CPU's flags, ``ENGINE_SMALL_LINEAR`` forcing one), "panels-w8a8" (the int8
        mode) or "panels-int4" (the quantized weights), "onednn", "torch"."""
        if self.quantization != "none":
            return f"panels-{self.quantization}"
        if self.small_linears and self.dtype in (torch.float32, torch.bfloat16):
            return "panels-fp32" if self.dtype == torch.float32 else f"panels-{cpu_kernels.bf16_path()}"
        return "onednn" if self.packed_linears else "torch"

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

    def _determine_num_blocks(self) -> int:
        config, per_block = self.config, self.bytes_per_block
        if config.num_gpu_blocks_override is not None:
            return kv_cache.num_blocks_for(config, per_block, 0, "num_gpu_blocks_override")
        if self.device.type == "cuda":
            what = f"gpu_memory_utilization={config.gpu_memory_utilization} leaves too little"
            return kv_cache.num_blocks_for(config, per_block, self._profile_cuda_budget(), what)
        budget = kv_cache.cpu_budget(config, per_block)
        return kv_cache.num_blocks_for(config, per_block, budget, f"kv_cache_memory={budget} is too small")

    @torch.inference_mode()
    def _profile_cuda_budget(self) -> int:
        """Bytes left for the KV cache after a worst-case step, from ``gpu_memory_utilization``."""
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(self.device)
        num_tokens = min(self.config.max_num_batched_tokens, self.config.max_num_seqs * self.config.max_model_len)
        seq_len = min(self.config.max_model_len, num_tokens)
        lens = [seq_len] * (num_tokens // seq_len) + ([num_tokens % seq_len] if num_tokens % seq_len else [])
        scratch_blocks = sum(cdiv(n, self.block_size) for n in lens)
        kv_cache.allocate_kv_cache(self.model, scratch_blocks, self.block_size, self.dtype, self.device)
        inputs = dummy_prefill_inputs(lens, self.block_size, self._tensor)
        self.backend.prepare(inputs.meta, self.block_size)
        hidden = self.model(inputs.input_ids, inputs.positions, inputs.meta)
        self.model.compute_logits(hidden[: min(self.config.max_num_seqs, hidden.shape[0])])
        torch.cuda.synchronize(self.device)
        peak = torch.cuda.max_memory_allocated(self.device)
        kv_cache.release_kv_cache(self.model, self.device)
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(self.device)
        used = total - free  # weights, CUDA context, other processes
        # The activations' peak recurs every step: keep room for it beside the cache.
        activations = peak - torch.cuda.memory_allocated(self.device) - scratch_blocks * self.bytes_per_block
        return int(total * self.config.gpu_memory_utilization - used - max(activations, 0))

    # ------------------------------------------------------------------ per step

    @staticmethod
    def sampling_sequences(scheduler_output: SchedulerOutput) -> list[Sequence]:
        """The scheduled sequences that sample a token this step, in scheduler order: row ``i`` of
        :meth:`execute`'s logits belongs to the ``i``-th of them."""
        return [item.seq for item in scheduler_output.scheduled if item.samples]

    def _tensor(self, data: list, dtype: torch.dtype) -> torch.Tensor:
        t = torch.tensor(data, dtype=dtype)
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def prepare_inputs(self, scheduled: list[ScheduledSeq]) -> StepInputs:
        return build_step_inputs(scheduled, self.block_size, self._tensor)

    @torch.inference_mode()
    def execute(self, scheduler_output: SchedulerOutput) -> torch.Tensor:
        """Run one step; logits ``[N, vocab]`` (float32) of the sequences :meth:`sampling_sequences` lists."""
        if self.workers is not None:
            return self._execute_parallel(scheduler_output)
        scheduled = scheduler_output.scheduled
        if scheduler_output.blocks_to_copy:  # copies on write: before this step's K/V writes land in them
            kv_cache.copy_blocks(self.kv_caches, scheduler_output.blocks_to_copy, self.device)
        empty = torch.empty(0, self.model_config.vocab_size, device=self.device)
        if not scheduled:
            return empty
        inputs = self.prepare_inputs(scheduled)
        hidden = self._forward(inputs)
        if inputs.logits_indices.numel() == 0:
            return empty  # mid-prompt chunks (or prefill-only requests): the K/V writes are all this step needs
        return self.model.compute_logits(hidden, inputs.logits_indices).float()

    def _execute_parallel(self, scheduler_output: SchedulerOutput) -> torch.Tensor:
        """Rank 0 of a tensor-parallel group: the step's inputs to every worker, then this rank's share."""
        assert self.workers is not None
        scheduled = scheduler_output.scheduled
        inputs = build_step_inputs(scheduled, self.block_size, _cpu_tensor) if scheduled else None
        step = (scheduler_output.blocks_to_copy, inputs)
        self.workers.send("step", step)
        try:
            logits = self.run_step(*step)
        except RuntimeError as exc:  # a collective failed: a peer died or timed out
            raise self.workers.wrap(exc) from exc
        if logits is None:
            return torch.empty(0, self.model_config.vocab_size, device=self.device)
        return logits

    @torch.inference_mode()
    def run_step(self, blocks_to_copy: list[tuple[int, int]], inputs: StepInputs | None) -> torch.Tensor | None:
        """One step on this rank from CPU inputs (every rank runs the same): the float32 logits on rank 0, when
        the step samples; None otherwise."""
        if blocks_to_copy:
            kv_cache.copy_blocks(self.kv_caches, blocks_to_copy, self.device)
        if inputs is None:
            return None
        if self.device.type != "cpu":
            inputs = inputs.to(self.device)
        hidden = self._forward(inputs)
        if inputs.logits_indices.numel() == 0:
            return None
        logits = self.model.compute_logits(hidden, inputs.logits_indices)
        return logits.float() if logits is not None else None

    def close(self) -> None:
        """Stop the tensor-parallel workers (rank 0); nothing to do otherwise. The runner is unusable after."""
        if self.workers is not None:
            self.workers.close()

    def _forward(self, inputs: StepInputs) -> torch.Tensor:
        if self.cuda_graphs is not None and self.cuda_graphs.can_replay(inputs):
            return self.cuda_graphs.replay(inputs)
        self.backend.prepare(inputs.meta, self.block_size)
        return self.model(inputs.input_ids, inputs.positions, inputs.meta)


def run_worker(rank: int, size: int, init_method: str, config: EngineConfig, model_path: str, conn: Any) -> None:
    """A tensor-parallel worker process (rank >= 1): its runner serves the steps rank 0 sends."""
    serve_rank(rank, size, init_method, rank_device(config.device, rank), conn,
               lambda tp: ModelRunner(config, model_path, tp=tp))  # fmt: skip
