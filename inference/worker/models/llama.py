"""Llama-family decoder (Llama, Mistral, Qwen2) over a flat batch of tokens on the paged KV cache.

One forward runs a whole engine step: prefill chunks and decodes of many sequences, unpadded, as ``[T]``
token ids and positions. Projections are fused at load time (q/k/v into ``qkv_proj``, gate/up into
``gate_up_proj``) so each layer runs four matmuls. RoPE cos/sin are looked up once per step and shared by
every layer; the vocabulary projection runs only on the rows that sample.
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

from inference.worker import quantization
from inference.worker.attention import AttentionBackend, AttentionMetadata, cpu_kernels
from inference.worker.loader import ModelConfig
from inference.worker.parallel import TensorParallel, local_kv_heads, vocab_shard


def onednn_linear_available(dtype: torch.dtype) -> bool:
    """oneDNN can run this dtype's matmuls on packed weights (CPU builds of torch with MKL-DNN; bf16 only where
    oneDNN has bf16 kernels for the CPU: AVX512-BW/VL/DQ or AVX-NE-CONVERT, else its reorder refuses and bf16
    runs on plain ``F.linear``)."""
    if not torch.backends.mkldnn.is_available() or dtype not in (torch.float32, torch.bfloat16):
        return False
    return dtype == torch.float32 or bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def pack_weight(weight: torch.Tensor, batch_hint: int) -> torch.Tensor:
    """``weight`` ([out, in]) reordered once into oneDNN's blocked layout for ``batch_hint``-row inputs.

    At the decode shapes (tens of rows, hundreds of columns) oneDNN on packed weights ran 1.2-2.6x faster
    than ``F.linear`` (MKL) in fp32 on a 2-core AMD EPYC, most for the vocabulary projection (docs/benchmark.md).
    """
    return torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")


def small_rows() -> int:
    """Most rows that :func:`cpu_kernels.small_linear` takes (0 where the kernels are not built)."""
    return cpu_kernels.small_linear_shape()[1] if cpu_kernels.load() else 0


class Linear(nn.Linear):
    """``nn.Linear`` that runs on a oneDNN-packed copy of its weight once :meth:`pack` is called (CPU), and,
    with ``panels``, batches of up to ``small_rows`` rows on the panel kernel (``cpu_kernels.small_linear``);
    with ``all_rows`` too, every batch on the panel kernel (batch invariant: a row's result is the same whatever
    the rows beside it, which oneDNN does not promise), and no oneDNN copy."""

    packed: torch.Tensor | None = None
    panels: torch.Tensor | None = None
    small_rows: int = 0
    quantized: quantization.QuantizedWeight | None = None

    def quantize(self, scheme: str) -> bool:
        """Replace the weight by its ``scheme`` panels (every row count then runs on them: batch invariant);
        False, changing nothing, where the shape does not fit the panels."""
        if not quantization.can_quantize(self.weight, scheme):
            return False
        self.quantized = quantization.quantize(self.weight, scheme)
        self.weight = nn.Parameter(self.weight.new_empty(0), requires_grad=False)
        return True

    def pack(self, batch_hint: int, panels: bool = False, all_rows: bool = False) -> None:
        if panels:  # (the kernel adds a bias to the fp32 sums before rounding, as oneDNN does)
            self.panels = cpu_kernels.pack_panels(self.weight)
            self.small_rows = small_rows() if self.panels is not None else 0
        if self.panels is not None and all_rows:
            self.small_rows = sys.maxsize
        else:
            self.packed = pack_weight(self.weight, batch_hint)
        # The packed copy (or the panels) replaces the weight (panels beside a packed copy are one extra copy).
        self.weight = nn.Parameter(self.weight.new_empty(0), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quantized is not None:
            return quantization.linear(x, self.quantized, self.bias)
        if self.panels is not None and x.shape[0] <= self.small_rows:
            return cpu_kernels.small_linear(x, self.panels, self.bias)
        if self.packed is not None:
            return packed_linear(x, self.packed, self.bias)
        return F.linear(x, self.weight, self.bias)


class RMSNorm(nn.Module):
    # True: the C++ CPU op (cpu_kernels.rms_norm), one pass instead of up to nine torch ops.
    fused: bool = False

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Normalise ``x``; with ``residual``, add it first and also return the sum (the next residual)."""
        if self.fused:
            out = cpu_kernels.rms_norm(x, self.weight, self.eps, residual)  # residual += x, in place
            return out if residual is None else (out, residual)
        if residual is not None:
            x = x + residual
            residual = x
        if x.dtype == torch.float32:
            out = F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        else:
            # As transformers does: normalise in fp32, scale in the model dtype.
            xf = x.float()
            xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            out = self.weight * xf.to(x.dtype)
        return out if residual is None else (out, residual)


