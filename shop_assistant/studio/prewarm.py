"""Pre-warm: compute a newly published system prompt's KV blocks before the first shopper needs them.

The prefix is rendered exactly as the chat renders the start of every conversation (the system message through
the model's chat template, under the store's cache salt), so the blocks it leaves in the engine's prefix cache
are the ones a shopper's first turn looks up. The engine prefills it without sampling (``AsyncLLM.prefill``);
only full blocks are cached, so a prompt of ``n`` tokens warms ``n // block_size * block_size`` of them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from catalog.models import Store
from shop_assistant.runtime import engine_service

from .models import PromptVersion

if TYPE_CHECKING:
    from inference import AsyncLLM

logger = logging.getLogger(__name__)

_pending: set[threading.Thread] = set()
_pending_lock = threading.Lock()


@dataclass(frozen=True)
class PrewarmResult:
    prompt_tokens: int  # the system prefix, as every conversation of the store starts
    cached_tokens: int  # what the engine reported already cached for it (0 on a cold prefix)
    warm_tokens: int  # full blocks of the prefix that are now in the prefix cache


def system_prefix_ids(engine: AsyncLLM, system_text: str) -> list[int]:
    """The tokens every conversation of the store starts with: the system message alone, as the chat renders it."""
    return engine.encode_chat([{"role": "system", "content": system_text}], add_generation_prompt=False)


def published_prompt_session(store: Store) -> str:
    """The engine session that keeps a store's published system prompt ahead of one-off traffic (previews)."""
    return f"published-prompt:{store.pk}"


async def aprewarm(store: Store, prompt_version: PromptVersion, engine: AsyncLLM | None = None) -> PrewarmResult:
    """``prewarm`` from async code."""
    engine = engine or await engine_service.aget_engine()
    ids = await asyncio.to_thread(system_prefix_ids, engine, prompt_version.full_text())
    session = published_prompt_session(store)
    # The previous version's blocks become ordinary evictable ones; blocks the two versions share are taken
    # back by the prefill below, which keeps the new prefix as a live session's.
    engine.end_session(session)
    usage = await engine.prefill(ids, cache_salt=store.cache_salt, session_id=session)
    block = engine.block_size
    return PrewarmResult(prompt_tokens=len(ids), cached_tokens=usage.cached_tokens, warm_tokens=len(ids) // block * block)


def prewarm(store: Store, prompt_version: PromptVersion) -> PrewarmResult:
    """Run the store's system prefix through the engine so its full KV blocks are cached. Blocking: call it
    from a worker thread, never from an event loop."""
    return asyncio.run(aprewarm(store, prompt_version))


# A publish right after the server starts may come while the model is still loading: wait that long for it.
ENGINE_WAIT_SECONDS = 300.0


def _wait_for_engine(timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while (engine := engine_service.running_engine()) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return engine


def _run(version_id: int) -> None:
    try:
        # Never load the model from here: only warm an engine that serves chats in this process.
        if _wait_for_engine(ENGINE_WAIT_SECONDS) is None:
            logger.info("no engine running in this process; prompt version %s not pre-warmed", version_id)
            return
        version = PromptVersion.objects.select_related("store").get(pk=version_id)
        if version.status != PromptVersion.Status.PUBLISHED:
            return  # replaced again before we got to it: warming it would only evict useful blocks
        result = prewarm(version.store, version)
        PromptVersion.objects.filter(pk=version_id).update(
            prewarmed_tokens=result.warm_tokens, prewarmed_at=timezone.now()
        )
        logger.info("pre-warmed %s: %d of %d prompt tokens cached", version, result.warm_tokens, result.prompt_tokens)
    except Exception:
        # A cold first answer is the only cost; never let it look like the publish failed.
        logger.exception("pre-warming prompt version %s failed", version_id)
    finally:
        close_old_connections()
        with _pending_lock:
            _pending.discard(threading.current_thread())


def should_prewarm() -> bool:
    """Only in a process that serves chats (its engine is running or starts with the app): a management command
    or a Celery worker must not load a model just to warm a cache nobody reads."""
    return engine_service.running_engine() is not None or bool(getattr(settings, "ENGINE_AUTOSTART", False))


def prewarm_in_background(version: PromptVersion) -> None:
    """Pre-warm ``version`` on a thread once the surrounding transaction commits; returns at once."""
    if not should_prewarm():
        return

    def start() -> None:
        thread = threading.Thread(target=_run, args=(version.pk,), name=f"prewarm-{version.pk}", daemon=True)
        with _pending_lock:
            _pending.add(thread)
        thread.start()

    transaction.on_commit(start)


def wait_for_prewarms(timeout: float = 60.0) -> bool:
    """Wait for background pre-warms started so far (tests, measurements); True when all finished."""
    with _pending_lock:
        threads = list(_pending)
    for thread in threads:
        thread.join(timeout)
    return not any(thread.is_alive() for thread in threads)
