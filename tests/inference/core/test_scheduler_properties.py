"""Random add / step / finish / abort / preempt runs against the scheduler, checking its invariants.

Besides the block accounting, a shadow KV cache records which (cache salt, token prefix) each slot was
computed for; every computed position of every running sequence must read back its own key. That is
what prefix caching, sharing, eviction and preemption must never break. Parallel sampling adds forked
candidates sharing a prompt's blocks, the partial one included: the shadow applies each step's copies on
write, so a candidate that wrote into a block its siblings still read would show.
"""

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from inference.core.config import EngineConfig
from inference.core.kv_cache_manager import cdiv
from inference.core.sampling_params import SamplingParams
from inference.core.scheduler import RequestTooLongError, Scheduler
from inference.core.sequence import Sequence, SequenceStatus

BS = 4
MAX_MODEL_LEN = 32
# Small alphabets make sampled tokens collide, so requests share blocks they were not built to share.
TOKENS = st.integers(0, 3)
PREFIXES = [[], [9] * 5, [9] * 5 + [8, 7, 6, 5, 4, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9]]
SALTS = [None, "store-a", "store-b"]
CONVERSATIONS = [None, None, "conv-1", "conv-2"]


def slot(seq, pos):
    return seq.block_table[pos // BS] * BS + pos % BS


def kv_key(seq, pos):
    return seq.cache_salt, tuple(seq.token_ids[: pos + 1])


class SchedulerMachine(RuleBasedStateMachine):
    @initialize(
        num_blocks=st.integers(4, 32),
        budget=st.integers(2, 32),
        max_num_seqs=st.integers(2, 6),
        threshold=st.integers(1, 16),
        allocator=st.sampled_from(["paged", "contiguous"]),
        caching=st.booleans(),
    )
    def setup(self, num_blocks, budget, max_num_seqs, threshold, allocator, caching):
        config = EngineConfig(
            block_size=BS,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=budget,
            max_model_len=MAX_MODEL_LEN,
            enable_prefix_caching=caching,
            kv_allocator=allocator,
        )
        self.sched = Scheduler(config, num_blocks)
        self.sched.long_prefill_token_threshold = threshold
        self.shadow: dict[int, tuple] = {}
        self.histories: list[tuple[list[int], str | None, str | None]] = []  # finished turns, for next turns
        self.prompts: list[tuple[list[int], str | None, str | None]] = []  # accepted prompts, for retries
        self.next_id = 0

    # -- rules ----------------------------------------------------------------------------------------------

    @rule(
        prefix=st.sampled_from(PREFIXES),
        suffixes=st.lists(st.lists(TOKENS, max_size=10), min_size=1, max_size=4),
        salt=st.sampled_from(SALTS),
        conversation=st.sampled_from(CONVERSATIONS),
        max_tokens=st.integers(1, 16),
        priority=st.sampled_from([0, 0, 1]),
    )
    def add(self, prefix, suffixes, salt, conversation, max_tokens, priority):
        """A burst of requests sharing a prefix (a store's system prompt), arriving together (the chat's at
        priority 0, the API's at 1)."""
        for suffix in suffixes:
            self._add(prefix + suffix, salt, conversation, max_tokens, priority=priority)

    @rule(
        prefix=st.sampled_from(PREFIXES),
        suffix=st.lists(TOKENS, max_size=10),
        salt=st.sampled_from(SALTS),
        max_tokens=st.integers(1, 12),
        num_forks=st.integers(1, 3),
        priority=st.sampled_from([0, 1, 1]),
    )
    def add_parallel(self, prefix, suffix, salt, max_tokens, num_forks, priority):
        """A request sampling several candidates from one prefill (n > 1)."""
        self._add(prefix + suffix, salt, None, max_tokens, num_forks, priority)

    @precondition(lambda self: self.histories)
    @rule(pick=st.randoms(use_true_random=False), message=st.lists(TOKENS, min_size=1, max_size=6))
    def next_turn(self, pick, message):
        """A conversation comes back: its whole history plus a new message."""
        history, salt, conversation = pick.choice(self.histories)
        self._add(history + message, salt, conversation, 6)

    @precondition(lambda self: self.prompts)
    @rule(pick=st.randoms(use_true_random=False))
    def repeat(self, pick):
        """The same prompt again (a retry or regenerate): every full block may be cached."""
        tokens, salt, conversation = pick.choice(self.prompts)
        self._add(tokens, salt, conversation, 3)

    @rule(seed=st.integers(0, 2**32 - 1), num_steps=st.integers(1, 3))
    def step(self, seed, num_steps):
        rng = random.Random(seed)
        for _ in range(num_steps):
            self._step(rng)
            self.running_sequences_read_their_own_kv()

    # One rule for the three interruptions, so that they do not outnumber arrivals and steps.
    @precondition(lambda self: self.sched.requests)
    @rule(pick=st.randoms(use_true_random=False), action=st.sampled_from(["finish", "abort", "preempt"]))
    def interrupt(self, pick, action):
        seq = pick.choice(list(self.sched.requests.values()))
        if action == "preempt":
            was_running = seq.status == SequenceStatus.RUNNING
            assert self.sched.preempt(seq.request_id) == was_running
            assert seq.status == SequenceStatus.WAITING and seq.block_table == []
            # The head of its own priority (of the whole queue with one priority).
            assert not was_running or next(s for s in self.sched.waiting if s.priority == seq.priority) is seq
            return
        pool = self.sched.kv.pool
        exclusive = sum(1 for i in seq.block_table if pool.blocks[i].ref_cnt == 1)
        used_before = pool.num_used_blocks
        if action == "abort":
            assert self.sched.abort(seq.request_id)
            assert seq.status == SequenceStatus.FINISHED_ABORTED
        else:
            assert self.sched.finish(seq.request_id, SequenceStatus.FINISHED_STOPPED)
            self._finished(seq)
        # Released in the same call; blocks shared with others stay in use.
        assert seq.block_table == [] and pool.num_used_blocks == used_before - exclusive
        assert self.sched.get_request(seq.request_id) is None

    def teardown(self):
        """Run everything left to completion: every block must come back."""
        if not hasattr(self, "sched"):
            return
        rng = random.Random(0)
        for _ in range(2000):
            if not self.sched.has_unfinished_requests():
                break
            self._step(rng)
        assert not self.sched.has_unfinished_requests()
        assert self.sched.kv.pool.num_used_blocks == 0
        self.blocks_are_accounted_for()
        self.prefix_cache_map_is_consistent()

    # -- helpers --------------------------------------------------------------------------------------------

    def _add(self, tokens, salt, conversation, max_tokens, num_forks=0, priority=0):
        params = SamplingParams(max_tokens=max_tokens, n=1 + num_forks)
        rid = f"r{self.next_id}"
        seq = Sequence(rid, tokens, params, conversation, salt, priority=priority)
        forks = [Sequence(f"{rid}#{i}", tokens, params, conversation, salt, priority=priority)
                 for i in range(1, 1 + num_forks)]
        self.next_id += 1
        if 0 < len(tokens) <= self.sched.max_seq_len and 1 + num_forks <= self.sched.max_num_seqs:
            self.sched.add(seq, forks)
            assert self.sched.pending_forks(rid) == forks
            if len(self.prompts) < 20:
                self.prompts.append((list(tokens), salt, conversation))
        else:
            with pytest.raises(ValueError):
                self.sched.add(seq, forks)
            if tokens and len(tokens) > self.sched.max_seq_len:
                with pytest.raises(RequestTooLongError):
                    self.sched.add(seq, forks)
            assert self.sched.get_request(rid) is None

    def _step(self, rng):
        sched = self.sched
        decode_ids = {s.request_id for s in sched.running if s.num_uncomputed_tokens == 1}
        had_work = sched.has_unfinished_requests()
        out = sched.schedule()
        items = out.scheduled
        # Progress: some work is scheduled whenever there is any.
        assert bool(items) == had_work
        assert out.num_batched_tokens <= sched.max_num_batched_tokens
        assert len(items) <= sched.max_num_seqs and len(sched.running) <= sched.max_num_seqs
        assert len({i.seq.request_id for i in items}) == len(items)
        # Decodes first: within a priority, every scheduled decode comes before every prefill chunk.
        for priority in {i.seq.priority for i in items}:
            kinds = [i.seq.request_id in decode_ids for i in items if i.seq.priority == priority]
            assert kinds == sorted(kinds, reverse=True)
        # A step that prefills a request (more than one token to compute) runs nothing of a lower priority.
        prefills = [i.seq.priority for i in items if i.seq.num_uncomputed_tokens > 1]
        assert not prefills or all(i.seq.priority <= min(prefills) for i in items)
        # Copies on write land before the step's writes; each destination is a fresh block of one sequence.
        pool = sched.kv.pool
        dsts = [d for _, d in out.blocks_to_copy]
        assert len(set(dsts)) == len(dsts)
        holders = Counter(i for s in sched.running for i in s.block_table)
        copied = {}
        for src, dst in out.blocks_to_copy:
            assert src != dst and holders[dst] == 1 and pool.blocks[dst].ref_cnt == 1
            copied.update({dst * BS + o: self.shadow.get(src * BS + o) for o in range(BS)})
        self.shadow.update(copied)
        for item in items:
            seq = item.seq
            assert seq.status == SequenceStatus.RUNNING and item.num_new_tokens >= 1
            end = seq.num_computed_tokens + item.num_new_tokens
            assert end <= seq.num_tokens and len(seq.block_table) * BS >= end
            # What attention reads: the cached context must be this sequence's own.
            for pos in range(seq.num_computed_tokens):
                assert self.shadow.get(slot(seq, pos)) == kv_key(seq, pos)
            for pos in range(seq.num_computed_tokens, end):
                # Only this sequence sees what it writes (a shared block would have been copied first).
                assert pool.blocks[seq.block_table[pos // BS]].ref_cnt == 1
                self.shadow[slot(seq, pos)] = kv_key(seq, pos)
            if item.forks:
                assert item.samples and item.forks == sched.pending_forks(seq.request_id)
        for seq in out.preempted:
            assert seq.status == SequenceStatus.WAITING and seq.block_table == []
        sampled = {s.request_id: rng.randrange(4) for i in items if i.samples for s in (i.seq, *i.forks)}
        forked = [f for i in items if i.samples for f in i.forks]
        for seq in sched.update(out, sampled):
            assert seq.status == SequenceStatus.FINISHED_LENGTH
            self._finished(seq)
        # Forks hold their parent's prompt blocks (one prefill) and joined the running ones, within the seats.
        assert len(sched.running) <= sched.max_num_seqs
        for fork in forked:
            assert fork.num_output_tokens == 1
            assert fork.status == SequenceStatus.RUNNING or fork.status == SequenceStatus.FINISHED_LENGTH

    def _finished(self, seq):
        if len(self.histories) < 20:
            self.histories.append((list(seq.token_ids), seq.cache_salt, seq.session_id))

    # -- invariants -----------------------------------------------------------------------------------------

    @invariant()
    def blocks_are_accounted_for(self):
        pool = self.sched.kv.pool
        free_ids = [b.block_id for q in (pool.transient_queue, pool.retained_queue) for b in q]
        assert len(free_ids) == len(set(free_ids)) == pool.num_free_blocks
        used_ids = {b.block_id for b in pool.blocks if b.ref_cnt > 0}
        assert not used_ids & set(free_ids)
        assert len(used_ids) + len(free_ids) == pool.num_blocks
        assert all(b.ref_cnt >= 0 for b in pool.blocks)

    @invariant()
    def ref_counts_match_block_tables(self):
        # Pending forks hold nothing; forked ones count once per holder, the shared prompt blocks included.
        held = Counter(i for seq in self.sched.running for i in seq.block_table)
        assert {b.block_id: b.ref_cnt for b in self.sched.kv.pool.blocks if b.ref_cnt} == dict(held)
        for seq in self.sched.running:
            assert len(set(seq.block_table)) == len(seq.block_table)

    @invariant()
    def queues_and_allocation_are_consistent(self):
        sched, kv = self.sched, self.sched.kv
        running_ids = {s.request_id for s in sched.running}
        waiting_ids = {s.request_id for s in sched.waiting}
        pending = [f for s in list(sched.running) + list(sched.waiting) for f in sched.pending_forks(s.request_id)]
        pending_ids = {f.request_id for f in pending}
        assert len(pending_ids) == len(pending) and not pending_ids & (running_ids | waiting_ids)
        assert not running_ids & waiting_ids and running_ids | waiting_ids | pending_ids == set(sched.requests)
        priorities = [s.priority for s in sched.waiting]
        assert priorities == sorted(priorities)  # the waiting queue is in priority order
        for seq in list(sched.waiting) + pending:
            assert seq.status == SequenceStatus.WAITING and seq.block_table == [] and seq.num_computed_tokens == 0
        for seq in sched.running:
            assert seq.status == SequenceStatus.RUNNING and 1 <= seq.num_uncomputed_tokens
            assert seq.num_tokens <= sched.max_seq_len
            # Never over-allocated: exactly the policy's blocks for what is computed (a contiguous fork
            # reserves the rest of its length on its first step; until then it holds the shared blocks only).
            computed = seq.num_computed_tokens
            assert len(seq.block_table) in (kv.blocks_needed(computed), cdiv(computed, BS))
        # Seats: the forks waiting for a running parent's prompt are counted as running.
        pending_of_running = sum(len(sched.pending_forks(s.request_id)) for s in sched.running)
        assert len(sched.running) + pending_of_running <= sched.max_num_seqs

    @invariant()
    def prefix_cache_map_is_consistent(self):
        pool = self.sched.kv.pool
        hashed = [b for b in pool.blocks if b.block_hash is not None]
        assert {id(b) for b in hashed} == {id(b) for b in pool.cached_blocks.values()}
        assert len(hashed) == len(pool.cached_blocks)
        for block_hash, block in pool.cached_blocks.items():
            assert block.block_hash == block_hash
        if not self.sched.kv.enable_prefix_caching:
            assert not hashed
        for seq in self.sched.running:
            for i, block_id in enumerate(seq.block_table):
                block_hash = pool.blocks[block_id].block_hash
                if block_hash is not None:
                    assert (i + 1) * BS <= seq.num_computed_tokens
                    assert block_hash == seq.block_hashes[i]

    @invariant()
    def running_sequences_read_their_own_kv(self):
        for seq in self.sched.running:
            for pos in range(seq.num_computed_tokens):
                assert self.shadow.get(slot(seq, pos)) == kv_key(seq, pos)

    @invariant()
    def waste_counters_are_exact_and_bounded_for_paged(self):
        stats = self.sched.snapshot()
        filled: dict[int, int] = {}  # tokens held by each block in use, shared blocks once
        for seq in self.sched.running:
            for i, block_id in enumerate(seq.block_table):
                tokens = min(max(seq.num_computed_tokens - i * BS, 0), BS)
                filled[block_id] = max(filled.get(block_id, 0), tokens)
        assert stats.kv.num_tokens_stored == sum(filled.values())
        assert stats.kv.num_slots_allocated == len(filled) * BS
        if self.sched.kv.allocator == "paged":
            assert stats.kv.num_slots_wasted <= (BS - 1) * stats.num_running
        if not self.sched.requests:
            assert stats.kv.num_blocks_used == 0


SchedulerMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.slow
class TestSchedulerProperties(SchedulerMachine.TestCase):
    pass