def rope_inv_freq(head_dim: int, theta: float, scaling: dict | None) -> torch.Tensor:
    """Inverse frequencies of RoPE, with "linear" or "llama3" scaling applied (as transformers computes them)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if scaling is None:
        return inv_freq
    kind = scaling["rope_type"]
    factor = float(scaling["factor"])
    if kind == "linear":
        return inv_freq / factor
    if kind == "llama3":
        low = float(scaling["low_freq_factor"])
        high = float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f"unsupported RoPE scaling type {kind!r}")


class RotaryEmbedding(nn.Module):
    """cos/sin table for positions ``0..max_positions-1``, looked up per step (neox / rotate-half layout)."""

    def __init__(self, head_dim: int, max_positions: int, theta: float, scaling: dict | None) -> None:
        super().__init__()
        self.head_dim, self.max_positions, self.theta, self.scaling = head_dim, max_positions, theta, scaling
        self.register_buffer("cos", torch.empty(max_positions, head_dim // 2), persistent=False)
        self.register_buffer("sin", torch.empty(max_positions, head_dim // 2), persistent=False)
        self.reset_tables()

    def reset_tables(self) -> None:
        """(Re)compute the tables in fp32 on the buffers' device (after a meta-device construction)."""
        device = self.cos.device
        if device.type == "meta":
            return
        inv_freq = rope_inv_freq(self.head_dim, self.theta, self.scaling).to(device)
        freqs = torch.outer(torch.arange(self.max_positions, dtype=torch.float32, device=device), inv_freq)
        self.cos = freqs.cos()
        self.sin = freqs.sin()

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of shape ``[T, 1, head_dim / 2]`` (broadcast over heads)."""
        return self.cos[positions].to(dtype).unsqueeze(1), self.sin[positions].to(dtype).unsqueeze(1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class VocabParallelEmbedding(nn.Embedding):
    """The embedding table, or with tensor parallelism this rank's slice of its rows (worker/parallel.py)."""

    def __init__(self, vocab_size: int, hidden_size: int, tp: TensorParallel) -> None:
        start, end, rows = vocab_shard(vocab_size, tp.rank, tp.size)
        super().__init__(rows, hidden_size)
        self.start, self.end, self.tp = start, end, tp

    # The tied vocabulary projection's int8 panels, when the weights are quantized: the rows are read from them
    # (one copy of the table, not a bf16 one beside it).
    quantized: quantization.QuantizedWeight | None = None

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.quantized is not None:
            return quantization.dequantize_rows(self.quantized, input_ids).to(self.weight.dtype)
        if self.tp.size == 1:
            return super().forward(input_ids)
        mine = (input_ids >= self.start) & (input_ids < self.end)
        # Others' tokens look up row 0 and are zeroed; the sum over ranks adds exact zeros to the one real row.
        out = F.embedding(torch.where(mine, input_ids - self.start, 0), self.weight)
        return self.tp.all_reduce(out * mine.unsqueeze(1).to(out.dtype))


