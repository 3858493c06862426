"""Tensor parallelism (``EngineConfig.tensor_parallel_size``): one model split over ranks, as vLLM and
nano-vllm split a Llama-family model (Megatron-LM's scheme).

- Column-parallel ``qkv_proj`` and ``gate_up_proj``: each rank holds its query heads, its KV heads and its
  slice of the intermediate size; attention and SiLU * up run on the local heads/columns, no communication.
- Row-parallel ``o_proj`` and ``down_proj``: each rank multiplies its input columns, then one all-reduce (sum)
  gives every rank the full output. A row-parallel bias is added by rank 0 only (the others hold zeros).
- Vocabulary-parallel embedding: each rank holds a contiguous slice of the vocabulary rows; a token outside a
  rank's slice looks up zeros there, and the all-reduce sums the one non-zero row. The LM head (the same
  slice, or the tied embedding's) gives each rank its logits columns, gathered on rank 0 only, where the
  sampler runs.
- KV heads: split when ``num_key_value_heads`` is a multiple of the size; when the size is a multiple of
  ``num_key_value_heads`` each KV head is replicated on ``size / num_key_value_heads`` ranks (vLLM's rule).
  Anything else (and query heads or the intermediate size not divisible) is a config error, raised before
  any process starts: SmolLM2-135M (9 query heads, 3 KV heads) runs with size 1 or 3, not 2.

Processes: the engine process is rank 0 (the one scheduler, the sampler, and its own shard of the model);
:class:`WorkerGroup` spawns ranks 1.. (``torch.multiprocessing``, spawn), each a :class:`ModelRunner` that
waits on a pipe for each step's inputs (pickled CPU tensors, as nano-vllm passes them through shared
memory): a pipe needs no timeout while the engine idles, and a worker whose engine died reads EOF and exits.
The collectives run on ``torch.distributed`` (NCCL on CUDA, rank r on GPU r; gloo on CPU). A worker that
dies makes rank 0's next collective fail; rank 0 then raises :class:`TensorParallelError` naming the rank,
its exit code and its traceback, and refuses every later step. One tensor-parallel engine per process (it
owns torch.distributed's default group); :meth:`WorkerGroup.close` stops the workers and frees the group.
"""

from __future__ import annotations

import logging
import multiprocessing.connection
import os
import pickle
import shutil
import tempfile
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from inference.core.utils import cdiv

if TYPE_CHECKING:
    from inference.core.config import EngineConfig
    from inference.worker.loader import ModelConfig

logger = logging.getLogger(__name__)

# A collective waits this long for a peer that is alive but silent (a peer that died fails it at once).
COLLECTIVE_TIMEOUT = timedelta(minutes=10)
# Each rank's vocabulary slice is padded to a multiple of this (the CPU panel kernel's width).
VOCAB_PAD = 16


class TensorParallelError(RuntimeError):
    """A tensor-parallel worker died or failed; the engine cannot run steps any more."""


