"""Quantized int8 and int4 projections for the CPU (``ENGINE_QUANTIZATION=none|int8|int4|auto``).

A decode step reads every weight once, so on a CPU its time is the weights' bytes over the memory's bandwidth:
3.1 GB a step for the 1.5B model in bf16. The weights are re-quantized at load, group-wise along the input
dimension, into the panel layouts of ``csrc/quant_linear.cpp``:

- int8 (a tensor's scheme ``w8a8``): symmetric, ``w = s * q``, ``q`` in -127..127, one bf16 scale per output and
  group of 32 inputs (8.5 bits a weight);
- int4: asymmetric, ``w = s * q + m``, ``q`` in 0..15, a bf16 scale and minimum per output and group of 32
  (5 bits a weight; the GGUF's Q4_K uses the same 32-weight groups, so its 4-bit grid is mostly kept).

Both kernels quantize each row of activations to int8 per group of 32 and multiply bytes (AVX512-VNNI
``vpdpbusd``, or AVX2's ``vpmaddubsw`` pairs), exact int32 sums: turning codes into bf16 in registers made the
kernels compute bound (int4 nibbles on a Zen 4; a weight-only int8 kernel decoded the 1.5B model no faster than
bf16 on an AMX Xeon, 7.4 against 7.7 tokens/s, where w8a8 runs 14.5 with a lower perplexity, docs/quantization.md).
The int4 mode's 8-bit tensors (those a 4-bit source kept at more bits, and the vocabulary projection) are w8a8 too.
:func:`dequantize` and :func:`reference_linear` are what the kernels are tested against. The quantized panels
replace the weight (no bf16 copy is kept); a tied vocabulary projection keeps 8-bit panels, from which the
embedding rows are read too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from inference.worker.attention import cpu_kernels

logger = logging.getLogger(__name__)

SCHEMES = ("none", "int8", "int4")  # what ENGINE_QUANTIZATION names; a tensor's scheme is "w8a8" (8 bits) or "int4"
EIGHT_BIT = "w8a8"  # the 8-bit tensors' scheme: the int8 mode's, and the int4 mode's 8-bit tensors
LANES = 16  # outputs per panel: the AVX-512 kernels' vector width
GROUPS = {"int4": (32,), "w8a8": (32,)}  # group sizes along K, preferred first (the first dividing K is used)


@dataclass(frozen=True)
class QuantizedWeight:
    """One projection's weight ``[N, K]`` as quantized panels (the layouts of ``csrc/quant_linear.cpp``)."""

    scheme: str  # "w8a8" or "int4"
    q: torch.Tensor  # uint8 [N/16, K/4, 64] (w8a8: code + 128) or [N/16, K/8, 64] (int4: two codes a byte)
    scales: torch.Tensor  # bf16 [N/16, K/group, 16]
    mins: torch.Tensor | None  # int4: bf16 [N/16, K/group, 16]
    group: int
    shape: tuple[int, int]  # (N, K)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.q, self.scales, self.mins) if t is not None)


def kernel_isa() -> int:
    """Which quantized kernels this CPU runs: 2 with AVX512-BF16 and AVX512-VNNI (byte products by
    ``vpdpbusd``), 1 with AVX2 and FMA (``vpmaddubsw`` pairs), 0 none (or no compiler)."""
    return int(torch.ops.shop_assistant.quant_linear_isa()) if cpu_kernels.load() else 0


def kernels_ready() -> bool:
    """The quantized panels run here (AVX2 and FMA at least, and the C++ kernels built)."""
    return kernel_isa() > 0


def resolve_scheme(requested: str | None = None) -> str:
    """The scheme this process runs (``EngineConfig.quantization``: none, int8, int4 or auto, see
    :func:`schemes_for`), "none" where the kernels cannot run (logged)."""
    scheme = (requested or "none").strip().lower()
    if scheme not in (*SCHEMES, "auto"):
        raise ValueError(f"ENGINE_QUANTIZATION must be none, int8, int4 or auto; got {scheme!r}")
    if scheme != "none" and not kernels_ready():
        logger.warning("ENGINE_QUANTIZATION=%s, but the quantized kernels need AVX2 and FMA: weights stay unquantized",
                       scheme)
        return "none"
    return scheme


def can_quantize(weight: torch.Tensor, scheme: str) -> bool:
    n, k = weight.shape
    return n % LANES == 0 and any(k % g == 0 for g in GROUPS[scheme])


