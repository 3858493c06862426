import random
import zlib

import pytest

from inference.bench.trace_demo import shared_prompt_figure
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
