"""The answer pipeline, step by step: retrieve and compose, assemble the prompt, generate, (the session) record.

``plan`` does everything that blocks (database, embeddings, tokenizer) and runs on a worker thread; ``generate``
streams the model's text through the loop guard. The session (``session.py``) sends the frames and records.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog.models import Store
from shop_assistant.prompts.services import ensure_default_prompt, published_prompt

from . import engine as engine_service
from . import handoff, metrics
from .composition import HANDOFF, Composition, compose
from .decoding import FINISH_FIXED, FINISH_REPETITION, Decoding, LoopGuard, decoding_for
from .models import Conversation
from .prompting import Turn, assemble, user_turn_content
from .retrieval import retrieve



@dataclass(frozen=True)
class Plan:
    """Everything known before the model's first token."""

    composition: Composition
    user_content: str  # the user turn as the model sees it (kept for byte-identical replay)
    decoding: Decoding
    token_ids: list[int] = field(default_factory=list)  # empty for a fixed reply
    max_tokens: int = 0


@dataclass
class Generated:
    """The answer so far; filled while it streams, so a cancelled answer still has its partial text."""

    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


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
            max_tokens=decoding.max_tokens,
        )
    return Plan(composition, content, decoding, assembled.token_ids, assembled.max_tokens)


async def generate(
    engine: Any,
    request_id: str,
    prepared: Plan,
    result: Generated,
    *,
    session_id: str | None,
    cache_salt: str,
) -> AsyncIterator[str]:
    """Step 3: stream the model's answer into ``result``, yielding each piece of text as it comes.

    Ends early (finish reason "repetition") when the loop guard sees the answer repeating itself; leaving the
    stream closes it, which aborts the engine request and frees its KV blocks.
    """
    guard = LoopGuard()
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
                result.parts.append(delta.text)
                yield delta.text
                if guard.feed(delta.text):
                    result.finish_reason = FINISH_REPETITION
                    return
            if delta.finish_reason:
                result.finish_reason = delta.finish_reason
            if delta.usage is not None:
                result.usage = delta.usage.as_dict()
                metrics.observe_request(delta.metrics, delta.usage, delta.finish_reason)
            if delta.metrics is not None:
                result.timing = delta.metrics.timing_ms()
