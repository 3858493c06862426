"""One step's flat, unpadded model inputs, built from the scheduler's output in a single pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence as SequenceT
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from inference.core.utils import cdiv
from inference.worker.attention import AttentionMetadata

if TYPE_CHECKING:
    from inference.core.scheduler import ScheduledSeq

ToTensor = Callable[[list, torch.dtype], torch.Tensor]


@dataclass
class StepInputs:
    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    meta: AttentionMetadata
    logits_indices: torch.Tensor  # [N]: flat index of the last token of each sampling sequence

    def to(self, device: torch.device) -> StepInputs:
        """A copy on ``device`` (tensor-parallel ranks receive their inputs on the CPU)."""
        m = self.meta
        meta = AttentionMetadata(
            m.slot_mapping.to(device), m.block_tables.to(device), m.context_lens.to(device),
            m.query_start_loc.to(device), m.max_query_len, m.max_context_len,
        )  # fmt: skip
        return StepInputs(self.input_ids.to(device), self.positions.to(device), meta, self.logits_indices.to(device))


def build_step_inputs(scheduled: SequenceT[ScheduledSeq], block_size: int, to_tensor: ToTensor) -> StepInputs:
    """The step's tensors from the scheduled ``(seq, num_new_tokens)`` items (scheduler order)."""
    bs = block_size
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
        if item.samples:
            logits_indices.append(query_start[-1] - 1)
    width = cdiv(max(context_lens), bs)
    padded = [t[:width] + [0] * (width - min(len(t), width)) for t in tables]
    meta = AttentionMetadata(
        slot_mapping=to_tensor(slots, torch.int64),
        block_tables=to_tensor(padded, torch.int32),
        context_lens=to_tensor(context_lens, torch.int32),
        query_start_loc=to_tensor(query_start, torch.int32),
        max_query_len=max(query_start[i + 1] - query_start[i] for i in range(len(scheduled))),
        max_context_len=max(context_lens),
    )
    return StepInputs(
        input_ids=to_tensor(input_ids, torch.int64),
        positions=to_tensor(positions, torch.int64),
        meta=meta,
        logits_indices=to_tensor(logits_indices, torch.int64),
    )


def dummy_prefill_inputs(lens: list[int], block_size: int, to_tensor: ToTensor) -> StepInputs:
    """Prefills of ``lens`` tokens on blocks 0, 1, 2, ... (profiling the worst-case step's memory)."""
    block = 0
    tables, ids, pos, slots = [], [], [], []
    for n in lens:
        nb = cdiv(n, block_size)
        tables.append(list(range(block, block + nb)))
        ids.extend([0] * n)
        pos.extend(range(n))
        slots.extend(range(block * block_size, block * block_size + n))
        block += nb
    width = max(len(t) for t in tables)
    qsl = [0]
    for n in lens:
        qsl.append(qsl[-1] + n)
    meta = AttentionMetadata(
        slot_mapping=to_tensor(slots, torch.int64),
        block_tables=to_tensor([t + [0] * (width - len(t)) for t in tables], torch.int32),
        context_lens=to_tensor(lens, torch.int32),
        query_start_loc=to_tensor(qsl, torch.int32),
        max_query_len=max(lens),
        max_context_len=max(lens),
    )
    return StepInputs(to_tensor(ids, torch.int64), to_tensor(pos, torch.int64), meta, to_tensor(qsl[1:], torch.int64))
