"""The model's continuation of an opening, sentence by sentence through the checker.

One candidate's sentences are shown as soon as each passes; the first that does not ends it (and the answer).
With several candidates (``n`` samples of one request, sharing the prompt's KV blocks), nothing is shown until
each has ended or failed; then the one with the most checked sentences is shown (the first on a tie).

The event loop only moves text: cutting a delta into sentences is a regular expression, but checking them (and
the evidence's first word index, built on the first check) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import checker
from .checker import Evidence
from .sentences import Sentence, SentenceSplitter

FINISH_UNSUPPORTED = "unsupported"  # the checker ended the answer before a sentence the data does not support
CUT = "cut: the answer's budget ended mid-sentence"


@dataclass
class Candidate:
    """One sampled continuation: its pieces that passed, in the order shown, and why it ended."""

    evidence: Evidence
    shown: list[str]  # the opening and the sentences kept so far: the checker's context ("already said")
    splitter: SentenceSplitter = field(default_factory=SentenceSplitter)
    pieces: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # a heading ("Here are the options:") that needs what follows
    dropped: list[dict[str, str]] = field(default_factory=list)
    finish_reason: str | None = None
    sentences: int = 0
    failed: bool = False

    @property
    def done(self) -> bool:
        return self.failed or self.finish_reason is not None

    def feed(self, text: str) -> list[str]:
        """The pieces of ``text`` that may be shown; a sentence that fails ends the candidate."""
        return self.judge(self.splitter.feed(text))

    def finish(self, reason: str) -> list[str]:
        """The stream ended: the last sentence is settled (the model's own end makes it whole, a cut does not)."""
        return self.judge(self.settle(reason))

    def settle(self, reason: str) -> list[Sentence]:
        """The stream ended: its last sentence, if the model's own end made it whole (a cut's fragment is dropped)."""
        self.finish_reason = reason
        last, fragment = self.splitter.finish(ended_by_model=reason == "stop")
        if fragment:
            self.dropped.append({"text": fragment, "reason": CUT})
        return [last] if last is not None else []

    def judge(self, sentences: Sequence[Sentence]) -> list[str]:
        """The pieces of ``sentences`` that may be shown, each through the checker (CPU work: not on the loop)."""
        pieces = []
        for sentence in sentences:
            if self.failed:
                break
            piece = self._judge(sentence)
            if piece:
                pieces.append(piece)
        self.pieces += pieces
        return pieces

    def _judge(self, sentence: Sentence) -> str:
        verdict = checker.check(sentence.text, self.evidence, self.shown)
        if not verdict.ok:
            self.dropped.append({"text": sentence.text, "reason": verdict.reason})
            self.failed, self.finish_reason = True, FINISH_UNSUPPORTED
            return ""
        piece = sentence.separator + sentence.text
        if sentence.text.endswith(":"):
            self.held.append(piece)
            return ""
        self.shown.append(sentence.text)
        self.sentences += 1
        piece, self.held = "".join(self.held) + piece, []
        return piece


async def checked(
    stream: AsyncIterator[Any], evidence: Evidence, opening: str, n: int, observe: Callable[[Any], None]
) -> AsyncIterator[str | Candidate]:
    """Yield the pieces to show, then (last) the candidate that was shown, for its finish reason and drops.

    ``observe`` gets every delta (usage, timing). Leaving the loop early closes ``stream``: when every candidate
    has failed or ended, the request is aborted and its blocks freed."""
    candidates = [Candidate(evidence, [opening]) for _ in range(n)]
    async for delta in stream:
        candidate = candidates[delta.index]
        pieces = [] if candidate.done else await _judged(candidate, candidate.splitter.feed(delta.text))
        if delta.finish_reason and not candidate.done:
            pieces += await _judged(candidate, candidate.settle(delta.finish_reason))
        if n == 1:
            for piece in pieces:
                yield piece
        observe(delta)
        if all(c.done for c in candidates):
            break
    for candidate in candidates:
        if not candidate.done:  # the stream ended without its finish (an abort): what is whole stays
            candidate.finish_reason = "abort"
    best = max(candidates, key=lambda c: c.sentences)  # max keeps the first of equals
    if n > 1:
        for piece in best.pieces:
            yield piece
    yield best


async def _judged(candidate: Candidate, sentences: list[Sentence]) -> list[str]:
    """``candidate.judge`` in a worker thread (the checker is CPU work); nothing to judge costs no hop."""
    return await asyncio.to_thread(candidate.judge, sentences) if sentences else []
