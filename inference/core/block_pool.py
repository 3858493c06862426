"""KV blocks, the LRU free queue and the block pool (ref counts + prefix-cache hash map).

Modelled on vLLM v1's ``BlockPool``: every block of the KV cache is a ``KVBlock`` with a ref count; blocks
with ref count 0 sit in a free queue, still holding their content and their hash, so a later request with
the same prefix can take them back ("touch") until they are evicted for reuse.

Session-aware retention: the free space is two LRU queues. A block freed while the session that last held it
is live goes to the *retained* queue, every other block to the *transient* one. Allocation evicts from the
transient queue first and only then from the retained one, so the history of live sessions (a shopper's
conversation) outlives one-off traffic; within each queue the least recently freed block goes first. A session
is live from its first request until the caller ends it (``end_session``: the conversation closed or went
idle); its free blocks then move to the transient queue, so an ended conversation is evicted before a live
one. Blocks without a hash (partial or duplicate blocks, nothing to reuse) are put at the front of the
transient queue and are taken before any cached block.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BlockHash:
    """Identity of a full block's content: chained digest plus the block's own tokens and extra key.

    Dict lookups hash on ``digest`` alone but compare every field, so a (vanishingly unlikely) sha256
    collision between different token blocks is still a miss, never wrong KV.
    """

    digest: bytes
    token_ids: tuple[int, ...]
    extra_key: object = None

    def __hash__(self) -> int:
        return hash(self.digest)


def hash_block_tokens(parent: BlockHash | None, token_ids: Sequence[int], extra_key: object = None) -> BlockHash:
    """Hash one full block, chained on its parent so equal blocks only match under an equal prefix."""
    tokens = tuple(token_ids)
    parent_digest = parent.digest if parent is not None else b""
    digest = hashlib.sha256(pickle.dumps((parent_digest, tokens, extra_key), protocol=5)).digest()
    return BlockHash(digest, tokens, extra_key)


class KVBlock:
    """One physical block of ``block_size`` KV slots."""

    __slots__ = ("block_id", "ref_cnt", "block_hash", "session", "queue", "prev_free", "next_free")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: BlockHash | None = None
        # The session whose request last took this block (None: one-off traffic); reset when it is reused.
        self.session: str | None = None
        self.queue: FreeBlockQueue | None = None  # the free queue holding this block, if any
        self.prev_free: KVBlock | None = None
        self.next_free: KVBlock | None = None

    def __repr__(self) -> str:
        return f"KVBlock(id={self.block_id}, ref={self.ref_cnt}, cached={self.block_hash is not None})"


class FreeBlockQueue:
    """Doubly linked list of free blocks: O(1) pop from the front, push at either end, remove anywhere.

    The front is evicted first. A Python deque cannot remove from the middle in O(1), which a prefix-cache
    hit on a free block needs.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._head = KVBlock(-1)
        self._tail = KVBlock(-1)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[KVBlock]:
        node = self._head.next_free
        while node is not self._tail:
            assert node is not None
            yield node
            node = node.next_free

    def popleft(self) -> KVBlock:
        if self._len == 0:
            raise IndexError("pop from an empty FreeBlockQueue")
        block = self._head.next_free
        assert block is not None
        self.remove(block)
        return block

    def append(self, block: KVBlock) -> None:
        self._link_after(self._tail.prev_free, block)

    def appendleft(self, block: KVBlock) -> None:
        self._link_after(self._head, block)

    def remove(self, block: KVBlock) -> None:
        if block.queue is not self:
            raise ValueError(f"{block!r} is not in free queue {self.name!r}")
        prev, nxt = block.prev_free, block.next_free
        assert prev is not None and nxt is not None
        prev.next_free = nxt
        nxt.prev_free = prev
        block.prev_free = block.next_free = None
        block.queue = None
        self._len -= 1

    def _link_after(self, prev: KVBlock | None, block: KVBlock) -> None:
        if block.queue is not None:
            raise ValueError(f"{block!r} is already in free queue {block.queue.name!r}")
        assert prev is not None and prev.next_free is not None
        nxt = prev.next_free
        block.prev_free, block.next_free = prev, nxt
        prev.next_free = block
        nxt.prev_free = block
        block.queue = self
        self._len += 1