class TensorParallel:
    """This process's place in the group: ``rank`` of ``size``, and the collectives the model calls.

    ``TensorParallel()`` is the single-rank case: every collective is the identity."""

    def __init__(self, rank: int = 0, size: int = 1) -> None:
        self.rank, self.size = rank, size

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum ``x`` over the ranks, in place; every rank gets the same bits."""
        if self.size > 1:
            dist.all_reduce(x)
        return x

    def gather_columns(self, x: torch.Tensor, width: int) -> torch.Tensor | None:
        """Rank 0: the ranks' ``[N, shard]`` blocks side by side, cut to ``width`` columns; other ranks: None."""
        if self.size == 1:
            return x[:, :width]
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.size)] if self.rank == 0 else None
        dist.gather(x, parts, dst=0)
        return torch.cat(parts, dim=1)[:, :width] if parts is not None else None

    def all_min(self, value: int, device: torch.device) -> int:
        if self.size == 1:
            return value
        t = torch.tensor([value], dtype=torch.int64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return int(t.item())


# ---------------------------------------------------------------- how the model is split


def check_shapes(mc: ModelConfig, size: int) -> None:
    """Raise ValueError, naming the numbers, when ``mc`` cannot be split over ``size`` ranks."""
    if size == 1:
        return
    heads, kv = mc.num_attention_heads, mc.num_key_value_heads
    problems = []
    if heads % size:
        problems.append(f"num_attention_heads={heads} is not divisible by it")
    if kv % size and size % kv:
        problems.append(f"num_key_value_heads={kv} neither divides it nor is divisible by it")
    if mc.intermediate_size % size:
        problems.append(f"intermediate_size={mc.intermediate_size} is not divisible by it")
    if problems:
        divisors = [n for n in range(1, heads + 1) if not heads % n and (not kv % n or not n % kv)
                    and not mc.intermediate_size % n]  # fmt: skip
        raise ValueError(
            f"tensor_parallel_size={size} cannot split {mc.architecture}: {'; '.join(problems)}. "
            f"Sizes that work for this model: {', '.join(map(str, divisors))}"
        )


def local_kv_heads(total: int, size: int) -> int:
    return max(1, total // size)


def kv_head_start(rank: int, total: int, size: int) -> int:
    """First KV head of ``rank`` (replicated heads: ``size / total`` consecutive ranks share one)."""
    return rank * total // size if total >= size else rank // (size // total)


def vocab_shard(vocab: int, rank: int, size: int) -> tuple[int, int, int]:
    """``(start, end, rows)``: rank's vocabulary ids ``[start, end)`` in a slice of ``rows`` (padding last)."""
    rows = cdiv(cdiv(vocab, size), VOCAB_PAD) * VOCAB_PAD if size > 1 else vocab
    start = min(rank * rows, vocab)
    return start, min(start + rows, vocab), rows


def shard_weights(weights: dict[str, torch.Tensor], mc: ModelConfig, rank: int, size: int) -> dict[str, torch.Tensor]:
    """Rank's slices of a Hugging Face state dict (names unchanged, so ``load_weights`` fuses them as usual)."""
    if size == 1:
        return weights
    hd = mc.head_dim
    q = mc.num_attention_heads // size * hd
    kv = local_kv_heads(mc.num_key_value_heads, size) * hd
    kv0 = kv_head_start(rank, mc.num_key_value_heads, size) * hd
    inter = mc.intermediate_size // size
    start, end, rows = vocab_shard(mc.vocab_size, rank, size)
    out: dict[str, torch.Tensor] = {}
    for name, t in weights.items():
        kind = name.split(".")[-2] if "." in name else ""
        bias = name.endswith(".bias")
        if kind == "q_proj":
            t = t[rank * q : (rank + 1) * q]
        elif kind in ("k_proj", "v_proj"):
            t = t[kv0 : kv0 + kv]
        elif kind in ("gate_proj", "up_proj"):
            t = t[rank * inter : (rank + 1) * inter]
        elif kind == "o_proj":
            t = (t if rank == 0 else torch.zeros_like(t)) if bias else t[:, rank * q : (rank + 1) * q]
        elif kind == "down_proj":
            t = t[:, rank * inter : (rank + 1) * inter]
        elif kind in ("embed_tokens", "lm_head"):
            piece = t[start:end]
            padding = piece.new_zeros(rows - piece.shape[0], *piece.shape[1:])  # zero rows: never looked up
            t = torch.cat([piece, padding]) if padding.shape[0] else piece
        out[name] = t.contiguous()
    return out


# ---------------------------------------------------------------- processes


def init_group(rank: int, size: int, init_method: str, device: torch.device) -> TensorParallel:
    if dist.is_initialized():
        raise RuntimeError("torch.distributed is already initialised in this process: one tensor-parallel engine "
                           "per process")  # fmt: skip
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size, timeout=COLLECTIVE_TIMEOUT)
    return TensorParallel(rank, size)


def rank_device(device: str, rank: int) -> torch.device:
    """Rank r's device: GPU r on CUDA (the engine's ``cuda:i`` counts from i), the CPU otherwise."""
    d = torch.device(device)
    if d.type != "cuda" or (rank == 0 and d.index is None):  # one rank: the current GPU, as without parallelism
        return d
    return torch.device("cuda", (d.index or 0) + rank)


def serve_rank(
    rank: int,
    size: int,
    init_method: str,
    device: torch.device,
    conn: Any,
    make_runner: Callable[[TensorParallel], Any],
) -> None:
    """Rank ``rank``'s process: join the group, build its runner (its shard), then run every step rank 0
    sends until told to stop or the engine's end of the pipe closes."""
    try:
        conn.send(("hello",))
        runner = make_runner(init_group(rank, size, init_method, device))
        while True:
            try:
                command, payload = pickle.loads(conn.recv_bytes())
            except EOFError:  # the engine process is gone
                break
            if command == "stop":
                break
            runner.run_step(*payload)
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
        logger.exception("tensor-parallel worker rank %d failed", rank)
        os._exit(1)  # not via the group's teardown: its peers may be gone
    # Straight out, as on a failure: the interpreter's teardown with gloo's threads still about once aborted
    # ("terminate called without an active exception"); the OS closes the sockets, rank 0 frees its group.
    os._exit(0)


class WorkerGroup:
    """Rank 0's handle on ranks 1..size-1: starts them, sends each step, reports and stops them."""

    def __init__(
        self, config: EngineConfig, model_path: str, device: torch.device, target: Callable[..., None]
    ) -> None:
        """``target(rank, size, init_method, config, model_path, conn)`` runs each worker (through
        :func:`serve_rank`; it lives with the runner, which this module does not import)."""
        size = config.tensor_parallel_size
        if device.type == "cuda" and torch.cuda.device_count() < (device.index or 0) + size:
            raise ValueError(f"tensor_parallel_size={size} needs {size} GPUs from {device}; "
                             f"{torch.cuda.device_count()} visible")  # fmt: skip
        self.size = size
        self.failure: TensorParallelError | None = None
        # Rendezvous through a fresh file, not a TCP port picked in advance that another process could take.
        self._rendezvous = tempfile.mkdtemp(prefix="inference-tp-")
        init_method = f"file://{self._rendezvous}/store"
        ctx = mp.get_context("spawn")
        self.procs: list[Any] = []
        self.conns: list[multiprocessing.connection.Connection] = []
        for rank in range(1, size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=target, args=(rank, size, init_method, config, model_path, child),
                               name=f"inference-tp{rank}", daemon=True)  # fmt: skip
            proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)
        try:
            for rank in range(1, size):  # each says hello once torch is imported, just before it joins the group
                self._receive(rank)
            self.tp = init_group(0, size, init_method, device)
        except BaseException:
            self.close()
            raise

    def _receive(self, rank: int) -> Any:
        conn, proc = self.conns[rank - 1], self.procs[rank - 1]
        while not conn.poll(0.1):
            if not proc.is_alive():
                raise self._failed(None)
        try:
            message = conn.recv()
        except EOFError:
            raise self._failed(None) from None
        if message[0] == "error":
            raise self._failed(None)
        return message

    def check(self) -> None:
        """Raise the recorded failure, or a new one if a worker has exited."""
        if self.failure is not None:
            raise self.failure
        if any(not p.is_alive() for p in self.procs):
            raise self._failed(None)

    def send(self, command: str, payload: Any = None) -> None:
        """Hand every worker the next command (a step's inputs: CPU tensors, pickled once)."""
        self.check()
        data = pickle.dumps((command, payload), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            for conn in self.conns:
                conn.send_bytes(data)
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, cause: BaseException | None) -> TensorParallelError:
        """The error to raise (kept: every later step raises it too), with what the workers reported."""
        if self.failure is not None:
            return self.failure
        lines = []
        for rank, (proc, conn) in enumerate(zip(self.procs, self.conns), start=1):
            proc.join(timeout=0.5 if proc.is_alive() and cause is not None else 0)
            state = "running" if proc.is_alive() else f"exited with code {proc.exitcode}"
            report = ""
            try:
                while conn.poll():
                    message = conn.recv()
                    if message[0] == "error":
                        report = "\n" + message[1]
            except (EOFError, OSError):
                pass
            lines.append(f"rank {rank}: {state}{report}")
        what = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        self.failure = TensorParallelError(f"a tensor-parallel worker failed{what}; " + "; ".join(lines))
        return self.failure

    def wrap(self, exc: BaseException) -> TensorParallelError:
        """A collective on rank 0 raised: explain it by the workers' state."""
        return self._failed(exc)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the workers (they free their group), wait for them, then free rank 0's group."""
        for conn in self.conns:
            try:
                conn.send_bytes(pickle.dumps(("stop", None)))
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout)
        for conn in self.conns:
            conn.close()
        self.procs, self.conns = [], []
        if dist.is_initialized():
            dist.destroy_process_group()
        shutil.rmtree(self._rendezvous, ignore_errors=True)
