import random
import zlib

import pytest

from benchmarks.trace_demo import shared_prompt_figure
from inference.core.config import EngineConfig
from inference.core.sampling_params import SamplingParams
from inference.core.scheduler import RequestTooLongError, Scheduler
from inference.core.stats import StatsAccumulator
from inference.core.sequence import Sequence, SequenceStatus

BS = 4


def make(num_blocks=32, threshold=None, **kw):
    kw.setdefault("block_size", BS)
    kw.setdefault("max_num_batched_tokens", 16)
    kw.setdefault("max_num_seqs", 8)
    kw.setdefault("max_model_len", 64)
    sched = Scheduler(EngineConfig(**kw), num_blocks)
    if threshold is not None:
        sched.long_prefill_token_threshold = threshold
    return sched


def seq(rid, n_or_tokens, max_tokens=100, **kw):
    # Distinct tokens per request id, so that only the tests that mean to share a prefix do.
    base = zlib.crc32(rid.encode()) % 100_000 * 1000
    tokens = list(range(base, base + n_or_tokens)) if isinstance(n_or_tokens, int) else n_or_tokens
    return Sequence(rid, tokens, SamplingParams(max_tokens=max_tokens), **kw)


def step(sched, token=7):
    out = sched.schedule()
    sched.update(out, {s.seq.request_id: token for s in out.scheduled if s.samples})
    return out


def plan(out):
    return [(s.seq.request_id, s.num_new_tokens) for s in out.scheduled]


def refs(sched):
    return [b.ref_cnt for b in sched.kv.pool.blocks]


def test_decodes_first_then_capped_prefill_chunks_then_top_up():
    sched = make(threshold=8)
    sched.add(seq("long", 40))
    assert plan(step(sched)) == [("long", 16)]  # alone: 8 in the first round, topped up to the budget
    sched.add(seq("short", 3))
    # The short question is admitted behind the long prompt and gets its whole prompt (and a token).
    assert plan(step(sched)) == [("long", 13), ("short", 3)]
    assert sched.get_request("short").num_output_tokens == 1
    # Its decode goes first; the long prompt finishes its last 11 tokens.
    assert plan(step(sched)) == [("short", 1), ("long", 11)]
    assert plan(step(sched)) == [("long", 1), ("short", 1)]  # two decodes: admission order


def test_budget_and_seq_cap_are_respected_and_requests_join_every_step():
    sched = make(max_num_seqs=3, max_num_batched_tokens=8, threshold=8)
    for i in range(5):
        sched.add(seq(f"r{i}", 3, max_tokens=2))
    assert plan(step(sched)) == [("r0", 3), ("r1", 3), ("r2", 2)]
    assert plan(step(sched)) == [("r0", 1), ("r1", 1), ("r2", 1)]  # cap of 3 running
    assert sched.num_waiting == 2
    # r0 and r1 finish (max_tokens=2); r2 decodes; r3 and r4 join in the same step.
    out = step(sched)
    assert plan(out) == [("r2", 1), ("r3", 3), ("r4", 3)]
    assert sched.get_request("r0") is None and out.num_batched_tokens == 7


def test_admission_keeps_a_free_block_per_running_sequence():
    sched = make(num_blocks=6, max_num_batched_tokens=64, threshold=64)
    a, b, c = seq("a", 8), seq("b", 8), seq("c", 4)
    for s in (a, b, c):
        sched.add(s)
    # c would fit in the 2 free blocks but would leave less than one per running sequence.
    assert plan(step(sched)) == [("a", 8), ("b", 8)]
    assert (a.block_table, b.block_table, c.block_table) == ([0, 1], [2, 3], [])
    assert plan(step(sched)) == [("a", 1), ("b", 1)]  # the headroom is what their decodes needed
    assert (a.block_table, b.block_table) == ([0, 1, 4], [2, 3, 5])


