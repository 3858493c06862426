"""The studio's preview: one sample question answered under one prompt version, the way the chat answers a
shopper's first message (the same retrieval, prompt assembly and engine call), streamed as events.

A version that is not the published one runs under its own cache salt, so a draft's blocks never mix with the
ones shoppers share; the published version runs under the store's salt, exactly like a shopper.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from channels.db import database_sync_to_async

from catalog.models import Store
from shop_assistant.runtime import engine_service
from shop_assistant.chat.guard import pipeline
from shop_assistant.chat.answers.prompting import PromptTooLongError
from shop_assistant.prompts.models import PromptVersion

Event = dict[str, Any]


def cache_salt_for(store: Store, version: PromptVersion) -> str:
    if version.status == PromptVersion.Status.PUBLISHED:
        return store.cache_salt
    return f"{store.cache_salt}:draft:{version.pk}"


async def preview_events(
    store: Store, version: PromptVersion, question: str, max_tokens: int | None = None
) -> AsyncIterator[Event]:
    """``products``?, ``sources``?, ``token``*, ``end`` (or ``error``) for one question under one version.

    The shopper's pipeline (composition, fixed replies, decoding, loop detector) with this version's text and salt,
    as a first message: what a new shopper would see if this version were published. Nothing is recorded.
    ``max_tokens`` caps the answer's budget (the scoring's short answers); the ``end`` frame's ``facts`` is the
    user turn as the model saw it (what the evaluation allows the answer's figures to come from)."""
    try:
        engine = await engine_service.aget_engine()
        prepared = await database_sync_to_async(pipeline.plan, thread_sensitive=False)(
            engine, store, [], question, version=version
        )
    except PromptTooLongError as exc:
        yield {"type": "error", "code": "prompt_too_long", "message": str(exc)}
        return
    except engine_service.EngineUnavailableError as exc:
        yield {"type": "error", "code": "engine_unavailable", "message": str(exc)}
        return

    if max_tokens is not None and prepared.max_tokens > max_tokens:
        prepared = dataclasses.replace(prepared, max_tokens=max_tokens)
    composition = prepared.composition
    if composition.cards:
        yield {"type": "products", "items": composition.cards}
    if composition.quotes:
        yield {"type": "sources", "items": composition.quotes}
    if composition.fixed:
        yield {"type": "token", "text": composition.reply}
        yield {"type": "end", "finish_reason": pipeline.FINISH_FIXED, "reply": composition.kind,
               "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}, "first_token_ms": 0.0}
        return
    result = pipeline.Generated(
        usage={"prompt_tokens": len(prepared.token_ids), "completion_tokens": 0, "cached_tokens": 0}
    )
    started = time.perf_counter()
    first_token_ms: float | None = None
    # No engine session: preview blocks are one-off traffic, evicted before any shopper's conversation.
    pieces = pipeline.generate(
        engine, f"studio-preview-{uuid.uuid4().hex}", prepared, result,
        session_id=None, cache_salt=cache_salt_for(store, version),
    )  # fmt: skip
    # aclosing: a browser that goes away ends the generator, which aborts the request and frees its blocks.
    async with contextlib.aclosing(pieces):
        async for piece in pieces:
            if first_token_ms is None:
                first_token_ms = round((time.perf_counter() - started) * 1000, 1)
            yield {"type": "token", "text": piece}
    end = {"type": "end", "finish_reason": result.finish_reason or "error", "usage": result.usage, "text": result.text,
           "model_text": prepared.model_text, "model_sentences": result.model_sentences,
           # What the checker kept off the shopper's screen, and why: the owner sees it, the shopper never does.
           "dropped": result.dropped, "facts": prepared.user_content}  # fmt: skip
    yield {**end, "first_token_ms": first_token_ms}
