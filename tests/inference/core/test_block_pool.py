import pytest

from inference.core.block_pool import BlockHash, BlockPool, FreeBlockQueue, KVBlock, hash_block_tokens


def ids(blocks):
    return [b.block_id for b in blocks]


def cached_chain(pool, blocks, token_blocks, salt=None):
    """Register ``blocks`` as a hash chain over ``token_blocks``; returns the hashes."""
    hashes, parent = [], None
    for block, tokens in zip(blocks, token_blocks):
        parent = hash_block_tokens(parent, tokens, salt)
        assert pool.cache_block(block, parent) is block
        hashes.append(parent)
    return hashes


# -- FreeBlockQueue -----------------------------------------------------------------------------------


def test_free_queue_removes_from_the_middle_and_keeps_order():
    queue = FreeBlockQueue()
    blocks = [KVBlock(i) for i in range(5)]
    for b in blocks:
        queue.append(b)
    queue.remove(blocks[2])
    queue.appendleft(blocks[2])
    queue.remove(blocks[4])
    assert ids(queue) == [2, 0, 1, 3]
    assert len(queue) == 4
    assert queue.popleft() is blocks[2]
    assert blocks[2].queue is None and blocks[2].prev_free is None and blocks[2].next_free is None
    assert ids(queue) == [0, 1, 3]


def test_free_queue_rejects_double_insert_and_foreign_remove():
    a, b = FreeBlockQueue("a"), FreeBlockQueue("b")
    block = KVBlock(0)
    a.append(block)
    with pytest.raises(ValueError):
        b.append(block)
    with pytest.raises(ValueError):
        b.remove(block)
    a.popleft()
    with pytest.raises(IndexError):
        a.popleft()


# -- BlockPool ------------------------------------------------------------------------------------------


def test_new_blocks_come_in_id_order_with_ref_count_one():
    pool = BlockPool(6)
    got = pool.get_new_blocks(4)
    assert ids(got) == [0, 1, 2, 3]
    assert [b.ref_cnt for b in pool.blocks] == [1, 1, 1, 1, 0, 0]
    assert pool.num_free_blocks == 2 and pool.num_used_blocks == 4
    assert pool.eviction_order() == [4, 5]
    with pytest.raises(ValueError):
        pool.get_new_blocks(3)
    assert pool.num_free_blocks == 2  # a refused allocation takes nothing


def test_free_in_reverse_evicts_chain_tail_first_and_uncached_before_cached():
    pool = BlockPool(6)
    chain = pool.get_new_blocks(4)  # 0 1 2 3; 0-2 full and cached, 3 partial
    cached_chain(pool, chain[:3], [[1, 2], [3, 4], [5, 6]])
    pool.free_blocks(reversed(chain))
    # The uncached tail goes to the very front; then the chain tail before its head.
    assert pool.eviction_order() == [3, 4, 5, 2, 1, 0]
    assert all(b.ref_cnt == 0 for b in pool.blocks)


def test_eviction_clears_the_hash_and_the_map_entry():
    pool = BlockPool(2)
    blocks = pool.get_new_blocks(2)
    hashes = cached_chain(pool, blocks, [[1], [2]])
    pool.free_blocks(reversed(blocks))  # eviction order: 1, 0
    assert pool.num_cached_blocks == 2
    (reused,) = pool.get_new_blocks(1)
    assert reused.block_id == 1 and reused.block_hash is None
    assert pool.get_cached_block(hashes[1]) is None
    assert pool.get_cached_block(hashes[0]) is blocks[0]  # free but still cached
    assert pool.num_cached_blocks == 1


def test_touch_takes_a_cached_free_block_out_of_the_middle_of_the_queue():
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(3)
    hashes = cached_chain(pool, blocks, [[1], [2], [3]])
    pool.free_blocks(reversed(blocks))
    assert pool.eviction_order() == [3, 2, 1, 0]
    hit = pool.get_cached_block(hashes[1])
    pool.touch([hit])
    assert hit.ref_cnt == 1 and hit.queue is None
    assert pool.eviction_order() == [3, 2, 0]
    pool.touch([hit])  # a second sharer: ref count only
    assert hit.ref_cnt == 2
    pool.free_blocks([hit])
    assert hit.ref_cnt == 1 and pool.eviction_order() == [3, 2, 0]
    pool.free_blocks([hit])
    assert pool.eviction_order() == [3, 2, 0, 1]  # most recently used: evicted last


def test_double_free_is_an_error():
    pool = BlockPool(2)
    (block,) = pool.get_new_blocks(1)
    pool.free_blocks([block])
    with pytest.raises(ValueError):
        pool.free_blocks([block])