def test_preemption_takes_the_newest_and_requeues_it_at_the_head():
    sched = make(num_blocks=6, max_num_batched_tokens=64, threshold=64)
    a, b, c = seq("a", 8), seq("b", 8), seq("c", 4)
    for s in (a, b, c):
        sched.add(s)
    for _ in range(5):
        step(sched)
    assert (a.block_table, b.block_table) == ([0, 1, 4], [2, 3, 5]) and a.num_computed_tokens == 12
    out = sched.schedule()  # a and b both need a fourth block, none is free: b, the newer, goes
    assert [s.request_id for s in out.preempted] == ["b"]
    assert plan(out) == [("a", 1)]
    # b's blocks were freed tail first (5, 3, 2); a took the front one.
    assert a.block_table == [0, 1, 4, 5] and sched.kv.pool.eviction_order() == [3, 2]
    assert b.status == SequenceStatus.WAITING and b.num_computed_tokens == 0 and b.block_table == []
    assert b.num_tokens == 13 and b.output_token_ids == [7] * 5  # kept, recomputed as prompt
    assert list(sched.waiting) == [b, c]
    sched.update(out, {"a": 7})
    assert refs(sched) == [1, 1, 0, 0, 1, 1]
    assert sched.preempt("a")
    assert list(sched.waiting) == [a, b, c]
    assert sched.stats()["num_preemptions"] == 2
    assert not sched.preempt("c")  # not running


def test_the_newest_sequence_preempts_itself_when_it_cannot_grow():
    sched = make(num_blocks=4, max_num_batched_tokens=4, threshold=4)
    old, new = seq("old", 2), seq("new", 10)
    sched.add(old)
    sched.add(new)
    for _ in range(3):
        step(sched)
    assert (old.block_table, new.block_table) == ([0], [1, 2]) and new.num_computed_tokens == 8
    out = step(sched)  # old takes the last free block; new needs one for its last prompt tokens
    assert plan(out) == [("old", 1)]
    assert [s.request_id for s in out.preempted] == ["new"]
    assert old.block_table == [0, 3] and sched.waiting[0] is new
    assert sched.kv.pool.eviction_order() == [2, 1]


def test_preempted_request_gets_its_full_blocks_back_from_the_cache():
    sched = make(num_blocks=8, max_num_batched_tokens=64, threshold=64)
    s = seq("a", 10)
    sched.add(s)
    step(sched)
    step(sched)  # 12 tokens, 11 computed: blocks 0 and 1 full and cached
    full = s.block_table[:2]
    assert sched.preempt("a")
    assert refs(sched) == [0] * 8
    out = step(sched)
    assert plan(out) == [("a", 4)]  # 8 of 12 tokens from the cache
    assert s.num_cached_tokens == 8 and s.block_table[:2] == full


def test_abort_in_every_state_releases_blocks_in_the_same_call():
    sched = make(num_blocks=8, max_num_batched_tokens=8, threshold=8)
    running, mid_prefill, waiting = seq("run", 3), seq("mid", 20), seq("wait", 3)
    for s in (running, mid_prefill, waiting):
        sched.add(s)
    step(sched)  # run 3, mid 5
    assert mid_prefill.status == SequenceStatus.RUNNING and mid_prefill.num_computed_tokens == 5
    assert sched.abort("mid")
    assert mid_prefill.status == SequenceStatus.FINISHED_ABORTED and mid_prefill.block_table == []
    assert sched.abort("wait") and waiting.status == SequenceStatus.FINISHED_ABORTED
    step(sched)
    assert sched.preempt("run")
    assert sched.abort("run")  # preempted: waiting again, holds nothing
    assert sched.kv.pool.num_used_blocks == 0 and not sched.has_unfinished_requests()
    assert not sched.abort("run")  # unknown now: a no-op
    assert sched.stats()["num_waiting"] == sched.stats()["num_running"] == 0


def test_abort_between_schedule_and_update_is_skipped_by_update():
    sched = make()
    s = seq("a", 5)
    sched.add(s)
    out = sched.schedule()
    sched.abort("a")
    sched.update(out, {"a": 1})
    assert s.num_output_tokens == 0 and sched.kv.pool.num_used_blocks == 0


