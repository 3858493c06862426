"""Shared fixtures for the engine tests (tests/inference).

Fixtures (names are stable; other test files rely on them):

- ``model_path`` (session): ``Path`` of the bundled SmolLM2-135M-Instruct as a plain Hugging Face folder
  (safetensors + config + tokenizer). Converted from the GGUF on first use (about half a minute) into
  ``$SHOP_ASSISTANT_CACHE_DIR`` or ``~/.cache/shop-assistant/models``, then reused.
- ``hf_model`` (session): transformers' own model loaded from ``model_path`` (fp32, eval), the reference
  for parity tests. Run it under ``torch.inference_mode()``.
- ``tokenizer`` (session): the bundled model's tokenizer (with its chat template).
- ``test_device`` (session): "cuda" when a GPU is present, else "cpu".
- ``paged_layout`` (function): ``paged_layout(query_lens, context_lens, block_size, num_blocks, generator)``
  builds AttentionMetadata over random, non-contiguous blocks.
- ``step_helper`` (function): the StepHelper class: random block tables for Sequences, and one-call steps.
- ``make_tiny_checkpoint`` (function): ``make_tiny_checkpoint(tmp_path, arch="llama", **config_overrides)``
  writes a tiny random Llama / Qwen2 / Mistral checkpoint with ``save_pretrained`` and returns its folder.

OpenMP: ``OMP_WAIT_POLICY=PASSIVE`` is set (unless set already) when this file loads before torch.

Triton: without a GPU, ``TRITON_INTERPRET=1`` is set here, before any test imports the Triton kernels
(Triton reads it when a kernel is decorated), so the kernels run on CPU tensors in the interpreter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# OpenMP threads spin while waiting by default; on this shared 2-core machine, with other processes busy,
# that makes each op wait for a descheduled spinner (steps 10-30x slower). Only effective if torch is not
# imported yet in this process.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def test_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="session")
def model_path() -> Path:
    from inference.worker.loader import resolve_model

    return resolve_model(None)


@pytest.fixture(scope="session")
def hf_model(model_path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def tokenizer(model_path: Path) -> Any:
    from inference.worker.loader import load_tokenizer

    return load_tokenizer(model_path)


_TINY = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=112,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    # Larger than the default 0.02 so attention is peaked and a wrong position or head shows in the logits.
    initializer_range=0.3,
)


def write_tiny_checkpoint(folder: Path, arch: str = "llama", seed: int = 0, **overrides: Any) -> Path:
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

    config_cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}[arch]
    config = config_cls(**{**_TINY, **overrides})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        # Random (not unit) norm weights and biases, so a skipped scale or bias changes the output.
        for name, param in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                param.copy_(1.0 + 0.5 * torch.randn_like(param) if "norm" in name else 0.5 * torch.randn_like(param))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    return folder


@pytest.fixture
def make_tiny_checkpoint() -> Callable[..., Path]:
    return write_tiny_checkpoint


class StepHelper:
    """Drives a ModelRunner by hand, as the scheduler would: random non-contiguous blocks, then steps."""

    def __init__(self, num_blocks: int, block_size: int, seed: int = 0) -> None:
        self.block_size = block_size
        generator = torch.Generator().manual_seed(seed)
        self.free = torch.randperm(num_blocks, generator=generator).tolist()

    def new_seq(self, request_id: str, token_ids: list[int], max_len: int | None = None) -> Any:
        """A Sequence with blocks for ``max_len`` tokens (default: its tokens plus 16)."""
        from inference.core.sequence import Sequence

        seq = Sequence(request_id, token_ids)
        total = max_len if max_len is not None else len(token_ids) + 16
        need = -(-total // self.block_size)
        seq.block_table, self.free = self.free[:need], self.free[need:]
        return seq

    @staticmethod
    def step(runner: Any, items: list[tuple[Any, int]]) -> torch.Tensor:
        """Execute one step of ``(seq, num_new_tokens)`` items and advance the sequences; returns the logits."""
        from inference.core.scheduler import ScheduledSeq, SchedulerOutput

        logits = runner.execute(SchedulerOutput([ScheduledSeq(seq, n) for seq, n in items]))
        for seq, n in items:
            seq.num_computed_tokens += n
        return logits


@pytest.fixture
def step_helper() -> type[StepHelper]:
    return StepHelper


# ======================================================================================================
# Engine fixtures (LLM / AsyncLLM; owner: engine core II). Kept at the end of this file on purpose.
# ======================================================================================================


@pytest.fixture(scope="session")
def llm(model_path: Path, test_device: str) -> Any:
    """One ``LLM`` on the bundled model for the engine tests (fp32 so greedy runs match the reference)."""
    from inference import LLM

    return LLM(str(model_path), device=test_device, dtype="float32", num_gpu_blocks_override=384, max_num_seqs=32)


def make_paged_layout(
    query_lens: list[int],
    context_lens: list[int],
    block_size: int,
    num_blocks: int,
    generator: torch.Generator,
    device: str = "cpu",
) -> Any:
    """AttentionMetadata for sequences whose new tokens are the last ``query_lens[i]`` of ``context_lens[i]``,
    with blocks drawn at random (non-contiguous, shuffled) from a pool of ``num_blocks``."""
    from inference.worker.attention import AttentionMetadata

    perm = torch.randperm(num_blocks, generator=generator).tolist()
    tables, slots, query_start = [], [], [0]
    for q_len, ctx in zip(query_lens, context_lens):
        need = -(-ctx // block_size)
        table, perm = perm[:need], perm[need:]
        tables.append(table)
        slots += [table[p // block_size] * block_size + p % block_size for p in range(ctx - q_len, ctx)]
        query_start.append(query_start[-1] + q_len)
    width = max(1, max(len(t) for t in tables))
    # Padding entries point at real blocks of other sequences: a backend that reads past a context shows.
    filler = [b for t in tables for b in t] or [0]
    padded = [t + [filler[(i + j) % len(filler)] for j in range(width - len(t))] for i, t in enumerate(tables)]
    return AttentionMetadata(
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        block_tables=torch.tensor(padded, dtype=torch.int32, device=device),
        context_lens=torch.tensor(context_lens, dtype=torch.int32, device=device),
        query_start_loc=torch.tensor(query_start, dtype=torch.int32, device=device),
        max_query_len=max(query_lens),
        max_context_len=max(context_lens),
    )


@pytest.fixture
def paged_layout() -> Callable[..., Any]:
    return make_paged_layout