class LlamaAttention(nn.Module):
    fused: bool = False  # True: RoPE by the C++ CPU op, in place

    def __init__(self, config: ModelConfig, backend: AttentionBackend, tp: TensorParallel | None = None) -> None:
        super().__init__()
        self.tp = tp = tp or TensorParallel()
        # Column-parallel q/k/v (this rank's heads; KV heads replicated when there are fewer than ranks),
        # row-parallel o_proj summed over the ranks.
        self.num_heads = config.num_attention_heads // tp.size
        self.num_kv_heads = local_kv_heads(config.num_key_value_heads, tp.size)
        self.head_dim = config.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim**-0.5
        self.qkv_proj = Linear(config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.qkv_bias)
        self.o_proj = Linear(self.q_size, config.hidden_size, bias=config.o_proj_bias)
        self.backend = backend
        # Set by the model runner (worker/kv_cache.allocate_kv_cache): this layer's slice of the paged cache.
        self.k_cache = torch.empty(0)
        self.v_cache = torch.empty(0)

    def forward(
        self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, meta: AttentionMetadata
    ) -> torch.Tensor:
        num_tokens = hidden.shape[0]
        qkv = self.qkv_proj(hidden)
        # q and k are adjacent in qkv: rotate them in one go.
        qk = qkv[:, : self.q_size + self.kv_size].view(num_tokens, self.num_heads + self.num_kv_heads, self.head_dim)
        if self.fused:
            cpu_kernels.rotary_embedding_(qk, cos[:, 0], sin[:, 0])
        else:
            qk = apply_rope(qk, cos, sin)
        q, k = qk.split([self.num_heads, self.num_kv_heads], dim=1)
        v = qkv[:, self.q_size + self.kv_size :].view(num_tokens, self.num_kv_heads, self.head_dim)
        out = self.backend.forward(q, k, v, self.k_cache, self.v_cache, meta, self.scale)
        return self.tp.all_reduce(self.o_proj(out.reshape(num_tokens, self.q_size)))


class LlamaMLP(nn.Module):
    fused: bool = False  # True: SiLU(gate) * up by the C++ CPU op

    def __init__(self, config: ModelConfig, tp: TensorParallel | None = None) -> None:
        super().__init__()
        self.tp = tp = tp or TensorParallel()
        # Column-parallel gate/up (this rank's slice of the intermediate size), row-parallel down.
        self.intermediate_size = config.intermediate_size // tp.size
        self.gate_up_proj = Linear(config.hidden_size, 2 * self.intermediate_size, bias=False)
        self.down_proj = Linear(self.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            return self.tp.all_reduce(self.down_proj(cpu_kernels.silu_and_mul(self.gate_up_proj(x))))
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)
        return self.tp.all_reduce(self.down_proj(F.silu(gate) * up))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, backend: AttentionBackend, tp: TensorParallel | None = None) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config, backend, tp)
        self.mlp = LlamaMLP(config, tp)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        hidden: torch.Tensor,
        residual: torch.Tensor | None,
        cos: torch.Tensor,
        sin: torch.Tensor,
        meta: AttentionMetadata,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            residual = hidden
            hidden = self.input_layernorm(hidden)
        else:
            hidden, residual = self.input_layernorm(hidden, residual)
        hidden = self.self_attn(hidden, cos, sin, meta)
        hidden, residual = self.post_attention_layernorm(hidden, residual)
        return self.mlp(hidden), residual


