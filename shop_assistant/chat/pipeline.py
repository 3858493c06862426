"""The answer pipeline, step by step: retrieve and compose, assemble the prompt, generate, (the session) record.

``plan`` does everything that blocks (database, embeddings, tokenizer) and runs on a worker thread; ``generate``
streams the model's text through the loop guard and the figure guard. The session (``session.py``) sends the
frames and records.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from catalog.models import Store
from shop_assistant.prompts.services import ensure_default_prompt, published_prompt

from . import engine as engine_service
from . import handoff, metrics
from .composition import HANDOFF, Composition, compose
from .decoding import (
    FINISH_FIXED,
    FINISH_REPETITION,
    FINISH_UNSUPPORTED_FIGURE,
    QUOTED_ANSWER_MAX_TOKENS,
    Decoding,
    FigureGuard,
    LoopGuard,
    allowed_figures,
    decoding_for,
)
from .models import Conversation
from .prompting import Turn, assemble, user_turn_content
from .retrieval import retrieve

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class Plan:
    """Everything known before the model's first token."""

    composition: Composition
    user_content: str  # the user turn as the model sees it (kept for byte-identical replay)
    decoding: Decoding
    token_ids: list[int] = field(default_factory=list)  # empty for a fixed reply
    max_tokens: int = 0
    # The figures the answer may state: every number the model was given (see ``figures_for``).
    figures: frozenset[Decimal] = frozenset()


@dataclass
class Generated:
    """The answer so far; filled while it streams, so a cancelled answer still has its partial text."""

    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] | None = None
    # True when the answer kept is shorter than what was streamed (the figure guard cut a sentence already
    # partly shown): the client replaces the streamed text with ``text`` (``end.text``).
    revised: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts)


def answer_budget(decoding: Decoding, composition: Composition) -> int:
    """A policy answer next to its quote gets a short budget: the quote carries the fact, and a small model
    given room drifts from it into made-up rules and figures."""
    if composition.quotes and not composition.cards:
        return min(decoding.max_tokens, QUOTED_ANSWER_MAX_TOKENS)
    return decoding.max_tokens


def figures_for(
    system_prompt: str, turns: Sequence[Turn], content: str, composition: Composition
) -> frozenset[Decimal]:
    """What the answer may quote: the store's prompt and policies, the earlier turns (each user turn keeps its
    catalog results; earlier answers passed this guard), this turn's facts and the shopper's own words (a
    "$150" budget), the cards' prices and the quotes shown."""
    return allowed_figures(
        system_prompt,
        content,
        *(turn.content for turn in turns),
        *(str(card.get("price") or "") for card in composition.cards),
        *(quote["text"] for quote in composition.quotes),
    )


def plan(
    engine: Any,
    store: Store,
    conversation: Conversation | None,
    turns: Sequence[Turn],
    text: str,
    previous: str = "",
    system_prompt: str | None = None,
) -> Plan:
    """Steps 1 and 2, blocking: compose the answer from the catalog, record a handoff, assemble the prompt.

    ``previous``: the shopper's message before this one, for follow-ups ("anything cheaper?").
    ``conversation`` None and ``system_prompt`` given: a studio preview of a draft (nothing is recorded).
    """
    composition = compose(store, text, retrieve, previous)
    decoding = decoding_for(store)
    content = user_turn_content(text, composition.facts)
    if composition.kind == HANDOFF and conversation is not None:
        handoff.request_handoff(conversation)
    if composition.fixed:
        return Plan(composition, content, decoding)
    if system_prompt is None:
        system_prompt = (published_prompt(store) or ensure_default_prompt(store)).full_text()
    with engine_service.tokenizer_lock:
        assembled = assemble(
            engine.tokenizer,
            system_prompt,
            turns,
            content,
            max_model_len=engine.max_model_len,
            max_tokens=answer_budget(decoding, composition),
        )
    figures = figures_for(system_prompt, turns, content, composition)
    return Plan(composition, content, decoding, assembled.token_ids, assembled.max_tokens, figures)


async def generate(
    engine: Any,
    request_id: str,
    prepared: Plan,
    result: Generated,
    *,
    session_id: str | None,
    cache_salt: str,
) -> AsyncIterator[str]:
    """Step 3: stream the model's answer into ``result``, yielding each piece of text as it may be shown.

    Ends early (finish reason "repetition") when the loop guard sees the answer repeating itself, and
    ("unsupported_figure") before a price, percentage or stock count the model was not given; leaving the
    stream closes it, which aborts the engine request and frees its KV blocks.
    """
    loops = LoopGuard()
    figures = FigureGuard(prepared.figures)
    stream = engine.stream(
        request_id,
        prepared.token_ids,
        prepared.decoding.sampling_params(prepared.max_tokens),
        session_id=session_id,
        cache_salt=cache_salt,
    )
    # aclosing: leaving the loop early (guard, cancel, error) closes the stream now, which aborts the request.
    async with contextlib.aclosing(stream):
        async for delta in stream:
            if delta.text:
                shown = figures.feed(delta.text)
                if shown:
                    result.parts.append(shown)
                    yield shown
                if figures.tripped:
                    _refused(result, figures)
                    return
                if loops.feed(delta.text):
                    # The held tail (a figure still forming) is checked as it stands: it may be shown.
                    tail = _finish_figures(result, figures)
                    if tail:
                        yield tail
                    if not figures.tripped:
                        result.finish_reason = FINISH_REPETITION
                    return
            if delta.finish_reason:
                result.finish_reason = delta.finish_reason
            if delta.usage is not None:
                result.usage = delta.usage.as_dict()
                metrics.observe_request(delta.metrics, delta.usage, delta.finish_reason)
            if delta.metrics is not None:
                result.timing = delta.metrics.timing_ms()
    tail = _finish_figures(result, figures)
    if tail:
        yield tail


def _finish_figures(result: Generated, figures: FigureGuard) -> str:
    """The guard's held tail, checked now that no more text comes: what of it may be shown ("" if nothing)."""
    tail = figures.finish()
    if tail:
        result.parts.append(tail)
    if figures.tripped:
        _refused(result, figures)
    return tail


def _refused(result: Generated, figures: FigureGuard) -> None:
    """The answer ends before the refused figure; what was streamed of its sentence is taken back."""
    # Logged so that a store owner's question "why did the answer stop?" has an answer, and made-up figures can
    # be counted per store.
    logger.info("answer cut before a figure nobody gave the model: %r", figures.refused)
    result.finish_reason = FINISH_UNSUPPORTED_FIGURE
    kept = figures.kept or ""
    if result.text != kept:
        result.parts = [kept] if kept else []
        result.revised = True