def test_retained_blocks_are_evicted_after_all_transient_ones():
    pool = BlockPool(4)
    session = pool.get_new_blocks(2, session="s1")  # 0 1: a live conversation's blocks
    one_off = pool.get_new_blocks(2)  # 2 3
    cached_chain(pool, session, [[1], [2]])
    cached_chain(pool, one_off, [[9], [8]], salt="other")
    pool.free_blocks(reversed(session))  # freed first: plain LRU would evict them first
    pool.free_blocks(reversed(one_off))
    assert ids(pool.transient_queue) == [3, 2]
    assert ids(pool.retained_queue) == [1, 0]
    assert ids(pool.get_new_blocks(3)) == [3, 2, 1]


def test_a_block_touched_by_a_conversation_is_retained_until_reused():
    pool = BlockPool(3)
    (block,) = pool.get_new_blocks(1)
    cached_chain(pool, [block], [[7]])
    pool.touch([block], session="s1")  # a conversation shares the one-off request's block
    pool.free_blocks([block, block])
    assert ids(pool.retained_queue) == [0]
    assert ids(pool.get_new_blocks(3)) == [1, 2, 0]
    assert block.session is None  # new content, new owner


def test_an_ended_session_is_evicted_before_a_live_one():
    pool = BlockPool(6)
    ended = pool.get_new_blocks(2, session="ended")  # 0 1
    live = pool.get_new_blocks(2, session="live")  # 2 3
    one_off = pool.get_new_blocks(1)  # 4
    cached_chain(pool, ended, [[1], [2]])
    cached_chain(pool, live, [[3], [4]], salt="b")
    cached_chain(pool, one_off, [[5]], salt="c")
    pool.free_blocks(reversed(live))  # freed first: plain LRU would evict the live session first
    pool.free_blocks(reversed(ended))
    pool.free_blocks(one_off)
    assert ids(pool.retained_queue) == [3, 2, 1, 0]
    assert pool.end_session("ended") == 2
    # block 5 (never used) first, then the one-off block, then the ended session; the live one last
    assert pool.eviction_order() == [5, 4, 1, 0, 3, 2]
    assert ids(pool.get_new_blocks(4)) == [5, 4, 1, 0]
    assert all(b.block_hash is not None for b in live)


def test_a_block_still_held_when_its_session_ends_is_transient_when_freed():
    pool = BlockPool(2)
    blocks = pool.get_new_blocks(2, session="s")
    cached_chain(pool, blocks, [[1], [2]])
    assert pool.end_session("s") == 0
    pool.free_blocks(reversed(blocks))
    assert len(pool.retained_queue) == 0 and ids(pool.transient_queue) == [1, 0]
    pool.touch(blocks[:1], session="s")  # the shopper came back: the session is live again
    pool.free_blocks(blocks[:1])
    assert ids(pool.retained_queue) == [0]


def test_cache_block_returns_the_existing_block_for_duplicate_content():
    pool = BlockPool(3)
    first, second = pool.get_new_blocks(2)
    h = hash_block_tokens(None, [1, 2, 3])
    assert pool.cache_block(first, h) is first
    assert pool.cache_block(second, hash_block_tokens(None, [1, 2, 3])) is first
    assert second.block_hash is None and pool.num_cached_blocks == 1


def test_caching_disabled_registers_nothing():
    pool = BlockPool(2, enable_caching=False)
    (block,) = pool.get_new_blocks(1)
    assert pool.cache_block(block, hash_block_tokens(None, [1])) is block
    assert block.block_hash is None and pool.num_cached_blocks == 0


def test_reset_prefix_cache_only_when_idle():
    pool = BlockPool(3)
    blocks = pool.get_new_blocks(2, session="s")
    cached_chain(pool, blocks, [[1], [2]])
    assert not pool.reset_prefix_cache()
    pool.free_blocks(reversed(blocks))
    assert pool.reset_prefix_cache()
    assert pool.num_cached_blocks == 0 and all(b.block_hash is None for b in pool.blocks)
    assert pool.eviction_order() == [0, 1, 2] and len(pool.retained_queue) == 0


# -- hashing --------------------------------------------------------------------------------------------


def test_hash_is_chained_on_the_parent_and_salted():
    a = hash_block_tokens(None, [1, 2])
    assert hash_block_tokens(None, [1, 2]) == a
    child = hash_block_tokens(a, [3, 4])
    other_parent = hash_block_tokens(hash_block_tokens(None, [9, 9]), [3, 4])
    assert child != other_parent  # same tokens, different prefix
    assert hash_block_tokens(None, [1, 2], "store-a") != hash_block_tokens(None, [1, 2], "store-b")
    assert hash_block_tokens(None, [1, 2], "store-a") != a


def test_a_digest_collision_is_a_miss_not_wrong_kv():
    pool = BlockPool(1)
    (block,) = pool.get_new_blocks(1)
    real = hash_block_tokens(None, [1, 2, 3])
    pool.cache_block(block, real)
    forged = BlockHash(real.digest, (4, 5, 6), None)  # same digest, other tokens
    assert hash(forged) == hash(real)
    assert pool.get_cached_block(forged) is None
    assert pool.get_cached_block(BlockHash(real.digest, (1, 2, 3), None)) is block