def test_prompts_that_can_never_fit_are_rejected_with_the_limit():
    sched = make(num_blocks=32, max_model_len=64)
    with pytest.raises(RequestTooLongError, match=r"at most 64 .*max_model_len"):
        sched.add(seq("a", 65))
    small_pool = make(num_blocks=5, max_model_len=64)  # 20 slots
    with pytest.raises(RequestTooLongError, match=r"at most 20 .*KV cache"):
        small_pool.add(seq("b", 21))
    small_pool.add(seq("c", 20))
    with pytest.raises(ValueError):
        small_pool.add(seq("c", 3))  # duplicate id
    with pytest.raises(ValueError):
        small_pool.add(seq("d", []))
    assert isinstance(RequestTooLongError("x"), ValueError)


def test_growth_past_max_model_len_finishes_with_length():
    sched = make(max_model_len=12)
    s = seq("a", 10, max_tokens=None)
    sched.add(s)
    for _ in range(5):
        step(sched)
    assert s.status == SequenceStatus.FINISHED_LENGTH
    assert s.num_tokens == 12 and s.num_computed_tokens == 11  # never a KV slot at position 12
    assert sched.kv.pool.num_used_blocks == 0


def test_prompt_of_exactly_max_model_len_yields_one_token():
    sched = make(max_model_len=12)
    s = seq("a", 12, max_tokens=None)
    sched.add(s)
    finished = sched.update(sched.schedule(), {"a": 5})
    assert finished == [s] and s.output_token_ids == [5] and s.status.finish_reason == "length"


def test_max_tokens_finishes_in_update():
    sched = make()
    s = seq("a", 3, max_tokens=2)
    sched.add(s)
    assert step(sched) and s.status == SequenceStatus.RUNNING
    step(sched)
    assert s.status == SequenceStatus.FINISHED_LENGTH and s.output_token_ids == [7, 7]


def test_missing_sample_for_a_finished_prefill_is_an_error():
    sched = make()
    sched.add(seq("a", 3))
    with pytest.raises(KeyError):
        sched.update(sched.schedule(), {})


def test_finish_rejects_unfinished_status():
    sched = make()
    sched.add(seq("a", 3))
    with pytest.raises(ValueError):
        sched.finish("a", SequenceStatus.RUNNING)


def test_shared_system_prompt_across_sessions_is_stored_once():
    sched = make(num_blocks=64, max_num_batched_tokens=64, threshold=64)
    system = list(range(500, 530))  # 30 tokens: 7 full blocks
    for i in range(4):
        sched.add(seq(f"s{i}", system + [i] * 5, max_tokens=10, session_id=f"c{i}"))
        step(sched)
    holders = {}
    for rid in ("s1", "s2", "s3"):
        s = sched.get_request(rid)
        assert s.num_cached_tokens == 28
        holders.setdefault(tuple(s.block_table[:7]), []).append(rid)
    assert len(holders) == 1
    stats = sched.stats()
    assert stats["prefix_cache_hit_tokens"] == 3 * 28
    assert stats["prefix_cache_query_tokens"] == 4 * 35


def test_a_request_waits_for_a_prefix_in_flight_instead_of_computing_it_twice():
    sched = make(num_blocks=64, max_num_batched_tokens=64, threshold=64)
    prompt = list(range(20))
    a, b, c = seq("a", prompt + [1]), seq("b", prompt + [2]), seq("c", 6)
    for s in (a, b, c):
        sched.add(s)
    # b's first block is being computed by a: b waits, c (unrelated) goes ahead of it.
    assert plan(step(sched)) == [("a", 21), ("c", 6)]
    assert list(sched.waiting) == [b]
    assert plan(step(sched)) == [("a", 1), ("c", 1), ("b", 1)]
    assert b.num_cached_tokens == 20 and b.block_table[:5] == a.block_table[:5]
    assert sched.stats()["prefix_cache_hit_tokens"] == 20


