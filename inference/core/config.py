"""Engine configuration: the one set of engine defaults. Names follow vLLM's engine arguments where one exists.

Callers (the web settings, the benchmark) pass only what they override; everything else comes from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from inference.core.utils import cdiv


@dataclass
class EngineConfig:
    model: str | None = None  # None: the bundled SmolLM2-135M-Instruct GGUF
    device: str = "cpu"
    dtype: str = "auto"  # auto: bfloat16 on CUDA and on CPUs with bf16 instructions, else float32
    attention_backend: Literal["auto", "torch", "cpu", "triton"] = "auto"
    block_size: int = 16
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 512
    # Cap on one prefill chunk while other requests wait, so a long prompt can't hold back first tokens.
    # None: max_num_batched_tokens // 4.
    long_prefill_token_threshold: int | None = None
    # A step that decodes a request of a priority below this one (a smaller value: the chat's plans, -1, each
    # of whose few tokens a shopper's first words wait on) runs no prefill of a lower priority beside it: the
    # decode step stays a decode's cost instead of a 512-token prefill's. Above it, priorities share steps.
    exclusive_decode_below: int = 0
    max_model_len: int = 2048
    enable_prefix_caching: bool = True
    kv_cache_memory: int = 512 * 2**20  # bytes of KV cache on CPU (CUDA sizes it from gpu_memory_utilization)
    gpu_memory_utilization: float = 0.9
    num_gpu_blocks_override: int | None = None  # exact block count (tests, bench)
    kv_allocator: Literal["paged", "contiguous"] = "paged"
    # CPU: run the projections on oneDNN with weights packed once at load (faster than F.linear's MKL here).
    cpu_packed_linears: bool = True
    # CPU, with cpu_packed_linears: steps of up to 16 rows run the projections on the C++ panel kernel (the
    # weights streamed at full memory bandwidth; fp32, and bf16 with AVX512-BF16); a second copy of the weights.
    cpu_small_linears: bool = True
    # CPU: the layer's elementwise steps (RMSNorm + residual, RoPE, SiLU * up) as fused C++ ops (cpu_kernels).
    cpu_fused_ops: bool = True
    # CPU: every token's result independent of the prefix cache, the chunking and the batch (vLLM's batch
    # invariance): the projections run on the panel kernel for any row count (needs cpu_small_linears; bf16
    # needs AVX512-BF16) and attention has no cascade. False: oneDNN for steps of more than 16 rows and the
    # decode cascade over a shared prefix (batch dependent; the cascade saved ~10% of a busy step's attention).
    batch_invariant: bool = True
    # CPU, bf16 weights: keep the projections' weights as int8 or int4 panels (worker/quantization.py), read
    # and turned back into bf16 in registers by the C++ kernels (AVX512-BF16); "auto": the scheme whose loss was
    # measured small (int8). Where the kernels cannot run the weights stay as they are (logged).
    quantization: Literal["none", "int8", "int4", "auto"] = "none"
    enforce_eager: bool = False  # True: no CUDA graphs
    # Structured output: the tokens a grammar forces (JSON keys, punctuation, a const) are appended without a
    # model step and prefilled with the next one (jump-forward decoding, as SGLang's); not for requests that
    # ask for logprobs (a forced token has none).
    structured_jump_forward: bool = True
    # Ranks the model is split over (vLLM's tensor parallelism: Megatron-style column/row-parallel layers,
    # vocabulary-parallel embedding and LM head; worker/parallel.py). Ranks 1.. are worker processes on this
    # machine; on CUDA rank r uses GPU r (NCCL), on CPU all ranks share the CPU (gloo).
    tensor_parallel_size: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError("block_size must be positive")
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be positive")
        if self.max_num_batched_tokens < 1:
            raise ValueError("max_num_batched_tokens must be positive")
        if self.tensor_parallel_size < 1:
            raise ValueError("tensor_parallel_size must be positive")
        if self.quantization not in ("none", "int8", "int4", "auto"):
            raise ValueError(f"quantization must be none, int8, int4 or auto, got {self.quantization!r}")
        if self.kv_allocator not in ("paged", "contiguous"):
            raise ValueError(f"kv_allocator must be 'paged' or 'contiguous', got {self.kv_allocator!r}")

    @property
    def max_blocks_per_seq(self) -> int:
        return cdiv(self.max_model_len, self.block_size)
