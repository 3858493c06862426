"""The studio's preview: one sample question answered under one prompt version, the way the chat answers a
shopper's first message (the same retrieval, prompt assembly and engine call), streamed as events.

A version that is not the published one runs under its own cache salt, so a draft's blocks never mix with the
ones shoppers share; the published version runs under the store's salt, exactly like a shopper.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from catalog.models import Store
from shop_assistant.chat import engine as engine_service
from shop_assistant.chat.prompting import PromptTooLongError, assemble, user_turn_content
from shop_assistant.chat.retrieval import Retrieved, retrieve
from shop_assistant.chat.session import _tokenizer_lock

from .models import PromptVersion

Event = dict[str, Any]


def cache_salt_for(store: Store, version: PromptVersion) -> str:
    if version.status == PromptVersion.Status.PUBLISHED:
        return store.cache_salt
    return f"{store.cache_salt}:draft:{version.pk}"


def decoding(store: Store) -> tuple[int, float]:
    """(max_tokens, temperature): the store's own, else the site's chat defaults."""
    chat = getattr(settings, "CHAT", {})
    max_tokens = store.answer_max_tokens or chat.get("max_tokens") or 256
    temperature = store.temperature if store.temperature is not None else chat.get("temperature", 0.2)
    return int(max_tokens), float(temperature)


@dataclass(frozen=True)
class Prepared:
    retrieved: Retrieved
    token_ids: list[int]
    max_tokens: int


def prepare(engine: Any, store: Store, version: PromptVersion, question: str) -> Prepared:
    """Retrieval and prompt assembly for a first message (blocking: database, embeddings, tokenizer)."""
    retrieved = retrieve(store, question)
    max_tokens, _ = decoding(store)
    with _tokenizer_lock:
        assembled = assemble(
            engine.tokenizer,
            version.full_text(),
            [],
            user_turn_content(question, retrieved.facts),
            max_model_len=engine.max_model_len,
            max_tokens=max_tokens,
        )
    return Prepared(retrieved, assembled.token_ids, assembled.max_tokens)


async def preview_events(store: Store, version: PromptVersion, question: str) -> AsyncIterator[Event]:
    """``products``?, ``token``*, ``end`` (or ``error``) for one question under one version."""
    from inference import SamplingParams

    try:
        engine = await engine_service.aget_engine()
        prepared = await database_sync_to_async(prepare, thread_sensitive=False)(engine, store, version, question)
    except PromptTooLongError as exc:
        yield {"type": "error", "code": "prompt_too_long", "message": str(exc)}
        return
    except engine_service.EngineUnavailableError as exc:
        yield {"type": "error", "code": "engine_unavailable", "message": str(exc)}
        return

    if prepared.retrieved.cards:
        yield {"type": "products", "items": prepared.retrieved.cards}
    _, temperature = decoding(store)
    params = SamplingParams(max_tokens=prepared.max_tokens, temperature=temperature)
    usage: dict[str, int] = {"prompt_tokens": len(prepared.token_ids), "completion_tokens": 0, "cached_tokens": 0}
    finish = "error"
    started = time.perf_counter()
    first_token_ms: float | None = None
    stream = engine.stream(
        f"studio-preview-{uuid.uuid4().hex}", prepared.token_ids, params, cache_salt=cache_salt_for(store, version)
    )
    # aclosing: a browser that goes away ends the generator, which aborts the request and frees its blocks.
    async with contextlib.aclosing(stream):
        async for delta in stream:
            if delta.text:
                if first_token_ms is None:
                    first_token_ms = round((time.perf_counter() - started) * 1000, 1)
                yield {"type": "token", "text": delta.text}
            if delta.finish_reason:
                finish = delta.finish_reason
            if delta.usage is not None:
                usage = delta.usage.as_dict()
    yield {"type": "end", "finish_reason": finish, "usage": usage, "first_token_ms": first_token_ms}