def test_a_request_does_not_wait_for_a_block_it_could_not_hit_anyway():
    sched = make(num_blocks=64, max_num_batched_tokens=64, threshold=64)
    a = seq("a", list(range(8)))
    whole = seq("whole", list(range(4)))  # its only block holds its last token: never a cache hit
    longer = seq("longer", list(range(4)) + [9])  # could hit a's first block once computed
    for s in (a, whole, longer):
        sched.add(s)
    assert plan(step(sched)) == [("a", 8), ("whole", 4)]
    assert list(sched.waiting) == [longer]


def trace(rng, n, max_prompt=60, max_out=30):
    return [(rng.randint(1, max_prompt), rng.randint(1, max_out)) for _ in range(n)]


def run_trace(allocator, requests, num_blocks=64):
    sched = make(num_blocks=num_blocks, max_model_len=128, max_num_batched_tokens=32, max_num_seqs=32,
                 kv_allocator=allocator, enable_prefix_caching=False)
    acc = StatsAccumulator()
    for i, (n_prompt, n_out) in enumerate(requests):
        sched.add(Sequence(f"r{i}", [i] * n_prompt, SamplingParams(max_tokens=n_out)))
    worst_excess = 0
    while sched.has_unfinished_requests():
        step(sched)
        snap = sched.snapshot()
        acc.observe(snap)
        # Paged bound: less than one block of waste per running sequence.
        worst_excess = max(worst_excess, snap.kv.num_slots_wasted - (BS - 1) * snap.num_running)
    return acc, worst_excess


def test_paged_waste_is_under_a_block_per_sequence_and_contiguous_is_far_larger():
    requests = trace(random.Random(3), 40)
    paged, paged_excess = run_trace("paged", requests)
    contiguous, _ = run_trace("contiguous", requests)
    assert paged_excess <= 0
    assert paged.avg_waste_fraction < 0.15
    assert contiguous.avg_waste_fraction > 0.5
    assert contiguous.avg_waste_slots > 5 * paged.avg_waste_slots
    # 64 blocks / 32 per reservation: two at a time; paged fits many more.
    assert contiguous.max_running == 2
    assert paged.max_running > 4 * contiguous.max_running


def test_stats_report_the_counters():
    sched = make(num_blocks=10)
    sched.add(seq("a", list(range(6))))
    sched.add(seq("b", list(range(6))))
    step(sched)  # b waits for a's first block
    step(sched)  # a decodes; b takes block 0 from the cache
    stats = sched.stats()
    assert stats["num_blocks_total"] == 10
    assert stats["num_blocks_used"] == 3 and stats["num_blocks_free"] == 7  # blocks 0 (shared), 1, 2
    assert stats["num_blocks_cached"] == 1
    assert stats["kv_cache_usage"] == pytest.approx(0.3)
    # a: 7 computed, b: 6 computed, block 0 counted once: 4 + 3 + 2 stored in 12 slots.
    assert stats["num_slots_allocated"] == 12 and stats["num_tokens_stored"] == 9
    assert stats["num_slots_wasted"] == 3
    assert stats["prefix_cache_query_tokens"] == 12 and stats["prefix_cache_hit_tokens"] == 4
    assert stats["prefix_cache_hit_rate"] == pytest.approx(4 / 12)
    assert stats["num_running"] == 2 and stats["num_waiting"] == 0 and stats["num_preemptions"] == 0


@pytest.mark.parametrize("burst", [False, True])
def test_trace_demo_system_prompt_is_computed_and_stored_once(burst):
    fig = shared_prompt_figure(num_sessions=8, system_len=100, burst=burst)
    # 100 tokens = 6 full blocks of 16; every later session takes all 96 tokens from the cache.
    assert fig["system_prompt_full_blocks"] == 6
    assert fig["distinct_blocks_holding_them"] == 6
    assert fig["turn1_hit_tokens"] == 7 * 96
    assert fig["sessions_computing_it"] == 1 and fig["its_tokens_computed"] == 96
    assert fig["turn2_hit_rate"] > 0.8