def quantize(weight: torch.Tensor, scheme: str) -> QuantizedWeight:
    """``weight`` ``[N, K]`` rounded to the nearest code of its group (scales rounded to bf16 first, so the codes
    are the nearest under the scales the kernel uses)."""
    if scheme not in GROUPS:
        raise ValueError(f"a tensor's scheme is w8a8 or int4; got {scheme!r}")
    n, k = weight.shape
    group = next(g for g in GROUPS[scheme] if k % g == 0)
    w = weight.detach().float().reshape(n, k // group, group)
    if scheme == "w8a8":
        scale = (w.abs().amax(-1) / 127).clamp_min(1e-12).bfloat16()
        q = torch.round(w / scale.float().unsqueeze(-1)).clamp(-127, 127).to(torch.int8).reshape(n, k)
        return QuantizedWeight(scheme, _pack_w8a8(q), _panel_major(scale), None, group, (n, k))
    lo, hi = w.amin(-1), w.amax(-1)
    scale = ((hi - lo) / grid_levels(w)).clamp_min(1e-12).bfloat16()
    low = lo.bfloat16()
    q = torch.round((w - low.float().unsqueeze(-1)) / scale.float().unsqueeze(-1)).clamp(0, 15).to(torch.uint8)
    return QuantizedWeight("int4", _pack_int4(q.reshape(n, k)), _panel_major(scale), _panel_major(low), group, (n, k))


def grid_levels(groups: torch.Tensor, most: int = 15) -> torch.Tensor:
    """Per group (the last dimension), the steps between its smallest and largest value where its values already
    lie on an evenly spaced grid of at most ``most`` steps (weights de-quantized from a 4-bit GGUF: Q4_1, Q4_K),
    else ``most``. A 4-bit group rarely uses both ends of its grid; spreading it over 15 steps anyway would move
    every value off the grid it was on, so the shipped weights are kept as they are, up to their bf16 rounding."""
    ordered = groups.sort(-1).values
    span = ordered[..., -1] - ordered[..., 0]
    gaps = ordered.diff(dim=-1)
    smallest = torch.where(gaps > span.unsqueeze(-1) * 1e-3, gaps, torch.inf).amin(-1)
    levels = torch.round(span / smallest).clamp(1, most)
    levels = torch.where(torch.isfinite(smallest), levels, torch.ones_like(levels))
    step = (span / levels).unsqueeze(-1)
    off = (groups - ordered[..., :1]) / step.clamp_min(1e-30)
    on_grid = ((off - off.round()).abs() <= 0.1).all(-1) & (span / smallest <= most + 0.5)
    return torch.where(on_grid, levels, torch.full_like(levels, most))


def schemes_for(weights: list[torch.Tensor], scheme: str) -> list[str]:
    """The scheme of each weight: w8a8 for the int8 mode ("auto" is int8: its loss the smallest measured on both
    models), and int4 following a 4-bit source's own mix: where most weights lie on 4-bit grids (a Q4_K_M
    GGUF), those that do not were kept at more bits by the source (Q6_K) for its quality, and are w8a8 here (8-bit
    codes on the int4 kernels' int8 activations)."""
    if scheme != "int4":
        return [EIGHT_BIT] * len(weights)
    grid = [on_4bit_grid(w) for w in weights]
    if sum(grid) < len(grid) / 2:
        return ["int4"] * len(weights)
    return ["int4" if g else EIGHT_BIT for g in grid]


def on_4bit_grid(weight: torch.Tensor) -> bool:
    """Most of the weight's 32-groups already lie on a grid of at most 15 steps: it came from a 4-bit source."""
    n, k = weight.shape
    if k % 32:
        return False
    groups = weight.detach().float().reshape(-1, 32)[:: max(1, n * k // 32 // 4096)]  # a sample of groups
    return bool((grid_levels(groups, most=16) <= 15).float().mean() >= 0.9)


def _panel_major(per_group: torch.Tensor) -> torch.Tensor:
    """``[N, K/group]`` -> ``[N/16, K/group, 16]``: a group's 16 outputs side by side, as the kernel loads them."""
    n, groups = per_group.shape
    return per_group.reshape(n // LANES, LANES, groups).transpose(1, 2).contiguous()


def _pack_w8a8(q: torch.Tensor) -> torch.Tensor:
    n, k = q.shape  # step k4, lane j, b in 0..3: byte 4j + b = q[j][4k4 + b] + 128
    u = (q.to(torch.int16) + 128).to(torch.uint8)
    return u.reshape(n // LANES, LANES, k // 4, 4).permute(0, 2, 1, 3).reshape(n // LANES, k // 4, 4 * LANES).contiguous()


def _pack_int4(q: torch.Tensor) -> torch.Tensor:
    n, k = q.shape  # step k8, lane j, b in 0..3: byte 4j + b = q[j][8k8 + b] | q[j][8k8 + 4 + b] << 4
    q = q.reshape(n // LANES, LANES, k // 8, 2, 4)  # [panel, lane, k8, half, b]
    packed = q[:, :, :, 0, :] | (q[:, :, :, 1, :] << 4)  # [panel, lane, k8, b]
    return packed.permute(0, 2, 1, 3).reshape(n // LANES, k // 8, 4 * LANES).contiguous()


def codes(weight: QuantizedWeight) -> torch.Tensor:
    """The codes ``[N, K]`` back out of the panels (w8a8 as -127..127; int4 as 0..15)."""
    n, k = weight.shape
    if weight.scheme == "w8a8":
        u = weight.q.reshape(n // LANES, k // 4, LANES, 4).permute(0, 2, 1, 3).reshape(n, k)
        return (u.to(torch.int16) - 128).to(torch.int8)
    packed = weight.q.reshape(n // LANES, k // 8, LANES, 4).permute(0, 2, 1, 3)  # [panel, lane, k8, b]
    q = torch.stack((packed & 15, packed >> 4), dim=3)  # [panel, lane, k8, half, b]
    return q.reshape(n, k)


def _per_output(per_panel: torch.Tensor, group: int) -> torch.Tensor:
    """``[N/16, K/group, 16]`` -> ``[N, K]`` (each group's value repeated over its inputs)."""
    panels, groups, _ = per_panel.shape
    return per_panel.transpose(1, 2).reshape(panels * LANES, groups).float().repeat_interleave(group, dim=1)


def dequantize(weight: QuantizedWeight) -> torch.Tensor:
    """The fp32 weight ``[N, K]`` the kernel multiplies by (the reference for tests and for the embedding)."""
    w = codes(weight).float() * _per_output(weight.scales, weight.group)
    if weight.mins is not None:
        w = w + _per_output(weight.mins, weight.group)
    return w


def dequantize_rows(weight: QuantizedWeight, rows: torch.Tensor) -> torch.Tensor:
    """fp32 rows ``rows`` of the weight (an embedding lookup on the tied vocabulary projection), read from the
    panels without de-quantizing the rest."""
    n, k = weight.shape
    panel, lane = rows // LANES, rows % LANES
    if weight.scheme == "w8a8":
        q = weight.q.reshape(n // LANES, k // 4, LANES, 4)[panel, :, lane, :].reshape(len(rows), k).float() - 128
    else:
        lines = weight.q.reshape(n // LANES, k // 8, LANES, 4)[panel, :, lane, :]  # [T, K/8, 4]
        q = torch.stack((lines & 15, lines >> 4), dim=2).reshape(len(rows), k).float()
    scales = weight.scales[panel, :, lane].float().repeat_interleave(weight.group, dim=1)
    out = q * scales
    if weight.mins is not None:
        out = out + weight.mins[panel, :, lane].float().repeat_interleave(weight.group, dim=1)
    return out


def quantize_activations(x: torch.Tensor, group: int) -> torch.Tensor:
    """``x`` as the int4 and w8a8 kernels multiply it: each row's groups rounded to int8 steps of ``max |x| / 127``."""
    g = x.float().reshape(x.shape[0], -1, group)
    scale = g.abs().amax(-1, keepdim=True) / 127
    inverse = torch.where(scale > 0, 127 / g.abs().amax(-1, keepdim=True), torch.zeros_like(scale))
    return (torch.round(g * inverse) * scale).reshape(x.shape)


def reference_linear(x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """What :func:`linear` computes, in float64 before its one rounding (fp32 here): w8a8 on x's int8 steps, int4
    on x's int8 steps for the codes' term and on x itself for the minimums' term."""
    x64 = x.double()
    if weight.scheme == "w8a8":
        out = quantize_activations(x, weight.group).double() @ dequantize(weight).double().T
    else:
        scales = _per_output(weight.scales, weight.group).double()
        mins = _per_output(weight.mins, weight.group).double()
        out = quantize_activations(x, weight.group).double() @ (codes(weight).double() * scales).T + x64 @ mins.T
    return (out if bias is None else out + bias.double()).float()


def linear(x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ w.T (+ bias)`` for bf16 ``x`` ``[rows, K]`` on the quantized panels (:func:`reference_linear` says
    exactly what), fp32 sums, each group's sum scaled once, the output rounded to bf16 once. Batch invariant."""
    x = x if x.stride(-1) == 1 else x.contiguous()
    out = x.new_empty(x.shape[0], weight.shape[0])
    b = None if bias is None else bias.contiguous()
    if weight.scheme == "w8a8":
        torch.ops.shop_assistant.quant_linear_w8a8_(out, x, weight.q, weight.scales, b, weight.group)
    else:
        torch.ops.shop_assistant.quant_linear_int4_(out, x, weight.q, weight.scales, weight.mins, b, weight.group)
    return out