class LlamaForCausalLM(nn.Module):
    def __init__(
        self, config: ModelConfig, backend: AttentionBackend, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        super().__init__()
        self.config = config  # the whole model's shapes; each layer keeps its rank's share
        self.tp = tp = tp or TensorParallel()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size, tp)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, backend, tp) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary = RotaryEmbedding(config.head_dim, max_positions, config.rope_theta, config.rope_scaling)
        untied = not config.tie_word_embeddings
        vocab_rows = self.embed_tokens.num_embeddings  # this rank's slice of the vocabulary
        self.lm_head = nn.Linear(config.hidden_size, vocab_rows, bias=False) if untied else None
        self.lm_head_packed: torch.Tensor | None = None
        self.lm_head_panels: torch.Tensor | None = None
        self.lm_head_quantized: quantization.QuantizedWeight | None = None
        self.small_rows = 0
        self.quantization = "none"

    def forward(
        self,
        input_ids: torch.Tensor,  # [T]
        positions: torch.Tensor,  # [T]
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        """The last layer's output with its residual added, before the final norm: ``[T, hidden]``.

        The final norm and the vocabulary projection are left to :meth:`compute_logits`, which runs on the
        sampling rows only (and outside CUDA graphs).
        """
        hidden = self.embed_tokens(input_ids)
        cos, sin = self.rotary(positions, hidden.dtype)
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual, cos, sin, meta)
        return hidden + residual

    def compute_logits(self, hidden: torch.Tensor, indices: torch.Tensor | None = None) -> torch.Tensor | None:
        """Logits ``[N, vocab]`` of the rows ``indices`` of :meth:`forward`'s output (all rows if None).

        With tensor parallelism each rank computes its vocabulary columns and rank 0 gets them all; the other
        ranks get None."""
        if indices is not None:
            hidden = hidden.index_select(0, indices)
        hidden = self.norm(hidden)
        if self.lm_head_quantized is not None:
            logits = quantization.linear(hidden, self.lm_head_quantized)
        elif self.lm_head_panels is not None and hidden.shape[0] <= self.small_rows:
            logits = cpu_kernels.small_linear(hidden, self.lm_head_panels)
        elif self.lm_head_packed is not None:
            logits = packed_linear(hidden, self.lm_head_packed, None)
        else:
            weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
            logits = F.linear(hidden, weight)
        return self.tp.gather_columns(logits, self.config.vocab_size)

    def pack_for_cpu(self, batch_hint: int, panels: bool = False, all_rows: bool = False) -> bool:
        """Run every projection on oneDNN-packed weights (CPU); False, changing nothing, where it can't.

        ``panels`` (with the C++ kernels built; fp32, or bf16 on CPUs with AVX512-BF16): also keep each weight
        as panels for steps of up to ``small_rows()`` rows, whose projections only stream the weights (a
        decode step of a few sequences): the panel kernel reads them at about 40 GB/s where oneDNN read 29 in
        fp32 on a 2-core EPYC. That second copy doubles the weights' memory. ``all_rows``: every step's
        projections on the panels, whatever its rows (batch invariant, ``EngineConfig.batch_invariant``); no
        oneDNN copy then, where the panels exist.
        """
        dtype = self.embed_tokens.weight.dtype
        if self.embed_tokens.weight.device.type != "cpu" or not onednn_linear_available(dtype):
            return False
        panels = panels and small_rows() > 0
        panels = panels and (dtype == torch.float32 or cpu_kernels.small_linear_shape()[2])
        for module in self.modules():
            if isinstance(module, Linear) and module.quantized is None:
                module.pack(batch_hint, panels, all_rows)
        if self.lm_head_quantized is not None:
            return True
        # The vocabulary projection keeps its source: with tied embeddings it is also the embedding table.
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        if panels:
            self.lm_head_panels = cpu_kernels.pack_panels(weight)
            self.small_rows = small_rows() if self.lm_head_panels is not None else 0
        if self.lm_head_panels is not None and all_rows:
            self.small_rows = sys.maxsize
        else:
            self.lm_head_packed = pack_weight(weight, batch_hint)
        return True

    def quantize_for_cpu(self, scheme: str) -> bool:
        """Keep the projections' weights as ``scheme`` panels ("int8", "int4" or "auto": ``quantization.schemes_for``)
        and the vocabulary projection as 8-bit ones (its rows are every token's embedding when tied; int4 there cost more agreement than it saved),
        on CPUs where the quantized kernels run, bf16 weights, one rank; False, changing nothing, elsewhere.
        Call before :meth:`pack_for_cpu`, which then leaves the quantized projections alone."""
        weight = self.embed_tokens.weight
        if (weight.device.type != "cpu" or weight.dtype != torch.bfloat16 or self.tp.size > 1
                or not quantization.kernels_ready()):
            return False
        linears = [m for m in self.modules() if isinstance(m, Linear)]
        chosen = quantization.schemes_for([m.weight for m in linears], scheme)
        for module, one in zip(linears, chosen):
            module.quantize(one)
        head = weight if self.lm_head is None else self.lm_head.weight
        # 8 bits in both modes (w8a8; in the int4 mode its bytes are a fifth of a step).
        head_scheme = quantization.EIGHT_BIT
        if quantization.can_quantize(head, head_scheme):
            self.lm_head_quantized = quantization.quantize(head, head_scheme)
            if self.lm_head is not None:
                self.lm_head.weight = nn.Parameter(head.new_empty(0), requires_grad=False)
        # The embedding rows come from the tied head's panels, or from the table's own (one copy either way).
        table = self.lm_head_quantized if self.lm_head is None else None
        own = "int4" if "int4" in chosen and quantization.on_4bit_grid(weight) else quantization.EIGHT_BIT
        if table is None and quantization.can_quantize(weight, own):
            table = quantization.quantize(weight, own)
        if table is not None:
            self.embed_tokens.quantized = table
            self.embed_tokens.weight = nn.Parameter(weight.new_empty(0), requires_grad=False)
        self.quantization = "int4" if "int4" in chosen else quantization.EIGHT_BIT
        return True

    def use_fused_cpu_ops(self) -> bool:
        """Run RMSNorm (with its residual add), RoPE and SiLU * up as the C++ CPU ops; False, changing nothing,
        where they can't run (not on CPU, or no compiler for the kernels)."""
        if self.embed_tokens.weight.device.type != "cpu" or not cpu_kernels.load():
            return False
        for module in self.modules():
            if isinstance(module, (RMSNorm, LlamaAttention, LlamaMLP)):
                module.fused = True
        return True

    def kv_cache_layers(self) -> list[LlamaAttention]:
        return [layer.self_attn for layer in self.layers]

    @torch.no_grad()
    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy a Hugging Face state dict in, fusing q/k/v and gate/up; missing or unknown names are errors."""
        own = dict(self.named_parameters())
        loaded: set[str] = set()

        def put(name: str, tensor: torch.Tensor) -> None:
            if name not in own:
                raise KeyError(f"checkpoint tensor maps to unknown parameter {name!r}")
            if own[name].shape != tensor.shape:
                raise ValueError(f"{name}: checkpoint shape {tuple(tensor.shape)} != model {tuple(own[name].shape)}")
            own[name].copy_(tensor)
            loaded.add(name)

        fused = {"q_proj": ("qkv_proj", 0), "k_proj": ("qkv_proj", 1), "v_proj": ("qkv_proj", 2),
                 "gate_proj": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", 1)}  # fmt: skip
        pending: dict[str, dict[int, torch.Tensor]] = {}
        for hf_name, tensor in weights.items():
            if "rotary_emb" in hf_name:
                continue
            name = hf_name.removeprefix("model.")
            parts = name.split(".")
            if len(parts) >= 2 and parts[-2] in fused:
                target, index = fused[parts[-2]]
                key = ".".join(parts[:-2] + [target, parts[-1]])
                pending.setdefault(key, {})[index] = tensor
                continue
            if name == "lm_head.weight" and self.lm_head is None:
                continue  # tied: some checkpoints store the copy anyway
            put(name, tensor)
        for key, pieces in pending.items():
            expected = 3 if ".qkv_proj." in key else 2
            if len(pieces) != expected:
                raise ValueError(f"{key}: checkpoint has {len(pieces)} of its {expected} fused parts")
            put(key, torch.cat([pieces[i] for i in range(expected)], dim=0))
        missing = sorted(set(own) - loaded)
        if missing:
            raise ValueError(f"checkpoint lacks {len(missing)} tensors, e.g. {missing[:3]}")


def build_model(
    config: ModelConfig,
    weights: dict[str, torch.Tensor],
    backend: AttentionBackend,
    max_positions: int,
    dtype: torch.dtype,
    device: torch.device | str,
    tp: TensorParallel | None = None,
) -> LlamaForCausalLM:
    """The model with ``weights`` loaded, in eval mode, without paying for a random initialisation.

    With ``tp``, ``weights`` are this rank's slices (``parallel.shard_weights``)."""
    with torch.device("meta"):
        model = LlamaForCausalLM(config, backend, max_positions, tp)
    model = model.to_empty(device=device).to(dtype)
    model.rotary.reset_tables()
    model.load_weights(weights)
    return model.eval().requires_grad_(False)
