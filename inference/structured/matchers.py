"""Per-sequence grammar state: ``StructuredOutputs``, the engine's registry of live matchers.

Invariant: a constrained sequence's matcher has accepted exactly the sequence's output tokens, in order. It is
created with the sequence (each candidate of an ``n`` / ``best_of`` request has its own), advanced by ``accept``
with each token the sequence appends, and dropped by ``free`` when the sequence finishes, fails or is aborted.
A recompute preemption keeps the sequence's output tokens (they are prefilled again with the prompt) and appends
none, so the matcher needs nothing then; prefix caching only changes which KV is computed, never the tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from inference.core.sampling_params import StructuredOutputsParams
from inference.structured.compiler import DEFAULT_CACHE_SIZE, GrammarCompiler


class StructuredOutputs:
    """Compiles constraints (through one ``GrammarCompiler``, built on first use) and holds one matcher per
    constrained sequence id."""

    def __init__(
        self, tokenizer: Any, vocab_size: int, stop_token_ids: Iterable[int], cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self._stop_token_ids = sorted(set(stop_token_ids))
        self._cache_size = cache_size
        self._compiler: GrammarCompiler | None = None
        self._matchers: dict[str, Any] = {}
        self._json: set[str] = set()  # sequences under a compact-JSON constraint (``GrammarCompiler.printable``)

    @property
    def compiler(self) -> GrammarCompiler:
        if self._compiler is None:  # the tokenizer info takes a fraction of a second: only when first needed
            self._compiler = GrammarCompiler(self._tokenizer, self.vocab_size, self._stop_token_ids, self._cache_size)
        return self._compiler

    @property
    def num_live(self) -> int:
        """Matchers held now: zero once every constrained sequence has finished or been aborted."""
        return len(self._matchers)

    def compile(self, params: StructuredOutputsParams) -> Any:
        """The compiled constraint (cached); raises ``StructuredOutputError``. Call before queueing a request."""
        return self.compiler.compile(params)

    def start(self, seq_id: str, compiled: Any, json: bool = False) -> None:
        """A fresh matcher for a sequence that has generated nothing yet; ``json``: the constraint is compact JSON
        (``compiler.is_json``), so no token with a control byte is allowed either."""
        import xgrammar as xgr

        if seq_id in self._matchers:
            raise ValueError(f"sequence {seq_id!r} already has a matcher")
        self._matchers[seq_id] = xgr.GrammarMatcher(compiled)
        if json:
            self._json.add(seq_id)

    def is_constrained(self, seq_id: str) -> bool:
        return seq_id in self._matchers

    def bitmasks(self, seq_ids: Sequence[str]) -> list[torch.Tensor | None] | None:
        """Each sequence's allowed-token bitmask for its next token (an int32 row, bit ``t % 32`` of word
        ``t // 32`` set when token ``t`` is allowed), None for an unconstrained one; None if none is constrained."""
        if not self._matchers:  # the common step: no constrained sequence at all, nothing to look up
            return None
        rows = [i for i, s in enumerate(seq_ids) if s in self._matchers]
        if not rows:
            return None
        import xgrammar as xgr

        bitmask = xgr.allocate_token_bitmask(len(rows), self.vocab_size)
        out: list[torch.Tensor | None] = [None] * len(seq_ids)
        for j, i in enumerate(rows):
            self._matchers[seq_ids[i]].fill_next_token_bitmask(bitmask, j)
            if seq_ids[i] in self._json:
                bitmask[j] &= self.compiler.printable
            out[i] = bitmask[j]
        return out

    def accept(self, seq_id: str, token_id: int) -> bool:
        """Advance a constrained sequence's matcher by the token it appended; True when the grammar is now
        complete (the sequence must stop). Unconstrained sequences: False. Raises if the grammar refuses the
        token (the sampler only draws allowed tokens, so that is a fault, failing the request alone)."""
        matcher = self._matchers.get(seq_id)
        if matcher is None:
            return False
        if not matcher.accept_token(token_id):
            raise RuntimeError(f"the grammar of {seq_id!r} refused token {token_id}")
        return matcher.is_terminated()

    def forced_tokens(self, seq_id: str, limit: int) -> list[int]:
        """Jump-forward: up to ``limit`` tokens the grammar forces next, already accepted by the sequence's
        matcher (the caller appends them to the sequence, keeping the invariant); [] for an unconstrained,
        complete or unforced one. The tokens are xgrammar's greedy longest-match split of the forced text,
        which may differ from how the model would have split it (the text is the same)."""
        matcher = self._matchers.get(seq_id)
        if matcher is None or limit <= 0 or matcher.is_terminated():
            return []
        accepted: list[int] = []
        for token in matcher.find_jump_forward_tokens()[:limit]:
            if not matcher.accept_token(token):
                break
            accepted.append(token)
            if matcher.is_terminated():
                break
        return accepted

    def is_complete(self, seq_id: str) -> bool:
        """The sequence's grammar has terminated (nothing more may follow)."""
        matcher = self._matchers.get(seq_id)
        return matcher is not None and matcher.is_terminated()

    def free(self, seq_id: str) -> None:
        self._matchers.pop(seq_id, None)
        self._json.discard(seq_id)