def run_to_completion(sched, s):
    sched.add(s)
    while not s.is_finished:
        step(sched)


@pytest.mark.parametrize("conversation", ["conv-1", None])
def test_a_conversation_survives_a_flood_of_one_off_requests(conversation):
    sched = make(num_blocks=16, max_num_batched_tokens=64, threshold=64)
    turn1 = seq("turn1", 20, max_tokens=4, session_id=conversation)
    run_to_completion(sched, turn1)  # 24 tokens, 23 computed: 5 full blocks cached
    for i in range(4):  # 4 blocks each: more than the 11 blocks the conversation leaves free
        run_to_completion(sched, seq(f"one-off-{i}", 15, max_tokens=1))
    turn2 = seq("turn2", turn1.token_ids + [1, 2, 3, 4], session_id=conversation)
    sched.add(turn2)
    step(sched)
    if conversation:
        assert turn2.num_cached_tokens == 20
    else:
        # Plain LRU: the older conversation's blocks were reused, the tail of its chain first.
        assert turn2.num_cached_tokens == 12


# -- parallel sampling: forks share the prompt's blocks, copy on write ---------------------------------------


def group(rid, tokens, n, max_tokens=100):
    """A request with n candidates: the parent and its n - 1 forks (the engine's naming)."""
    params = SamplingParams(max_tokens=max_tokens, n=n)
    return Sequence(rid, tokens, params), [Sequence(f"{rid}#{i}", tokens, params) for i in range(1, n)]


def fork_step(sched):
    """One step; candidate k of a request samples token 100 + k, so the candidates diverge."""
    out = sched.schedule()
    sampled = {}
    for item in out.scheduled:
        if item.samples:
            for k, s in enumerate((item.seq, *item.forks)):
                sampled[s.request_id] = 100 + k
    sched.update(out, sampled)
    return out


@pytest.mark.parametrize("caching", [True, False])
def test_candidates_share_every_prompt_block_after_one_prefill(caching):
    sched = make(num_blocks=16, max_num_batched_tokens=64, threshold=64, enable_prefix_caching=caching)
    parent, forks = group("a", list(range(10)), n=4)  # blocks of 4: two full, the third holds 2 tokens
    sched.add(parent, forks)
    assert sched.num_waiting == 1 and sched.pending_forks("a") == forks
    out = fork_step(sched)
    assert plan(out) == [("a", 10)] and out.scheduled[0].forks == forks  # one prefill for all four
    assert out.blocks_to_copy == []
    candidates = [parent, *forks]
    assert sched.running == candidates and sched.pending_forks("a") == []
    assert [c.output_token_ids for c in candidates] == [[100], [101], [102], [103]]
    # Every candidate holds the prompt's three blocks, the partial one included, once each.
    assert all(c.block_table == parent.block_table and c.num_computed_tokens == 10 for c in candidates)
    prompt_blocks = list(parent.block_table)
    assert sched.kv.pool.num_used_blocks == 3
    assert [sched.kv.pool.blocks[b].ref_cnt for b in prompt_blocks] == [4, 4, 4]
    stats = sched.stats()
    assert stats["num_tokens_stored"] == 10 and stats["num_slots_wasted"] == 2  # the partial block once
    # Each candidate writes position 10 into the shared partial block: the first three copy it, the last
    # one, by then its only holder, writes in place.
    out = fork_step(sched)
    assert plan(out) == [("a", 1), ("a#1", 1), ("a#2", 1), ("a#3", 1)]
    assert [src for src, _ in out.blocks_to_copy] == [prompt_blocks[2]] * 3
    copies = [dst for _, dst in out.blocks_to_copy]
    assert [c.block_table[2] for c in candidates] == copies + [prompt_blocks[2]]
    assert [c.block_table[:2] for c in candidates] == [prompt_blocks[:2]] * 4
    # Pool: the prompt's blocks once plus one new block per candidate that copied.
    assert sched.kv.pool.num_used_blocks == 3 + 3
    assert refs(sched)[prompt_blocks[0]] == refs(sched)[prompt_blocks[1]] == 4
    assert all(refs(sched)[c.block_table[2]] == 1 for c in candidates)
    # Later decodes write blocks that each candidate holds alone: no more copies.
    for _ in range(3):
        assert fork_step(sched).blocks_to_copy == []
    assert sched.kv.pool.num_used_blocks == 2 + 4 + 4  # shared full blocks, 4 tails, 4 fresh blocks
    for c in candidates:
        assert sched.finish(c.request_id, SequenceStatus.FINISHED_ABORTED)
    assert sched.kv.pool.num_used_blocks == 0 and refs(sched) == [0] * 16


