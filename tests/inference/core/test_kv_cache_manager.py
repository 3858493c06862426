import pytest
import torch

from inference.core.kv_cache_manager import KVCacheManager, build_block_table_tensor
from inference.core.sequence import Sequence

BS = 4


def manager(num_blocks=16, max_model_len=64, **kw):
    return KVCacheManager(num_blocks, BS, max_model_len, **kw)


def admit(kv, seq, num_new=None):
    """Admit like the scheduler: take prefix hits, allocate the rest, mark the hits computed."""
    hits = kv.get_computed_blocks(seq)
    num_hit = len(hits) * BS
    num_new = seq.num_tokens - num_hit if num_new is None else num_new
    assert kv.allocate_slots(seq, num_new, hits)
    seq.num_computed_tokens = num_hit
    return num_hit, num_new


def compute(kv, seq, num_new):
    """What update() does after the model ran ``num_new`` tokens."""
    before = seq.num_computed_tokens
    seq.num_computed_tokens += num_new
    kv.cache_blocks(seq, before)


def run_prompt(kv, seq):
    num_hit, num_new = admit(kv, seq)
    compute(kv, seq, num_new)
    return num_hit


def decode(kv, seq, token):
    seq.append_token(token)
    assert kv.allocate_slots(seq, 1)
    compute(kv, seq, 1)


def refs(kv):
    return [b.ref_cnt for b in kv.pool.blocks]


def test_paged_allocation_grows_one_block_per_block_size_tokens():
    kv = manager(num_blocks=8)
    seq = Sequence("a", list(range(6)))
    admit(kv, seq)
    assert seq.block_table == [0, 1]
    compute(kv, seq, 6)
    decode(kv, seq, 100)  # position 6
    decode(kv, seq, 101)  # position 7: block 1 is now full and cached
    assert seq.block_table == [0, 1] and kv.pool.blocks[1].block_hash is not None
    seq.append_token(102)
    assert kv.allocate_slots(seq, 1)  # position 8 opens block 2
    assert seq.block_table == [0, 1, 2]
    assert refs(kv) == [1, 1, 1, 0, 0, 0, 0, 0]
    assert kv.pool.eviction_order() == [3, 4, 5, 6, 7]


def test_allocation_is_all_or_nothing():
    kv = manager(num_blocks=3)
    a, b = Sequence("a", list(range(8))), Sequence("b", list(range(50, 58)))
    admit(kv, a)
    assert not kv.allocate_slots(b, 8)
    assert b.block_table == [] and kv.pool.num_free_blocks == 1 and refs(kv) == [1, 1, 0]


def test_prefix_hit_shares_blocks_and_never_covers_the_last_token():
    kv = manager()
    first = Sequence("a", list(range(10)))  # blocks [0-3] [4-7] [8,9]
    assert run_prompt(kv, first) == 0
    assert first.block_table == [0, 1, 2]
    second = Sequence("b", list(range(8)) + [77, 78])
    num_hit, num_new = admit(kv, second)
    assert (num_hit, num_new) == (8, 2)
    assert second.block_table == [0, 1, 3]
    assert refs(kv)[:4] == [2, 2, 1, 1]
    # A prompt that is exactly the cached blocks still computes its last block.
    exact = Sequence("c", list(range(8)))
    assert [b.block_id for b in kv.get_computed_blocks(exact)] == [0]
    stats = kv.stats()
    assert stats.prefix_cache_query_tokens == 20 and stats.prefix_cache_hit_tokens == 8


def test_cache_salt_isolates_stores():
    kv = manager()
    run_prompt(kv, Sequence("a", list(range(9)), cache_salt="store-1"))
    assert kv.get_computed_blocks(Sequence("b", list(range(9)), cache_salt="store-2")) == []
    assert kv.get_computed_blocks(Sequence("c", list(range(9)))) == []
    same = kv.get_computed_blocks(Sequence("d", list(range(9)), cache_salt="store-1"))
    assert [b.block_id for b in same] == [0, 1]


def test_free_keeps_hashes_so_a_returning_request_hits_and_the_tail_is_evicted_first():
    kv = manager(num_blocks=6)
    seq = Sequence("a", list(range(10)))
    run_prompt(kv, seq)
    kv.free(seq)
    assert seq.block_table == [] and refs(kv) == [0] * 6
    # Partial block 2 first (nothing to reuse), then free 3-5, then the chain tail before its head.
    assert kv.pool.eviction_order() == [2, 3, 4, 5, 1, 0]
    again = Sequence("a2", list(range(10)))
    assert admit(kv, again) == (8, 2)
    assert again.block_table == [0, 1, 2]  # 2 was the front of the free queue
    assert kv.pool.eviction_order() == [3, 4, 5]


