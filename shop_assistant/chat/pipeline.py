"""The answer pipeline, step by step: retrieve and compose, assemble the prompt, generate, (the session) record.

``plan`` does everything that blocks (database, embeddings, tokenizer) and runs on a worker thread; ``generate``
streams the model's text through the loop guard. The session (``session.py``) sends the frames and records.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog.models import Store
from shop_assistant.prompts.services import ensure_default_prompt, published_prompt

from . import engine as engine_service
from . import handoff
from .composition import HANDOFF, Composition, compose
from .decoding import FINISH_REPETITION, Decoding, LoopGuard, decoding_for
from .models import Conversation
from .prompting import Turn, assemble, user_turn_content
from .retrieval import retrieve

# HF fast tokenizers are not safe to call from several threads at once ("Already borrowed"); prompts are
# short, so one lock costs little.
_tokenizer_lock = threading.Lock()


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
    engine: Any, store: Store, conversation: Conversation, turns: Sequence[Turn], text: str, previous: str = ""
) -> Plan:
    """Steps 1 and 2, blocking: compose the answer from the catalog, record a handoff, assemble the prompt.

    ``previous``: the shopper's message before this one, for follow-ups ("anything cheaper?").
    """
    composition = compose(store, text, retrieve, previous)
    decoding = decoding_for(store)
    content = user_turn_content(text, composition.facts)
    if composition.kind == HANDOFF:
        handoff.request_handoff(conversation)
    if composition.fixed:
        return Plan(composition, content, decoding)
    prompt = published_prompt(store) or ensure_default_prompt(store)
    with _tokenizer_lock:
        assembled = assemble(
            engine_service.tokenizer_of(engine),
            prompt.full_text(),
            turns,
            content,
            max_model_len=engine_service.max_model_len_of(engine),
            max_tokens=decoding.max_tokens,
        )
    return Plan(composition, content, decoding, assembled.token_ids, assembled.max_tokens)


async def generate(
    engine: Any,
    request_id: str,
    prepared: Plan,
    result: Generated,
    *,
    conversation_id: str,
    cache_salt: str,
    emit: Callable[[str], Awaitable[None]],
) -> None:
    """Step 3: stream the model's answer into ``result``, calling ``emit`` for each piece of text.

    Ends early (finish reason "repetition") when the loop guard sees the answer repeating itself; leaving the
    stream closes it, which aborts the engine request and frees its KV blocks.
    """
    guard = LoopGuard()
    stream = engine.stream(
        request_id,
        prepared.token_ids,
        prepared.decoding.sampling_params(prepared.max_tokens),
        conversation_id=conversation_id,
        cache_salt=cache_salt,
    )
    # aclosing: leaving the loop early (guard, cancel, error) closes the stream now, which aborts the request.
    async with contextlib.aclosing(stream):
        async for delta in stream:
            if delta.text:
                result.parts.append(delta.text)
                await emit(delta.text)
                if guard.feed(delta.text):
                    result.finish_reason = FINISH_REPETITION
                    return
            if delta.finish_reason:
                result.finish_reason = delta.finish_reason
            if delta.usage is not None:
                result.usage = engine_service.usage_dict(delta.usage)
            if delta.metrics is not None:
                result.timing = engine_service.timing_dict(delta.metrics)