def test_a_prompt_of_whole_blocks_is_shared_without_any_copy():
    sched = make(num_blocks=16, max_num_batched_tokens=64, threshold=64, enable_prefix_caching=False)
    parent, forks = group("a", list(range(8)), n=3)
    sched.add(parent, forks)
    fork_step(sched)
    assert sched.kv.pool.num_used_blocks == 2
    out = fork_step(sched)  # position 8 opens a new block for each candidate
    assert out.blocks_to_copy == [] and sched.kv.pool.num_used_blocks == 2 + 3
    assert all(c.block_table[:2] == parent.block_table[:2] for c in forks)


def test_candidates_finishing_at_the_fork_release_only_their_references():
    sched = make(num_blocks=8, max_num_batched_tokens=64, threshold=64)
    parent, forks = group("a", list(range(6)), n=3, max_tokens=1)
    sched.add(parent, forks)
    out = sched.schedule()
    finished = sched.update(out, {"a": 1, "a#1": 2, "a#2": 3})
    assert finished == [parent, *forks] and all(s.status == SequenceStatus.FINISHED_LENGTH for s in finished)
    assert sched.kv.pool.num_used_blocks == 0 and not sched.has_unfinished_requests()


def test_a_preempted_candidate_is_recomputed_alone_and_its_siblings_keep_the_prompt():
    sched = make(num_blocks=16, max_num_batched_tokens=64, threshold=64, enable_prefix_caching=False)
    parent, forks = group("a", list(range(10)), n=3)
    sched.add(parent, forks)
    fork_step(sched)
    fork_step(sched)  # two candidates copied the partial block
    victim = forks[0]
    prompt_full = list(parent.block_table[:2])
    assert sched.preempt(victim.request_id)
    assert victim.block_table == [] and victim.num_computed_tokens == 0
    assert [refs(sched)[b] for b in prompt_full] == [2, 2]  # the others still hold the prompt
    out = fork_step(sched)
    # The victim recomputes its prompt and its two tokens itself (no cache, no fork), then samples.
    assert ("a#1", 12) in plan(out) and out.blocks_to_copy == []
    assert victim.output_token_ids == [101, 100, 100] and victim.num_computed_tokens == 12
    assert not set(victim.block_table) & set(parent.block_table)


def test_finishing_a_parent_before_its_prompt_is_done_hands_its_forks_on():
    sched = make(num_blocks=16, max_num_batched_tokens=4, threshold=4)
    parent, forks = group("a", list(range(10)), n=3)
    sched.add(parent, forks)
    fork_step(sched)  # 4 of 10 prompt tokens
    assert sched.finish("a", SequenceStatus.FINISHED_ABORTED)
    assert list(sched.waiting) == [forks[0]] and sched.pending_forks("a#1") == [forks[1]]
    assert sched.finish("a#2", SequenceStatus.FINISHED_ABORTED)  # a pending fork: holds nothing
    assert sched.pending_forks("a#1") == []
    while forks[0].num_output_tokens == 0:
        fork_step(sched)
    assert sched.kv.pool.num_used_blocks == 3 and sched.running == [forks[0]]


