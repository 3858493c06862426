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

Priorities (vLLM's ``priority``; ``Sequence.priority``, lower first): the waiting queue is kept in priority
order (first come first served within a priority; a preempted sequence goes to the head of its own priority),
running sequences are scheduled and topped up in priority order, the victim of a preemption is the newest of
the lowest priority, a waiting sequence that finds no seat or no memory preempts running ones of a lower
priority (newest first) to get in, and a step that prefills a sequence runs none of a lower priority (they sit
that step out); a running prefill of a lower priority than the head of the queue takes its chunk after that
head is admitted. A step that decodes a sequence of a priority below ``exclusive_decode_below`` (the chat's plans)
runs no prefill of a lower priority either, only their decodes: a plan's every step is then a decode's cost. With
one priority for everyone all of this is the plain order above.

Parallel sampling (``add(seq, forks=...)``): only ``seq`` is queued and prefilled; the step that finishes its
prompt samples a first token for it and for each fork from the same logits (``ScheduledSeq.forks``), and
``update`` forks them: each fork holds the prompt's blocks by reference (``KVCacheManager.fork``) and runs on
as an ordinary sequence. A shared partial block is copied on write (``SchedulerOutput.blocks_to_copy``). A
request takes its seats (``max_num_seqs``) and its headroom for all its candidates when it is admitted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence as SequenceT
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
    # Candidates forked from ``seq`` when this chunk samples (its prompt is done): each samples its own first
    # token from the same logits row as ``seq``, and ``update`` gives it ``seq``'s blocks by reference.
    forks: list[Sequence] = field(default_factory=list)

    @property
    def samples(self) -> bool:
        """Whether the runner samples a token for this chunk (``Sequence.samples_after``).

        Valid between ``schedule()`` and ``update()``, which advances ``num_computed_tokens``."""
        return self.seq.samples_after(self.num_new_tokens)


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    # Copies on write, (source block, destination block): the model runner copies their KV, in every layer,
    # before the step's forward (vLLM's ``blocks_to_copy``).
    blocks_to_copy: list[tuple[int, int]] = field(default_factory=list)

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
    # The highest priority (lowest value) decoding with ``exclusive_decode_below``: no prefill of a lower one.
    exclusive: int | None = None

    def holds_back(self, seq: Sequence) -> bool:
        """Whether ``seq``'s prefill waits this step for an exclusive decode."""
        return self.exclusive is not None and seq.priority > self.exclusive


class Scheduler:
    def __init__(self, config: EngineConfig, num_blocks: int) -> None:
        self.config = config
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.kv = KVCacheManager.from_config(config, num_blocks)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admission order: the last one is preempted first
        self.requests: dict[str, Sequence] = {}  # unfinished requests by id
        # Forks waiting for their parent's prompt, by the parent's id; they are in ``requests`` but not queued.
        self._forks: dict[str, list[Sequence]] = {}
        self.num_preemptions = 0
        # First-round cap on one sequence's prefill chunk, so a long prompt cannot take the whole budget
        # from requests arriving behind it; what is left is handed back to it (oldest first) by the top-up.
        # vLLM's name; EngineConfig may carry it, else a quarter of the step budget.
        threshold = config.long_prefill_token_threshold or config.max_num_batched_tokens // 4
        self.long_prefill_token_threshold = max(1, threshold)
        self.exclusive_decode_below = config.exclusive_decode_below

    @property
    def max_seq_len(self) -> int:
        """Most tokens a sequence may reach: ``max_model_len``, or fewer if the whole pool is smaller."""
        return self.kv.max_seq_len

    # -- requests ---------------------------------------------------------------------------------------

    def add(self, seq: Sequence, forks: SequenceT[Sequence] = ()) -> None:
        """Queue ``seq``; ``forks`` (candidates of the same prompt, parallel sampling) are forked from it once
        its prompt is computed. Raises ValueError (``RequestTooLongError``) before queueing anything."""
        group = [seq, *forks]
        ids = [s.request_id for s in group]
        if len(set(ids)) < len(ids) or any(i in self.requests for i in ids):
            raise ValueError(f"request {seq.request_id!r} is already queued")
        if seq.num_tokens == 0:
            raise ValueError("the prompt must contain at least one token")
        if seq.num_tokens > self.max_seq_len:
            raise RequestTooLongError(self._too_long_message(seq.num_tokens))
        if len(group) > self.max_num_seqs:
            raise ValueError(f"{len(group)} candidates exceed max_num_seqs={self.max_num_seqs}")
        for fork in forks:
            if fork.token_ids != seq.token_ids or fork.cache_salt != seq.cache_salt or fork.num_computed_tokens:
                raise ValueError(f"fork {fork.request_id!r} must be a fresh sequence of the same prompt and salt")
            if fork.prefill_only or seq.prefill_only:
                raise ValueError("a prefill-only request cannot be forked")
        for s in group:
            s.status = SequenceStatus.WAITING
            self.requests[s.request_id] = s
        self._enqueue(seq)
        if forks:
            self._forks[seq.request_id] = list(forks)

    def finish(self, request_id: str, status: SequenceStatus) -> bool:
        """Remove a request in any state and release its blocks now; False if it is not queued."""
        if not status.is_finished:
            raise ValueError(f"{status} is not a finished status")
        seq = self.requests.pop(request_id, None)
        if seq is None:
            return False
        queue_index: int | None = None  # where an heir takes its place in the waiting queue
        if seq.status == SequenceStatus.RUNNING:
            self.running.remove(seq)
            self.kv.free(seq)
        elif (siblings := self._pending_siblings(seq)) is not None:
            siblings.remove(seq)  # a fork not forked yet holds nothing
        else:
            queue_index = self.waiting.index(seq)
            del self.waiting[queue_index]
        seq.status = status
        forks = self._forks.pop(request_id, None)
        if forks:
            # Its candidates lose the prefill they were waiting for: the first one takes its place and the
            # others are forked from that one instead.
            heir, *rest = forks
            # A running parent's heir heads its priority, as a preempted sequence would.
            self.waiting.insert(self._head_of(heir.priority) if queue_index is None else queue_index, heir)
            if rest:
                self._forks[heir.request_id] = rest
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

    def pending_forks(self, request_id: str) -> list[Sequence]:
        """The forks still waiting for ``request_id``'s prompt (tests and debugging)."""
        return list(self._forks.get(request_id, ()))

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
        step.exclusive = min((s.priority for s in decodes if s.priority < self.exclusive_decode_below), default=None)
        # A prefill of a lower priority than the head of the queue goes after its admission, not before: else
        # the running prefills could spend every step's budget and a plan would wait for all of them.
        first_waiting = self.waiting[0].priority if self.waiting else None
        deferred = []
        # Stable: within a priority, decodes then prefills, in admission order, as without priorities.
        for seq in sorted(decodes + prefills, key=_priority):
            if seq.num_uncomputed_tokens > 1 and step.holds_back(seq):
                continue
            if seq.num_uncomputed_tokens > 1 and first_waiting is not None and seq.priority > first_waiting:
                deferred.append(seq)
                continue
            self._schedule_running(seq, step)
        # Admitting right after a preemption would only take the blocks just freed for the running ones; only a
        # request of a higher priority than every sequence preempted may still come in (_admit_waiting).
        self._admit_waiting(step)
        for seq in deferred:
            self._schedule_running(seq, step)
        self._yield_to_urgent_prefills(step)
        self._top_up_prefills(step)
        for item in step.scheduled.values():
            if item.samples and item.seq.request_id in self._forks:
                item.forks = list(self._forks[item.seq.request_id])
        return SchedulerOutput(
            scheduled=list(step.scheduled.values()), preempted=step.preempted, blocks_to_copy=self.kv.take_copies()
        )

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
            for s in (seq, *self._fork(seq)):
                if s.request_id not in sampled:
                    raise KeyError(f"no sampled token for {s.request_id!r}, which finished its tokens this step")
                s.append_token(sampled[s.request_id])
                if self._reached_length_limit(s):
                    self.finish(s.request_id, SequenceStatus.FINISHED_LENGTH)
                    finished.append(s)
        return finished

    # -- counters ---------------------------------------------------------------------------------------

    def snapshot(self) -> SchedulerStats:
        """Cheap per-step sample (O(running)); take it after ``update`` so waste excludes lookahead slots."""
        return SchedulerStats(self.kv.stats(), self.num_preemptions, len(self.waiting), len(self.running))

    def stats(self) -> dict[str, Any]:
        return self.snapshot().as_dict()

    # -- internals --------------------------------------------------------------------------------------

    def _fork(self, parent: Sequence) -> list[Sequence]:
        """Fork ``parent``'s pending candidates now that its prompt is computed; they join the running ones."""
        forks = self._forks.pop(parent.request_id, [])
        for fork in forks:
            self.kv.fork(parent, fork)
            fork.status = SequenceStatus.RUNNING
            self.running.append(fork)
        return forks

    def _pending_siblings(self, seq: Sequence) -> list[Sequence] | None:
        """The pending-fork list ``seq`` is in, if it is a fork not forked yet."""
        return next((forks for forks in self._forks.values() if seq in forks), None)

    def _num_seats(self) -> int:
        """Sequences running, plus the pending forks of running parents (they join once the prompt is done)."""
        pending = sum(len(f) for pid, f in self._forks.items() if self.requests[pid].status == SequenceStatus.RUNNING)
        return len(self.running) + pending

    def _schedule_running(self, seq: Sequence, step: _StepBudget) -> None:
        """A running sequence's next chunk (a decode, or a prefill chunk capped at the threshold), preempting
        the newest of the lowest priority when memory runs out."""
        if step.tokens == 0 or seq.status != SequenceStatus.RUNNING:  # preempted earlier in this step
            return
        num_new = min(seq.num_uncomputed_tokens, step.tokens, self.long_prefill_token_threshold)
        if self._allocate_or_preempt(seq, num_new, step):
            step.scheduled[seq.request_id] = ScheduledSeq(seq, num_new)
            step.tokens -= num_new

    def _admit_waiting(self, step: _StepBudget) -> None:
        if not self.waiting:
            return
        in_flight = self._blocks_in_flight()
        seats = self._num_seats()
        urgent = _urgent_priority(step)
        i = 0
        while i < len(self.waiting) and step.tokens > 0:
            seq = self.waiting[i]
            if step.preempted and seq.priority >= min(p.priority for p in step.preempted):
                break  # the queue is in priority order: nobody behind it may come in either
            if urgent is not None and seq.priority > urgent:
                break  # a step that prefills a request runs none of a lower priority (_yield_to_urgent_prefills)
            if step.holds_back(seq):
                break  # nor a step that decodes an exclusive one any prefill of a lower priority
            num_forks = len(self._forks.get(seq.request_id, ()))
            while seats + 1 + num_forks > self.max_num_seqs and self._preempt_lower(seq, step):
                seats = self._num_seats()
            if seats + 1 + num_forks > self.max_num_seqs:
                break  # FCFS, as for memory: a request with many candidates is not overtaken
            hits = self.kv.get_computed_blocks(seq)
            if self._waits_for_in_flight_prefix(seq, len(hits), in_flight):
                i += 1
                continue
            num_hit_tokens = len(hits) * self.kv.block_size
            num_new = min(seq.num_tokens - num_hit_tokens, step.tokens, self.long_prefill_token_threshold)
            while not self.kv.allocate_slots(seq, num_new, hits, num_free_to_keep=self._headroom(num_forks)):
                if not self._preempt_lower(seq, step):
                    return  # FCFS: later requests do not overtake one that is waiting for memory
                # A victim scheduled earlier in this step gave its tokens back.
                num_new = min(seq.num_tokens - num_hit_tokens, step.tokens, self.long_prefill_token_threshold)
            del self.waiting[i]
            seats = self._num_seats() + 1 + num_forks  # victims, if any, freed seats too
            seq.status = SequenceStatus.RUNNING
            seq.num_computed_tokens = num_hit_tokens
            seq.num_cached_tokens = num_hit_tokens
            self.running.append(seq)
            self._mark_in_flight(in_flight, seq)
            step.scheduled[seq.request_id] = ScheduledSeq(seq, num_new)
            step.tokens -= num_new
            if seq.num_uncomputed_tokens > 1:
                urgent = seq.priority if urgent is None else min(urgent, seq.priority)

    def _blocks_in_flight(self) -> dict[BlockHash, int]:
        """Hashes of full blocks that running sequences have yet to compute, with the highest priority (lowest
        value) of those computing each."""
        in_flight: dict[BlockHash, int] = {}
        for seq in self.running:
            if seq.num_uncomputed_tokens > 1:
                self._mark_in_flight(in_flight, seq)
        return in_flight

    def _mark_in_flight(self, in_flight: dict[BlockHash, int], seq: Sequence) -> None:
        for h in self._uncomputed_block_hashes(seq):
            in_flight[h] = min(in_flight.get(h, seq.priority), seq.priority)

    def _uncomputed_block_hashes(self, seq: Sequence) -> list[BlockHash]:
        return seq.block_hashes[seq.num_computed_tokens // self.kv.block_size :]

    def _waits_for_in_flight_prefix(self, seq: Sequence, num_hits: int, in_flight: dict[BlockHash, int]) -> bool:
        """Whether the next block this request would compute is being computed by a running one (of its
        priority or a higher one: a lower one may sit steps out for it, see ``_yield_to_urgent_prefills``).

        Then it waits (later requests may go first) and takes that block as a cache hit a step or two
        later, instead of computing it again: a burst of sessions sharing a system prompt computes it once.
        """
        if num_hits >= (seq.num_tokens - 1) // self.kv.block_size:
            return False  # nothing more it could hit
        if num_hits >= len(seq.block_hashes):
            return False
        computing = in_flight.get(seq.block_hashes[num_hits])
        return computing is not None and computing <= seq.priority

    def _yield_to_urgent_prefills(self, step: _StepBudget) -> None:
        """A step that prefills a request runs nothing of a lower priority (a larger value): a shopper's prompt
        then costs what it costs alone, not that plus a batch of the API's decodes (64 candidates of a long prompt
        doubled a shopper's first token). They sit out that step (usually one), and the tokens they give back go
        to the prefill's top-up. With one priority for everyone this does nothing.

        Only sequences that were running sit out (admission stops at a lower priority than a prefill's): the
        slots just allocated for them are given back, so each holds the blocks of what it has computed."""
        urgent = _urgent_priority(step)
        if urgent is None:
            return
        for request_id, item in list(step.scheduled.items()):
            if item.seq.priority > urgent:
                del step.scheduled[request_id]
                step.tokens += item.num_new_tokens
                self.kv.trim(item.seq)

    def _top_up_prefills(self, step: _StepBudget) -> None:
        """Give the budget left after every prefill got its first chunk to the oldest capped prefills (of the
        highest priority first)."""
        for item in sorted(step.scheduled.values(), key=lambda item: item.seq.priority):
            if step.tokens == 0:
                return
            extra = min(item.seq.num_uncomputed_tokens - item.num_new_tokens, step.tokens)
            # A top-up is a bonus: it neither preempts nor eats the headroom.
            total = item.num_new_tokens + extra
            if extra > 0 and self.kv.allocate_slots(item.seq, total, num_free_to_keep=self._headroom()):
                item.num_new_tokens += extra
                step.tokens -= extra

    def _headroom(self, num_forks: int = 0) -> int:
        """Blocks left free by admissions and top-ups: one per running sequence (pending forks included), for
        its next block, so that using spare memory now does not force a preemption at the next block boundary;
        when admitting a request with forks, one more per fork (its copy of the prompt's last block). None
        while nothing runs: a request that fits the pool must always be admitted then. Contiguous sequences
        never grow, so they need none."""
        seats = self._num_seats()
        return seats + num_forks if self.kv.allocator == "paged" and seats else 0

    def _allocate_or_preempt(self, seq: Sequence, num_new: int, step: _StepBudget) -> bool:
        while not self.kv.allocate_slots(seq, num_new):
            victim = self._pop_victim()
            self._preempt_in_step(victim, step)
            if victim is seq:
                return False
        return True

    def _pop_victim(self) -> Sequence:
        """Take out of ``running`` the sequence to preempt: the newest of the lowest priority (the largest
        value); with one priority for all, simply the newest."""
        worst = max(s.priority for s in self.running)
        index = max(i for i, s in enumerate(self.running) if s.priority == worst)
        return self.running.pop(index)

    def _preempt_lower(self, seq: Sequence, step: _StepBudget) -> bool:
        """Preempt one running sequence of a lower priority than ``seq`` (a larger value), so that it may come
        in; False when there is none."""
        if not self.running or max(s.priority for s in self.running) <= seq.priority:
            return False
        self._preempt_in_step(self._pop_victim(), step)
        return True

    def _preempt_in_step(self, victim: Sequence, step: _StepBudget) -> None:
        """Preempt ``victim`` (already out of ``running``); if it was scheduled this step, it gives its tokens back."""
        self._preempt(victim)
        step.preempted.append(victim)
        unscheduled = step.scheduled.pop(victim.request_id, None)
        if unscheduled is not None:
            step.tokens += unscheduled.num_new_tokens

    def _preempt(self, seq: Sequence) -> None:
        self.kv.free(seq)
        seq.num_computed_tokens = 0
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.waiting.insert(self._head_of(seq.priority), seq)
        self.num_preemptions += 1

    def _head_of(self, priority: int) -> int:
        """Where the head of ``priority`` is in the waiting queue (0 when everyone has one priority)."""
        return next((i for i, s in enumerate(self.waiting) if s.priority >= priority), len(self.waiting))

    def _enqueue(self, seq: Sequence) -> None:
        """A new request goes behind every waiting one of its priority or a higher one (lower value)."""
        if not self.waiting or self.waiting[-1].priority <= seq.priority:
            self.waiting.append(seq)
            return
        index = next(i for i, s in enumerate(self.waiting) if s.priority > seq.priority)
        self.waiting.insert(index, seq)

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


def _priority(seq: Sequence) -> int:
    return seq.priority


def _urgent_priority(step: _StepBudget) -> int | None:
    """The highest priority (lowest value) among the step's prefill chunks, None without one."""
    return min((item.seq.priority for item in step.scheduled.values() if item.seq.num_uncomputed_tokens > 1),
               default=None)