def test_multi_turn_hits_blocks_filled_during_decode():
    kv = manager()
    turn1 = Sequence("t1", list(range(6)), session_id="conv")
    run_prompt(kv, turn1)
    for token in range(100, 104):  # generated tokens whose KV the following decodes computed
        decode(kv, turn1, token)
    turn1.append_token(104)  # the last sampled token is never computed
    seq_tokens = list(turn1.token_ids)
    assert turn1.num_computed_tokens == 10 and seq_tokens == list(range(6)) + list(range(100, 105))
    held = list(turn1.block_table)
    kv.free(turn1)
    turn2 = Sequence("t2", seq_tokens + [7, 7, 7], session_id="conv")
    num_hit, _ = admit(kv, turn2)
    assert num_hit == 8  # both blocks that became full, one of them during decode
    assert turn2.block_table[:2] == held[:2]


def test_conversation_blocks_outlive_one_off_blocks():
    kv = manager(num_blocks=4)
    conv = Sequence("c", list(range(9)), session_id="s1")  # blocks 0 1 full, 2 partial
    one_off = Sequence("o", list(range(50, 55)))  # block 3 full, no more room
    run_prompt(kv, conv)
    kv.free(conv)
    run_prompt(kv, one_off)
    kv.free(one_off)
    assert [b.block_id for b in kv.pool.transient_queue] == [3, 2]  # one-off: partial 3, cached 2
    assert [b.block_id for b in kv.pool.retained_queue] == [1, 0]  # conversation chain, tail first
    # A one-off request needing 3 blocks evicts the one-off blocks and only then the conversation's tail.
    new = Sequence("n", list(range(200, 209)))
    run_prompt(kv, new)
    assert new.block_table == [3, 2, 1]
    assert [b.block_id for b in kv.get_computed_blocks(Sequence("c2", list(range(9))))] == [0]
    assert kv.get_computed_blocks(Sequence("o2", list(range(50, 55)))) == []


def test_concurrent_duplicate_blocks_are_merged_after_compute():
    kv = manager()
    a, b = Sequence("a", list(range(9))), Sequence("b", list(range(9)))
    admit(kv, a)
    admit(kv, b)  # same step: nothing cached yet, b gets its own copies
    assert a.block_table == [0, 1, 2] and b.block_table == [3, 4, 5]
    compute(kv, a, 9)
    compute(kv, b, 9)
    assert b.block_table == [0, 1, 5]
    assert refs(kv)[:6] == [2, 2, 1, 0, 0, 1]
    assert kv.pool.eviction_order()[:2] == [4, 3]  # the duplicates are the first to reuse
    assert kv.pool.num_cached_blocks == 2


def test_contiguous_reserves_max_model_len_at_admission():
    kv = manager(num_blocks=16, max_model_len=20, allocator="contiguous")
    seq = Sequence("a", [1, 2, 3])
    admit(kv, seq)
    assert seq.block_table == [0, 1, 2, 3, 4]  # ceil(20 / 4)
    compute(kv, seq, 3)
    for t in range(10):
        decode(kv, seq, t)
    assert len(seq.block_table) == 5  # never grows
    stats = kv.stats()
    assert stats.num_slots_allocated == 20 and stats.num_tokens_stored == 13 and stats.num_slots_wasted == 7
    three_more = [Sequence(f"s{i}", [i]) for i in range(3)]
    assert [kv.allocate_slots(s, 1) for s in three_more] == [True, True, False]


def test_contiguous_reservation_is_capped_by_the_pool():
    kv = manager(num_blocks=3, max_model_len=64, allocator="contiguous")
    assert kv.max_seq_len == 12 and kv.reserved_blocks_per_seq == 3


def test_waste_counts_shared_blocks_once():
    kv = manager()
    a = Sequence("a", list(range(10)))
    b = Sequence("b", list(range(8)) + [5, 5, 5])
    run_prompt(kv, a)
    run_prompt(kv, b)
    stats = kv.stats()
    # blocks 0 1 shared (8 tokens), a's tail holds 2 tokens, b's tail 3: 13 tokens in 4 blocks.
    assert stats.num_blocks_used == 4 and stats.num_slots_allocated == 16
    assert stats.num_tokens_stored == 13 and stats.num_slots_wasted == 3


def test_allocation_past_the_length_limit_is_a_bug_not_a_silent_overrun():
    kv = manager(num_blocks=4, max_model_len=64)
    with pytest.raises(ValueError):
        kv.allocate_slots(Sequence("a", [1] * 17), 17)


def test_block_table_tensor_is_padded_int32():
    a, b = Sequence("a", [1]), Sequence("b", [2])
    a.block_table, b.block_table = [3, 1, 4], [5]
    table = build_block_table_tensor([a, b])
    assert table.dtype == torch.int32
    assert table.tolist() == [[3, 1, 4], [5, -1, -1]]
    assert build_block_table_tensor([b], pad_value=0, width=2).tolist() == [[5, 0]]
    with pytest.raises(ValueError):
        build_block_table_tensor([a], width=2)