class BlockPool:
    """All KV blocks of the cache: ref counts, the two free queues and the hash -> cached block map."""

    def __init__(self, num_blocks: int, enable_caching: bool = True) -> None:
        if num_blocks < 1:
            raise ValueError("num_blocks must be positive")
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.blocks = [KVBlock(i) for i in range(num_blocks)]
        self.transient_queue = FreeBlockQueue("transient")
        self.retained_queue = FreeBlockQueue("retained")
        for block in self.blocks:
            self.transient_queue.append(block)
        # One block per hash: a duplicate computed concurrently is not registered (see KVCacheManager).
        self.cached_blocks: dict[BlockHash, KVBlock] = {}
        self.live_sessions: set[str] = set()

    @property
    def num_free_blocks(self) -> int:
        return len(self.transient_queue) + len(self.retained_queue)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    @property
    def num_cached_blocks(self) -> int:
        return len(self.cached_blocks)

    @property
    def usage(self) -> float:
        return self.num_used_blocks / self.num_blocks

    def eviction_order(self) -> list[int]:
        """Free block ids in the order allocation will take them (tests and debugging)."""
        return [b.block_id for b in self.transient_queue] + [b.block_id for b in self.retained_queue]

    def get_cached_block(self, block_hash: BlockHash) -> KVBlock | None:
        return self.cached_blocks.get(block_hash)

    def get_new_blocks(self, num_blocks: int, session: str | None = None) -> list[KVBlock]:
        """Take ``num_blocks`` free blocks (ref count 1) for a request of ``session``, evicting their content."""
        if num_blocks > self.num_free_blocks:
            raise ValueError(f"cannot allocate {num_blocks} blocks, only {self.num_free_blocks} free")
        self._mark_live(session)
        taken = []
        for _ in range(num_blocks):
            queue = self.transient_queue if len(self.transient_queue) else self.retained_queue
            block = queue.popleft()
            self._evict(block)
            block.ref_cnt = 1
            block.session = session
            taken.append(block)
        return taken

    def touch(self, blocks: Iterable[KVBlock], session: str | None = None) -> None:
        """Take a reference on blocks found in the prefix cache, pulling free ones out of their queue."""
        self._mark_live(session)
        for block in blocks:
            if block.ref_cnt == 0:
                assert block.queue is not None
                block.queue.remove(block)
            block.ref_cnt += 1
            if session is not None:
                block.session = session

    def end_session(self, session: str) -> int:
        """The session is over: its free blocks become ordinary evictable ones (the transient queue's most
        recent end, so older one-off blocks still go first), and blocks it still holds follow when freed.
        Returns how many blocks moved. O(retained blocks): sessions end far less often than steps run."""
        self.live_sessions.discard(session)
        moved = [block for block in self.retained_queue if block.session == session]
        for block in moved:
            self.retained_queue.remove(block)
            self.transient_queue.append(block)
        return len(moved)

    def free_blocks(self, ordered_blocks: Iterable[KVBlock]) -> None:
        """Drop one reference on each block; blocks reaching 0 are queued in the given order.

        Callers pass a sequence's blocks tail first, so the tail of a chain is evicted before its head
        (a head block is useful to every request sharing the prefix; a tail only to this one).
        """
        for block in ordered_blocks:
            if block.ref_cnt <= 0:
                raise ValueError(f"double free of {block!r}")
            block.ref_cnt -= 1
            if block.ref_cnt > 0:
                continue
            if block.block_hash is None:
                self.transient_queue.appendleft(block)
            elif block.session in self.live_sessions:
                self.retained_queue.append(block)
            else:
                self.transient_queue.append(block)

    def cache_block(self, block: KVBlock, block_hash: BlockHash) -> KVBlock:
        """Register a just computed full block; return the block that now holds this content.

        If the content is already cached in another block (two requests computed the same prefix at the
        same time), the existing block is returned and ``block`` stays unregistered; the caller swaps it.
        """
        if not self.enable_caching:
            return block
        existing = self.cached_blocks.get(block_hash)
        if existing is not None:
            return existing
        if block.block_hash is not None:
            raise ValueError(f"{block!r} is already cached")
        block.block_hash = block_hash
        self.cached_blocks[block_hash] = block
        return block

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash; refused (False) while any block is in use, like vLLM."""
        if self.num_used_blocks:
            return False
        self.cached_blocks.clear()
        for queue in (self.transient_queue, self.retained_queue):
            while len(queue):
                queue.popleft()
        for block in self.blocks:
            block.block_hash = None
            block.session = None
            self.transient_queue.append(block)
        return True

    def _mark_live(self, session: str | None) -> None:
        if session is not None:
            self.live_sessions.add(session)

    def _evict(self, block: KVBlock) -> None:
        if block.block_hash is not None:
            del self.cached_blocks[block.block_hash]
            block.block_hash = None