def test_a_request_takes_a_seat_for_each_candidate_at_admission():
    sched = make(num_blocks=32, max_num_seqs=4, max_num_batched_tokens=64, threshold=64)
    sched.add(seq("solo", 5))
    parent, forks = group("g", list(range(6)), n=4)
    sched.add(parent, forks)
    sched.add(seq("late", 3))
    out = fork_step(sched)
    assert plan(out) == [("solo", 5)]  # 1 + 4 seats > 4: g waits, and "late" does not overtake it
    with pytest.raises(ValueError, match="max_num_seqs"):
        sched.add(*group("big", [1, 2], n=5))
    assert sched.get_request("big") is None and sched.get_request("big#1") is None
    assert sched.finish("solo", SequenceStatus.FINISHED_STOPPED)
    out = fork_step(sched)
    assert plan(out) == [("g", 6)] and len(sched.running) == 4


def test_forks_must_be_fresh_sequences_of_the_same_prompt():
    sched = make()
    parent, _ = group("a", [1, 2, 3], n=1)
    with pytest.raises(ValueError):
        sched.add(parent, [Sequence("a#1", [1, 2, 4])])
    with pytest.raises(ValueError):
        sched.add(parent, [Sequence("a#1", [1, 2, 3], cache_salt="other")])
    with pytest.raises(ValueError):
        sched.add(parent, [Sequence("a", [1, 2, 3])])  # duplicate id
    assert not sched.has_unfinished_requests()


# --- priorities (vLLM's: lower first); the chat runs at 0, the /v1 API at 1 (issue 39, item 11) ------------------


def test_the_waiting_queue_is_in_priority_order_and_a_preempted_one_heads_its_own_priority():
    sched = make(num_blocks=32, max_num_seqs=1, max_num_batched_tokens=64, threshold=64)
    api1, api2 = seq("api1", 4, priority=1), seq("api2", 4, priority=1)
    sched.add(api1)
    step(sched)  # api1 runs and holds the only seat
    sched.add(api2)
    chat1, chat2 = seq("chat1", 4), seq("chat2", 4)
    sched.add(chat1)
    assert list(sched.waiting) == [chat1, api2]  # the chat's request goes before the API's queued earlier
    out = step(sched)  # no seat: chat1 takes api1's, which goes to the head of the API's requests
    assert plan(out) == [("chat1", 4)] and [s.request_id for s in out.preempted] == ["api1"]
    sched.add(chat2)
    assert list(sched.waiting) == [chat2, api1, api2]
    assert plan(step(sched)) == [("chat1", 1)]  # one priority: chat2 waits its turn, nobody preempted


def test_a_chat_request_takes_a_seat_from_a_running_api_request_with_every_seat():
    """The issue: n = best_of = max_num_seqs held every seat; a shopper waited for the whole request."""
    sched = make(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=64, threshold=64)
    parent, forks = group("api", list(range(6)), n=4)
    for s in (parent, *forks):
        s.priority = 1
    sched.add(parent, forks)
    fork_step(sched)
    fork_step(sched)
    assert len(sched.running) == 4
    sched.add(seq("chat", 5))
    out = fork_step(sched)
    assert [s.request_id for s in out.preempted] == ["api#3"]  # the newest of the lowest priority
    # The API's decodes sit out the step that prefills the chat's prompt, then run with its decode.
    assert plan(out) == [("chat", 5)]
    assert [s.request_id for s in sched.running] == ["api", "api#1", "api#2", "chat"]
    assert plan(fork_step(sched)) == [("chat", 1), ("api", 1), ("api#1", 1), ("api#2", 1)]
    # Once the chat's request is done, the preempted candidate comes back with its 8 tokens (6 + 2 sampled):
    # its first block from the cache, the other 4 recomputed, and it samples its third.
    sched.finish("chat", SequenceStatus.FINISHED_STOPPED)
    out = fork_step(sched)
    assert ("api#3", 4) in plan(out) and sched.get_request("api#3").num_output_tokens == 3


