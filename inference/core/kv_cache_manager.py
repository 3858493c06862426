"""Per-sequence KV-cache allocation on top of the block pool (vLLM v1's ``KVCacheManager``).

Two allocation policies share all the code below and differ only in how many blocks a sequence holds:

- ``paged``: blocks for exactly the tokens scheduled so far, one more block every ``block_size`` tokens;
  the waste is at most the unfilled tail of each sequence's last block.
- ``contiguous``: at admission, blocks for the whole ``max_model_len`` are reserved, like servers before
  PagedAttention that pre-allocate each request's maximum length. The block ids need not be adjacent: the
  benchmark measures capacity and waste, which depend on the reservation, not on the addresses.

Prefix caching works with both: full blocks are hashed (chained on the parent block, with the request's
cache salt as extra key) once their KV is computed, and a new request takes every leading full block of its
prompt that is cached, except that the last prompt token is always computed, since sampling needs its logits.

Parallel sampling forks a sequence (``fork``): the candidates hold every block of the computed prompt by
reference, the last partial block included, with or without prefix caching. A candidate about to write into
a partial block that others still hold gets its own copy first (copy on write, vLLM's ``blocks_to_copy``):
``allocate_slots`` takes a new block and records the (source, destination) pair, which the scheduler hands to
the model runner (``take_copies``) to copy the KV before the step's forward. The last holder writes in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence as SequenceT
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from inference.core.block_pool import BlockPool, KVBlock, hash_block_tokens
from inference.core.sequence import Sequence
from inference.core.utils import cdiv

if TYPE_CHECKING:
    import torch

    from inference.core.config import EngineConfig


@dataclass(frozen=True, slots=True)
class KVCacheStats:
    num_blocks_total: int
    num_blocks_free: int
    num_blocks_used: int
    num_blocks_cached: int  # blocks holding a reusable hash, in use or free
    kv_cache_usage: float  # used / total
    num_slots_allocated: int  # used blocks * block_size
    num_tokens_stored: int  # computed tokens in those slots, shared blocks counted once
    num_slots_wasted: int  # allocated - stored
    prefix_cache_query_tokens: int
    prefix_cache_hit_tokens: int

    @property
    def prefix_cache_hit_rate(self) -> float:
        return self.prefix_cache_hit_tokens / self.prefix_cache_query_tokens if self.prefix_cache_query_tokens else 0.0


class KVCacheManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_model_len: int,
        enable_prefix_caching: bool = True,
        allocator: Literal["paged", "contiguous"] = "paged",
    ) -> None:
        if allocator not in ("paged", "contiguous"):
            raise ValueError(f"allocator must be 'paged' or 'contiguous', got {allocator!r}")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.allocator = allocator
        self.pool = BlockPool(num_blocks, enable_caching=enable_prefix_caching)
        # Longest sequence (in tokens) that can ever hold its KV: the model limit or the whole pool.
        self.max_seq_len = min(max_model_len, num_blocks * block_size)
        self.reserved_blocks_per_seq = cdiv(self.max_seq_len, block_size) if allocator == "contiguous" else 0
        self._seqs: dict[str, Sequence] = {}  # sequences holding blocks, by request id
        # This step's copies on write, by request id (one at most per sequence: only the block holding its
        # first new slot can be shared); a sequence freed in the same step drops its copy.
        self._copies: dict[str, tuple[int, int]] = {}
        self.prefix_cache_query_tokens = 0
        self.prefix_cache_hit_tokens = 0

    @classmethod
    def from_config(cls, config: EngineConfig, num_blocks: int) -> KVCacheManager:
        return cls(
            num_blocks,
            config.block_size,
            config.max_model_len,
            enable_prefix_caching=config.enable_prefix_caching,
            allocator=config.kv_allocator,
        )

    @property
    def num_blocks(self) -> int:
        return self.pool.num_blocks

    def blocks_needed(self, num_tokens: int) -> int:
        """Blocks a sequence of ``num_tokens`` tokens holds under this policy."""
        return max(cdiv(num_tokens, self.block_size), self.reserved_blocks_per_seq)

    def get_computed_blocks(self, seq: Sequence) -> list[KVBlock]:
        """Leading full blocks of a waiting sequence that are already in the prefix cache."""
        if not self.enable_prefix_caching or seq.num_computed_tokens:
            return []
        self._update_block_hashes(seq, seq.num_tokens // self.block_size)
        # Never the block holding the last token: at least one token must run through the model.
        max_hit_blocks = (seq.num_tokens - 1) // self.block_size
        hits = []
        for block_hash in seq.block_hashes[:max_hit_blocks]:
            block = self.pool.get_cached_block(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits

    def allocate_slots(
        self,
        seq: Sequence,
        num_new_tokens: int,
        new_computed_blocks: SequenceT[KVBlock] = (),
        num_free_to_keep: int = 0,
    ) -> bool:
        """Give ``seq`` the blocks for its computed tokens, the cache hits and ``num_new_tokens`` more.

        All or nothing: returns False and changes nothing when the free blocks do not suffice, or when
        fewer than ``num_free_to_keep`` blocks would stay free afterwards.
        """
        num_computed = seq.num_computed_tokens + len(new_computed_blocks) * self.block_size
        total = num_computed + num_new_tokens
        if total > self.max_seq_len:
            raise ValueError(f"{seq.request_id}: {total} tokens exceed the {self.max_seq_len}-token limit")
        num_new_blocks = self.blocks_needed(total) - len(seq.block_table) - len(new_computed_blocks)
        shared = self._shared_partial_block(seq) if num_new_tokens > 0 else None
        # Free hits are counted in num_free_blocks but will be taken by this sequence, not allocated.
        free_hits = sum(1 for b in new_computed_blocks if b.ref_cnt == 0)
        if num_new_blocks + (shared is not None) + num_free_to_keep > self.pool.num_free_blocks - free_hits:
            return False

        admitting = not seq.block_table and seq.num_computed_tokens == 0
        if shared is not None:
            self._copy_on_write(seq, shared)
        self.pool.touch(new_computed_blocks, seq.session_id)
        seq.block_table.extend(b.block_id for b in new_computed_blocks)
        new_blocks = self.pool.get_new_blocks(max(num_new_blocks, 0), seq.session_id)
        seq.block_table.extend(b.block_id for b in new_blocks)
        self._seqs[seq.request_id] = seq
        if admitting and self.enable_prefix_caching:
            self.prefix_cache_query_tokens += seq.num_tokens
            self.prefix_cache_hit_tokens += len(new_computed_blocks) * self.block_size
        return True

    def cache_blocks(self, seq: Sequence, num_computed_before: int) -> None:
        """Register the blocks that became full since ``num_computed_before`` computed tokens.

        Called after every step, prefill chunks and decodes alike, so a conversation's generated tokens are
        cached too and its next turn hits them. When another sequence computed the same block first, this
        sequence switches to that block and frees its own copy, so equal content is stored once.
        """
        if not self.enable_prefix_caching:
            return
        first, end = num_computed_before // self.block_size, seq.num_computed_tokens // self.block_size
        if end <= first:
            return
        self._update_block_hashes(seq, end)
        for i in range(first, end):
            block = self.pool.blocks[seq.block_table[i]]
            if block.block_hash is not None:
                continue
            canonical = self.pool.cache_block(block, seq.block_hashes[i])
            if canonical is not block:
                self.pool.touch([canonical], seq.session_id)
                seq.block_table[i] = canonical.block_id
                self.pool.free_blocks([block])

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Give ``child`` (a candidate of the same prompt, nothing computed) the blocks of ``parent``'s
        computed tokens by reference, the last partial block included: one prefill serves every candidate.
        Contiguous reservations past them are not shared: the child reserves its own on its next step."""
        if child.block_table or child.num_computed_tokens:
            raise ValueError(f"{child.request_id}: only a sequence holding no blocks can be forked into")
        computed = parent.num_computed_tokens
        if child.token_ids[:computed] != parent.token_ids[:computed]:
            raise ValueError(f"{child.request_id}: a fork must have the tokens of {parent.request_id}")
        shared = [self.pool.blocks[i] for i in parent.block_table[: cdiv(computed, self.block_size)]]
        self.pool.touch(shared, child.session_id)
        child.block_table = [b.block_id for b in shared]
        child.num_computed_tokens = computed
        child.num_cached_tokens = parent.num_cached_tokens
        child.block_hashes = parent.block_hashes[: len(child.token_ids) // self.block_size]
        self._seqs[child.request_id] = child

    def take_copies(self) -> list[tuple[int, int]]:
        """The (source, destination) block pairs of this step's copies on write, once; then forgotten."""
        copies = list(self._copies.values())
        self._copies.clear()
        return copies

    def trim(self, seq: Sequence) -> None:
        """Give back the blocks allocated past ``seq``'s computed tokens (it was given slots for a step, then left
        out of it), so that it holds exactly the policy's blocks for what it has computed."""
        keep = self.blocks_needed(seq.num_computed_tokens)
        if len(seq.block_table) > keep:
            self.pool.free_blocks(self.pool.blocks[i] for i in reversed(seq.block_table[keep:]))
            del seq.block_table[keep:]

    def free(self, seq: Sequence) -> None:
        """Release all of ``seq``'s blocks, tail first (see ``BlockPool.free_blocks``)."""
        self.pool.free_blocks(self.pool.blocks[i] for i in reversed(seq.block_table))
        seq.block_table.clear()
        self._seqs.pop(seq.request_id, None)
        # A copy into a block this sequence no longer holds must not run (the block may be reused this step).
        self._copies.pop(seq.request_id, None)

    def stats(self) -> KVCacheStats:
        """Counters; O(sequences holding blocks), cheap enough to sample after every step."""
        pool, bs = self.pool, self.block_size
        used = pool.num_used_blocks
        computed = sum(s.num_computed_tokens for s in self._seqs.values())
        refs = sum(len(s.block_table) for s in self._seqs.values())
        # Each extra reference to a shared block counted its tokens twice: bs for a full block; a partial one
        # (the prompt's last block, shared by forked candidates until one writes) holds fewer.
        partial: dict[int, int] = {}
        for s in self._seqs.values():
            i, filled = divmod(s.num_computed_tokens, bs)
            if filled and pool.blocks[s.block_table[i]].ref_cnt > 1:
                partial[s.block_table[i]] = filled
        overcount = bs * (refs - used) - sum((pool.blocks[b].ref_cnt - 1) * (bs - f) for b, f in partial.items())
        stored = computed - overcount
        return KVCacheStats(
            num_blocks_total=pool.num_blocks,
            num_blocks_free=pool.num_free_blocks,
            num_blocks_used=used,
            num_blocks_cached=pool.num_cached_blocks,
            kv_cache_usage=pool.usage,
            num_slots_allocated=used * bs,
            num_tokens_stored=stored,
            num_slots_wasted=used * bs - stored,
            prefix_cache_query_tokens=self.prefix_cache_query_tokens,
            prefix_cache_hit_tokens=self.prefix_cache_hit_tokens,
        )

    def reset_prefix_cache(self) -> bool:
        return self.pool.reset_prefix_cache()

    def end_session(self, session_id: str) -> int:
        """See ``BlockPool.end_session``."""
        return self.pool.end_session(session_id)

    def _shared_partial_block(self, seq: Sequence) -> KVBlock | None:
        """The block of ``seq``'s next slot when it already holds computed tokens and another sequence holds it
        too (a fork's shared prompt tail): writing there would overwrite the others' view."""
        i, filled = divmod(seq.num_computed_tokens, self.block_size)
        if not filled:
            return None
        block = self.pool.blocks[seq.block_table[i]]
        return block if block.ref_cnt > 1 else None

    def _copy_on_write(self, seq: Sequence, shared: KVBlock) -> None:
        (copy,) = self.pool.get_new_blocks(1, seq.session_id)
        seq.block_table[seq.num_computed_tokens // self.block_size] = copy.block_id
        self.pool.free_blocks([shared])  # the other holders keep it
        self._copies[seq.request_id] = (shared.block_id, copy.block_id)

    def _update_block_hashes(self, seq: Sequence, num_full_blocks: int) -> None:
        bs, hashes = self.block_size, seq.block_hashes
        while len(hashes) < num_full_blocks:
            i = len(hashes)
            parent = hashes[-1] if hashes else None
            hashes.append(hash_block_tokens(parent, seq.token_ids[i * bs : (i + 1) * bs], seq.cache_salt))


def build_block_table_tensor(
    seqs: Iterable[Sequence], pad_value: int = -1, width: int | None = None, device: str = "cpu"
) -> torch.Tensor:
    """Padded ``[num_seqs, width]`` int32 tensor of the sequences' block tables (default width: longest)."""
    import torch  # deferred: the scheduler itself runs without torch

    tables = [seq.block_table for seq in seqs]
    width = max((len(t) for t in tables), default=0) if width is None else width
    out = torch.full((len(tables), width), pad_value, dtype=torch.int32)
    for row, table in enumerate(tables):
        if len(table) > width:
            raise ValueError(f"block table of {len(table)} blocks does not fit width {width}")
        out[row, : len(table)] = torch.tensor(table, dtype=torch.int32)
    return out.to(device)
