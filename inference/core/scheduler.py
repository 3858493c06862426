"""Continuous batching over the paged KV cache (vLLM v1's scheduler, nano-vllm's layout).

Each ``schedule()`` spends a token budget (``max_num_batched_tokens``) with at most ``max_num_seqs`` running
sequences, in this order:

1. running sequences with one token left (decodes), oldest first;
2. running sequences still mid-prefill, one chunk each;
3. waiting sequences, first come first served, each admitted with a first prefill chunk that takes its
   prefix-cache hits as already computed (a request whose next prompt block is being computed by a running
   one waits for it to be cached instead of computing it twice);
4. the budget left goes back to the prefills of steps 2-3, oldest first.

In steps 2-3 a prefill chunk is capped at ``long_prefill_token_threshold`` tokens. So a long prompt is
prefilled over several steps, the decodes of everyone else keep going, and a short question arriving
behind it gets its whole prompt (and its first token) in the very next step; alone, the long prompt still
gets the full budget through step 4.

When the KV cache is out of blocks, the newest running sequence is preempted by recompute: its blocks are
freed (the full ones stay cached, so it usually gets them back), its progress is reset and it goes to the
head of the waiting queue with its generated tokens kept as part of what it will prefill again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from inference.core.block_pool import BlockHash
from inference.core.config import EngineConfig
from inference.core.kv_cache_manager import KVCacheManager
from inference.core.sequence import Sequence, SequenceStatus
from inference.core.stats import SchedulerStats


class RequestTooLongError(ValueError):
    """The request can never fit: longer than ``max_model_len`` or than the whole KV cache."""


@dataclass(slots=True)
class ScheduledSeq:
    """Compute ``seq.token_ids[seq.num_computed_tokens : seq.num_computed_tokens + num_new_tokens]``."""

    seq: Sequence
    num_new_tokens: int

    @property
    def samples(self) -> bool:
        """Whether the runner samples a token for this chunk (``Sequence.samples_after``).

        Valid between ``schedule()`` and ``update()``, which advances ``num_computed_tokens``."""
        return self.seq.samples_after(self.num_new_tokens)


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


@dataclass
class _StepBudget:
    tokens: int
    scheduled: dict[str, ScheduledSeq] = field(default_factory=dict)
    preempted: list[Sequence] = field(default_factory=list)


class Scheduler:
    def __init__(self, config: EngineConfig, num_blocks: int) -> None:
        self.config = config
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.kv = KVCacheManager.from_config(config, num_blocks)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admission order: the last one is preempted first
        self.requests: dict[str, Sequence] = {}  # unfinished requests by id
        self.num_preemptions = 0
        # First-round cap on one sequence's prefill chunk, so a long prompt cannot take the whole budget
        # from requests arriving behind it; what is left is handed back to it (oldest first) by the top-up.
        # vLLM's name; EngineConfig may carry it, else a quarter of the step budget.
        threshold = config.long_prefill_token_threshold or config.max_num_batched_tokens // 4
        self.long_prefill_token_threshold = max(1, threshold)

    @property
    def max_seq_len(self) -> int:
        """Most tokens a sequence may reach: ``max_model_len``, or fewer if the whole pool is smaller."""
        return self.kv.max_seq_len

    # -- requests ---------------------------------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        if seq.request_id in self.requests:
            raise ValueError(f"request {seq.request_id!r} is already queued")
        if seq.num_tokens == 0:
            raise ValueError("the prompt must contain at least one token")
        if seq.num_tokens > self.max_seq_len:
            raise RequestTooLongError(self._too_long_message(seq.num_tokens))
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)
        self.requests[seq.request_id] = seq

    def finish(self, request_id: str, status: SequenceStatus) -> bool:
        """Remove a request in any state and release its blocks now; False if it is not queued."""
        if not status.is_finished:
            raise ValueError(f"{status} is not a finished status")
        seq = self.requests.pop(request_id, None)
        if seq is None:
            return False
        if seq.status == SequenceStatus.RUNNING:
            self.running.remove(seq)
            self.kv.free(seq)
        else:
            self.waiting.remove(seq)
        seq.status = status
        return True

    def abort(self, request_id: str) -> bool:
        return self.finish(request_id, SequenceStatus.FINISHED_ABORTED)

    def preempt(self, request_id: str) -> bool:
        """Preempt a running request by recompute (also used by tests); False if it is not running."""
        seq = self.requests.get(request_id)
        if seq is None or seq.status != SequenceStatus.RUNNING:
            return False
        self.running.remove(seq)
        self._preempt(seq)
        return True

    def get_request(self, request_id: str) -> Sequence | None:
        return self.requests.get(request_id)

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    # -- one step ---------------------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        step = _StepBudget(self.max_num_batched_tokens)
        decodes = [s for s in self.running if s.num_uncomputed_tokens == 1]
        prefills = [s for s in self.running if s.num_uncomputed_tokens > 1]
        for seq in decodes + prefills:
            if step.tokens == 0:
                break
            if seq.status != SequenceStatus.RUNNING:  # preempted earlier in this step
                continue
            num_new = min(seq.num_uncomputed_tokens, step.tokens, self.long_prefill_token_threshold)
            if self._allocate_or_preempt(seq, num_new, step):
                step.scheduled[seq.request_id] = ScheduledSeq(seq, num_new)
                step.tokens -= num_new
        # Admitting right after a preemption would only take the blocks just freed for the running ones.
        if not step.preempted:
            self._admit_waiting(step)
        self._top_up_prefills(step)
        return SchedulerOutput(scheduled=list(step.scheduled.values()), preempted=step.preempted)

    def update(self, output: SchedulerOutput, sampled: dict[str, int]) -> list[Sequence]:
        """Apply a step's results; returns the sequences this call finished (length limits)."""
        finished = []
        for item in output.scheduled:
            seq = item.seq
            if seq.status != SequenceStatus.RUNNING:  # aborted or finished since schedule()
                continue
            samples = item.samples
            before = seq.num_computed_tokens
            seq.num_computed_tokens += item.num_new_tokens
            self.kv.cache_blocks(seq, before)
            if seq.prefill_only and seq.num_uncomputed_tokens == 0:
                self.finish(seq.request_id, SequenceStatus.FINISHED_LENGTH)
                finished.append(seq)
                continue
            if not samples:
                continue
            if seq.request_id not in sampled:
                raise KeyError(f"no sampled token for {seq.request_id!r}, which finished its tokens this step")
            seq.append_token(sampled[seq.request_id])
            if self._reached_length_limit(seq):
                self.finish(seq.request_id, SequenceStatus.FINISHED_LENGTH)
                finished.append(seq)
        return finished

    # -- counters ---------------------------------------------------------------------------------------

    def snapshot(self) -> SchedulerStats:
        """Cheap per-step sample (O(running)); take it after ``update`` so waste excludes lookahead slots."""
        return SchedulerStats(self.kv.stats(), self.num_preemptions, len(self.waiting), len(self.running))

    def stats(self) -> dict[str, Any]:
        return self.snapshot().as_dict()

    # -- internals --------------------------------------------------------------------------------------

    def _admit_waiting(self, step: _StepBudget) -> None:
        if not self.waiting:
            return
        in_flight = self._blocks_in_flight()
        i = 0
        while i < len(self.waiting) and step.tokens > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[i]
            hits = self.kv.get_computed_blocks(seq)
            if self._waits_for_in_flight_prefix(seq, len(hits), in_flight):
                i += 1
                continue
            num_hit_tokens = len(hits) * self.kv.block_size
            num_new = min(seq.num_tokens - num_hit_tokens, step.tokens, self.long_prefill_token_threshold)
            if not self.kv.allocate_slots(seq, num_new, hits, num_free_to_keep=self._headroom()):
                break  # FCFS: later requests do not overtake one that is waiting for memory
            del self.waiting[i]
            seq.status = SequenceStatus.RUNNING
            seq.num_computed_tokens = num_hit_tokens
            seq.num_cached_tokens = num_hit_tokens
            self.running.append(seq)
            in_flight.update(self._uncomputed_block_hashes(seq))
            step.scheduled[seq.request_id] = ScheduledSeq(seq, num_new)
            step.tokens -= num_new

    def _blocks_in_flight(self) -> set[BlockHash]:
        """Hashes of full blocks that running sequences have yet to compute."""
        return {h for seq in self.running if seq.num_uncomputed_tokens > 1 for h in self._uncomputed_block_hashes(seq)}

    def _uncomputed_block_hashes(self, seq: Sequence) -> list[BlockHash]:
        return seq.block_hashes[seq.num_computed_tokens // self.kv.block_size :]

    def _waits_for_in_flight_prefix(self, seq: Sequence, num_hits: int, in_flight: set[BlockHash]) -> bool:
        """Whether the next block this request would compute is being computed by a running one.

        Then it waits (later requests may go first) and takes that block as a cache hit a step or two
        later, instead of computing it again: a burst of sessions sharing a system prompt computes it once.
        """
        if num_hits >= (seq.num_tokens - 1) // self.kv.block_size:
            return False  # nothing more it could hit
        return num_hits < len(seq.block_hashes) and seq.block_hashes[num_hits] in in_flight

    def _top_up_prefills(self, step: _StepBudget) -> None:
        """Give the budget left after every prefill got its first chunk to the oldest capped prefills."""
        for item in step.scheduled.values():
            if step.tokens == 0:
                return
            extra = min(item.seq.num_uncomputed_tokens - item.num_new_tokens, step.tokens)
            # A top-up is a bonus: it neither preempts nor eats the headroom.
            total = item.num_new_tokens + extra
            if extra > 0 and self.kv.allocate_slots(item.seq, total, num_free_to_keep=self._headroom()):
                item.num_new_tokens += extra
                step.tokens -= extra

    def _headroom(self) -> int:
        """Blocks left free by admissions and top-ups: one per running sequence, for its next block, so
        that using spare memory now does not force a preemption at the next block boundary. Contiguous
        sequences never grow, so they need none."""
        return len(self.running) if self.kv.allocator == "paged" else 0

    def _allocate_or_preempt(self, seq: Sequence, num_new: int, step: _StepBudget) -> bool:
        while not self.kv.allocate_slots(seq, num_new):
            victim = self.running.pop()
            self._preempt(victim)
            step.preempted.append(victim)
            if victim is seq:
                return False
            unscheduled = step.scheduled.pop(victim.request_id, None)
            if unscheduled is not None:
                step.tokens += unscheduled.num_new_tokens
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.kv.free(seq)
        seq.num_computed_tokens = 0
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def _reached_length_limit(self, seq: Sequence) -> bool:
        max_tokens = seq.sampling_params.max_tokens
        if max_tokens is not None and seq.num_output_tokens >= max_tokens:
            return True
        # One more decode would need a KV slot past max_model_len (or past the whole pool).
        return seq.num_tokens >= self.max_seq_len

    def _too_long_message(self, num_tokens: int) -> str:
        if self.max_seq_len < self.config.max_model_len:
            where = f"the KV cache ({self.kv.num_blocks} blocks of {self.kv.block_size} tokens)"
        else:
            where = "max_model_len"
        return (
            f"prompt has {num_tokens} tokens but at most {self.max_seq_len} fit ({where}); "
            f"shorten it to {self.max_seq_len} tokens or fewer"
        )