def test_memory_goes_to_the_higher_priority_first():
    """Out of blocks: a growing chat decode preempts the API's sequence even though the API's is older (without
    priorities the newest goes), and a waiting chat request preempts an API one to be admitted."""
    sched = make(num_blocks=6, max_num_batched_tokens=64, threshold=64)
    api, chat = seq("api", 8, priority=1), seq("chat", 8)
    sched.add(api)
    step(sched)
    sched.add(chat)
    for _ in range(5):  # the chat's prefill (the API's decode sits it out), then four decodes of both
        step(sched)
    assert api.num_computed_tokens == chat.num_computed_tokens == 12 and sched.kv.pool.num_free_blocks == 0
    out = sched.schedule()  # both need a block at once; none is free
    assert [s.request_id for s in out.preempted] == ["api"] and plan(out) == [("chat", 1)]
    sched.update(out, {"chat": 7})
    # A new chat request that does not fit while the API's sequence holds memory takes it.
    sched2 = make(num_blocks=4, max_num_batched_tokens=64, threshold=64)
    big = seq("api-big", 12, priority=1)
    sched2.add(big)
    step(sched2)
    sched2.add(seq("chat-new", 8))
    out = step(sched2)
    assert [s.request_id for s in out.preempted] == ["api-big"] and plan(out) == [("chat-new", 8)]
    assert big.status == SequenceStatus.WAITING and big.block_table == []


def test_a_lower_priority_request_never_preempts_a_higher_one():
    sched = make(num_blocks=4, max_num_batched_tokens=64, threshold=64)
    sched.add(seq("chat", 12))
    step(sched)
    sched.add(seq("api", 8, priority=1))
    out = step(sched)
    assert out.preempted == [] and plan(out) == [("chat", 1)]  # the API request waits for memory
    assert [s.request_id for s in sched.waiting] == ["api"]


def test_a_plan_decoding_holds_back_lower_prefills_but_not_their_decodes():
    """A plan (priority -1, below ``exclusive_decode_below``) is a few tokens a shopper's first words wait on:
    while it decodes, the chat's prompts (0) wait, mid-prefill or queued, and the chat's decodes run beside it."""
    sched = make(num_blocks=64, max_num_batched_tokens=16, threshold=16)
    sched.add(seq("chat-a", 4))
    step(sched)  # chat-a decodes from now on
    sched.add(seq("chat-long", 40))
    assert plan(step(sched)) == [("chat-a", 1), ("chat-long", 15)]
    sched.add(seq("plan", 3, priority=-1))
    assert plan(step(sched)) == [("plan", 3)]  # its prefill: everyone of a lower priority sits it out
    sched.add(seq("chat-b", 5))
    for _ in range(3):  # the plan decodes: chat-a's decode rides along, chat-long and chat-b wait
        assert plan(step(sched)) == [("plan", 1), ("chat-a", 1)]
    assert sched.get_request("chat-long").num_computed_tokens == 15 and list(sched.waiting) == [sched.get_request("chat-b")]
    sched.finish("plan", SequenceStatus.FINISHED_STOPPED)
    assert plan(step(sched)) == [("chat-a", 1), ("chat-long", 15)]  # the budget's 15 left after chat-a's decode
    assert plan(step(sched)) == [("chat-a", 1), ("chat-long", 10), ("chat-b", 5)]


def test_priorities_at_or_above_exclusive_decode_below_share_steps():
    """The chat (0) and the /v1 API (1) by default: a chat decode does not hold back the API's prefill."""
    sched = make(num_blocks=64, max_num_batched_tokens=16, threshold=16)
    sched.add(seq("chat", 4))
    step(sched)
    sched.add(seq("api", 6, priority=1))
    assert plan(step(sched)) == [("chat", 1), ("api", 6)]
    exclusive = make(num_blocks=64, max_num_batched_tokens=16, threshold=16, exclusive_decode_below=1)
    exclusive.add(seq("chat", 4))
    step(exclusive)
    exclusive.add(seq("api", 6, priority=1))
    assert plan(step(exclusive)) == [("chat", 1)]
