"""Sessions of one store share the system prompt's KV blocks; another store's salt keeps them apart."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from catalog.models import Store
from shop_assistant.studio.prewarm import system_prefix_ids
from shop_assistant.studio.services import published_prompt

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_engine", "chat_settings")]


def make_store(slug: str) -> tuple[Store, str]:
    # Same name, so both stores get byte-identical default prompts; only their cache salts differ.
    store = Store.objects.create(slug=slug, name="Twin Outfitters")
    return store, published_prompt(store).full_text()


async def test_second_session_reuses_the_system_prompt_blocks(ws, chat_engine):
    first_store, system = await database_sync_to_async(make_store)("twin-a")
    other_store, other_system = await database_sync_to_async(make_store)("twin-b")
    assert system == other_system and first_store.cache_salt != other_store.cache_salt

    block_size = chat_engine.block_size
    shared = len(system_prefix_ids(chat_engine, system)) // block_size * block_size
    assert shared >= 4 * block_size

    one = await ws("/ws/chat/?store=twin-a")
    first = await one.ask("Hello there")
    assert first.end["usage"]["cached_tokens"] == 0  # a new store's salt: nothing of it is cached yet

    two = await ws("/ws/chat/?store=twin-a")
    second = await two.ask("Good morning, what can you help me with?")
    assert second.end["usage"]["cached_tokens"] >= shared

    # The same prompt text under another store's salt shares nothing.
    three = await ws("/ws/chat/?store=twin-b")
    third = await three.ask("Hello there")
    assert third.end["usage"]["cached_tokens"] == 0
