"""The C++ CPU kernels (``csrc/``), built on first use with torch's extension builder and cached.

Plain torch cannot read the paged cache in place: every decode would have to copy its blocks into a padded
buffer in each layer. ``paged_decode_attention`` walks each sequence's block table directly. Building needs a
C++ compiler; where there is none, :func:`load` returns False once, with the reason, and the torch path is used.

``python -m inference.worker.attention.cpu_kernels`` builds it ahead of time (scripts/setup.sh does).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import platform
import threading
from collections.abc import Callable
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CSRC = Path(__file__).with_name("csrc")
SOURCES = [
    CSRC / "paged_decode.cpp", CSRC / "prefix_attention.cpp", CSRC / "fused_ops.cpp", CSRC / "small_linear.cpp",
    CSRC / "quant_linear.cpp",
]
_lock = threading.Lock()
_state: dict[str, object] = {}


@functools.cache
def cpu_flags() -> str:
    """The CPU's feature flags as /proc/cpuinfo lists them ("" where it cannot be read)."""
    try:
        return next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return platform.processor()


def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` where there is none)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def cpu_has_bf16_instructions() -> bool:
    """The CPU multiplies bf16 natively (x86 AVX512-BF16 or AMX-BF16): bf16 matmuls and the kernel's bf16 dot
    products then run faster than fp32 ones, and weights and KV cache take half the memory traffic."""
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu_flags().split()))


def _build_name() -> str:
    # -march=native code is only valid on the CPU it was built for: the CPU's flags are part of the cache key.
    # The sources (headers included) too: torch's builder does not look at headers when deciding to rebuild.
    # And where they are: torch rebuilds in place when the source paths change, so two checkouts sharing one
    # folder would rebuild each other's kernels in turn.
    sources = b"".join(path.read_bytes() for path in sorted(CSRC.iterdir()) if path.suffix in (".cpp", ".h"))
    digest = hashlib.sha256((cpu_flags() + torch.__version__ + str(CSRC.resolve())).encode() + sources)
    digest = digest.hexdigest()[:10]
    return f"shop_assistant_cpu_{digest}"


def _vector_flags() -> list[str]:
    # GCC uses 256-bit vectors on AVX-512 CPUs and 128-bit ones on some AVX2 CPUs (AMD Zen 1); the kernel's
    # register tiles are sized for the widest the CPU has (its kLanes).
    if platform.machine() not in ("x86_64", "AMD64"):
        return []
    return ["-mprefer-vector-width=512" if "avx512f" in cpu_flags().split() else "-mprefer-vector-width=256"]


def build_directory(name: str) -> Path:
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions" / "shop_assistant"
    return Path(root) / name


@contextlib.contextmanager
def _building(directory: Path):
    """Held while building: one builder per folder across processes, and a builder that died is no obstacle.

    torch's builder marks a build with a ``lock`` file and waits, without a timeout, for it to go: a process killed
    mid-build leaves it, and every later engine start would hang. A kernel lock (flock) is released when its
    process dies, so whoever holds it knows a ``lock`` file left there is stale."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "build.flock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            (directory / "lock").unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load(verbose: bool = False) -> bool:
    """Build (once per machine) and load the kernels; False, with the reason logged, when they cannot be."""
    with _lock:
        if "ok" in _state:
            return bool(_state["ok"])
        if os.environ.get("ENGINE_CPU_KERNELS", "1") in ("0", "false", "no"):
            _state.update(ok=False, reason="disabled by ENGINE_CPU_KERNELS=0")
            return False
        try:
            from torch.utils import cpp_extension

            name = _build_name()
            with _building(build_directory(name)):
                cpp_extension.load(
                    name=name,
                    build_directory=str(build_directory(name)),
                    sources=[str(path) for path in SOURCES],
                    extra_cflags=[
                        "-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", "-fno-trapping-math", *_vector_flags()
                    ],
                    extra_ldflags=["-fopenmp"],
                    is_python_module=False,
                    verbose=verbose,
                )
            _state.update(ok=True, reason="")
        except Exception as exc:  # no compiler, no ninja, a build error: the torch path still works
            _state.update(ok=False, reason=f"{type(exc).__name__}: {exc}".splitlines()[0])
            logger.warning("C++ CPU kernels unavailable, using the torch attention path (%s)", _state["reason"])
        return bool(_state["ok"])


def unavailable_reason() -> str:
    return str(_state.get("reason", "not loaded yet"))


def paged_decode_attention(
    out: torch.Tensor,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    rows: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    start_block: int = 0,
    prefix: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """Attention of one query token per sequence over its paged context, written into ``out`` in place.

    Sequence ``i`` reads query row ``rows[i]`` of ``q`` ``[T, H, D]``, attends over the keys of blocks
    ``block_tables[i, start_block:]`` up to ``context_lens[i]`` tokens, and writes row ``rows[i]`` of ``out``.
    ``prefix``: ``(out [N, H, D], lse [N, H] float32)`` of its attention over the first ``start_block``
    blocks, merged in (cascade attention); without it those blocks are skipped, so pass ``start_block=0``.
    """
    prefix_out, prefix_lse = prefix if prefix is not None else (None, None)
    torch.ops.shop_assistant.paged_decode_attention_(
        out, q, k_cache, v_cache, rows, block_tables, context_lens, start_block, prefix_out, prefix_lse, scale
    )


def paged_attention(
    out: torch.Tensor,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    query_start_loc: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    only: torch.Tensor | None = None,
) -> None:
    """Causal attention of every query token of a step (prefill chunks and decodes) over the paged cache,
    written into ``out`` in place.

    Sequence ``i`` owns rows ``query_start_loc[i]:query_start_loc[i + 1]`` of ``q`` ``[T, H, D]``, its last
    positions; its query ``j`` of ``L`` attends over the first ``context_lens[i] - L + j + 1`` tokens of its
    blocks ``block_tables[i]`` (all int32), read back from the cache (so this step's K/V must be stored first).
    Each query runs exactly :func:`paged_decode_attention`'s walk for that context: one fixed order of sums per
    token, whatever the chunking, the prefix cache or the batch (the engine's batch-invariant attention).
    ``only`` (int64): the sequences to run, the other rows of ``out`` left as they are (None: all).
    """
    torch.ops.shop_assistant.paged_attention_(
        out, q, k_cache, v_cache, query_start_loc, block_tables, context_lens, only, scale
    )


def prefix_attention_supported(head_dim: int, block_size: int) -> bool:
    return head_dim in (64, 128) and block_size == 16


def prefix_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    rows: torch.Tensor,
    blocks: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of query rows ``rows`` of ``q`` ``[T, H, D]`` over the same whole blocks ``blocks`` (int32):
    ``(out [N, H, D], lse [N, H] float32)``, the ``prefix`` that :func:`paged_decode_attention` continues.
    The K cache is stored transposed (``[blocks, kv_heads, D, 16]``); head_dim 64 or 128, 16-token blocks."""
    n, heads, dim = rows.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty(n, heads, dim)
    lse = torch.empty(n, heads, dtype=torch.float32)
    torch.ops.shop_assistant.prefix_attention_(out, lse, q, k_cache, v_cache, rows, blocks, scale)
    return out, lse


@functools.cache
def small_linear_shape() -> tuple[int, int, bool]:
    """(panel width, rows per register tile, whether bf16 panels run) of :func:`small_linear` on this CPU: 16,
    16 and True with AVX-512 and AVX512-BF16. Up to that many rows stream the weights once; more rows run tile
    by tile against each panel while it is in the core's cache."""
    lanes, rows, bf16 = torch.ops.shop_assistant.small_linear_shape()
    return int(lanes), int(rows), bool(bf16)


# The kernels for bf16 panels: AMX tiles, AVX512-BF16 dot products. ENGINE_SMALL_LINEAR forces one (to compare
# them on an AMX machine); "auto" (the default) takes AMX where it runs, else AVX512-BF16.
BF16_PATHS = ("amx", "avx512_bf16")


def choose_bf16_path(flags: str, forced: str, amx_ready: Callable[[], bool]) -> str:
    """The kernel for bf16 panels (where they run: AVX512-BF16), from the CPU's ``flags`` and ``forced``
    (``ENGINE_SMALL_LINEAR``): AMX only where the flags list ``amx_bf16`` and ``amx_tile`` and ``amx_ready()``
    (the kernel's request for the tile state, made only then) succeeds, else AVX512-BF16."""
    if forced not in ("auto", *BF16_PATHS):
        raise ValueError(f"ENGINE_SMALL_LINEAR must be auto, {' or '.join(BF16_PATHS)}; got {forced!r}")
    if forced != "avx512_bf16" and {"amx_bf16", "amx_tile"} <= set(flags.split()) and amx_ready():
        return "amx"
    if forced == "amx":
        logger.warning("ENGINE_SMALL_LINEAR=amx, but AMX-BF16 does not run here: the AVX512-BF16 panels run")
    return "avx512_bf16"


@functools.cache
def bf16_path() -> str:
    """The kernel :func:`small_linear` runs bf16 panels on in this process ("amx", "avx512_bf16", or "" where
    bf16 panels don't run), chosen once; the engine logs it at load."""
    if not small_linear_shape()[2]:
        return ""
    forced = os.environ.get("ENGINE_SMALL_LINEAR", "auto").strip().lower() or "auto"
    return choose_bf16_path(cpu_flags(), forced, torch.ops.shop_assistant.small_linear_amx_ready)


def amx_runs() -> bool:
    """AMX-BF16 tiles run here: the CPU's flags list amx_bf16 and amx_tile, the kernels were built with the bf16
    panels, and Linux granted this process the tile state (asked only once the flags allow it)."""
    return bool(small_linear_shape()[2]) and choose_bf16_path(
        cpu_flags(), "auto", torch.ops.shop_assistant.small_linear_amx_ready
    ) == "amx"


def pack_panels(weight: torch.Tensor) -> torch.Tensor | None:
    """``weight`` ``[N, K]`` as the panels :func:`small_linear` reads: fp32 ``[N / lanes, K, lanes]``, bf16
    ``[N / lanes, K / 2, 2 * lanes]`` (pairs of k side by side). None where the kernel can't take it: ``N`` not
    whole panels, bf16 without AVX512-BF16 or with an odd ``K``, another dtype."""
    lanes, _, bf16 = small_linear_shape()
    n, k = weight.shape
    if n % lanes:
        return None
    w = weight.detach().reshape(n // lanes, lanes, k)
    if weight.dtype == torch.float32:
        return w.transpose(1, 2).contiguous()
    if weight.dtype == torch.bfloat16 and bf16 and k % 2 == 0:
        pairs = w.reshape(n // lanes, lanes, k // 2, 2).permute(0, 2, 1, 3)
        return pairs.reshape(n // lanes, k // 2, 2 * lanes).contiguous()
    return None


def small_linear(
    x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None = None, bf16: str | None = None
) -> torch.Tensor:
    """``x @ weight.T (+ bias)`` for ``x`` ``[rows, K]``, any number of rows, the weight as :func:`pack_panels`
    made it. fp32: each output one sum over k in order, the bias (if any) added to it; bf16: exact products, fp32
    sums, the bias added in fp32, rounded once (as oneDNN rounds). Every row's result is the same whatever the
    other rows: the sums do not depend on the row count (the engine's batch-invariant projections).
    ``bf16``: the kernel for bf16 panels (one of ``BF16_PATHS``; None: :func:`bf16_path`'s choice)."""
    lanes = small_linear_shape()[0]
    out = x.new_empty(x.shape[0], panels.shape[0] * lanes)
    amx = x.dtype == torch.bfloat16 and (bf16 or bf16_path()) == "amx"
    op = torch.ops.shop_assistant.small_linear_amx_ if amx else torch.ops.shop_assistant.small_linear_
    # Rows may be strided (the kernel reads them in place); only the features must be contiguous.
    op(out, x if x.stride(-1) == 1 else x.contiguous(), panels, None if bias is None else bias.contiguous())
    return out


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> torch.Tensor:
    """transformers' RMSNorm of ``x`` ``[rows, hidden]`` in one pass; with ``residual``, ``x`` is added to it
    first, in place (the decoder layer's residual stream), and the sum is what gets normalised."""
    out = torch.empty_like(x)
    torch.ops.shop_assistant.rms_norm_(out, x, residual, weight, eps)
    return out


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` of ``gate_up`` ``[rows, 2n]`` (gate first), rounded as the two torch ops round."""
    out = gate_up.new_empty(gate_up.shape[0], gate_up.shape[1] // 2)
    torch.ops.shop_assistant.silu_and_mul_(out, gate_up)
    return out


def rotary_embedding_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Rotate-half RoPE of ``x`` ``[rows, heads, dim]`` in place, ``cos``/``sin`` ``[rows, dim / 2]``."""
    torch.ops.shop_assistant.rotary_embedding_(x, cos, sin)


def store_kv(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor,
    k_transposed: bool,
) -> None:
    """Write this step's ``k``, ``v`` ``[T, kv_heads, dim]`` into cache slots ``slots`` (int64; -1 skips)."""
    torch.ops.shop_assistant.store_kv_(k, v, k_cache, v_cache, slots, k_transposed)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    ok = load(verbose=False)
    print("C++ CPU kernels:", "ready" if ok else f"unavailable ({unavailable_reason()})")
