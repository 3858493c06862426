"""Pre-warm: after it, a shopper's first turn finds the system prompt's full blocks cached under the store's
salt (and only there). Also measures the first shopper's time to first token with and without it."""

from __future__ import annotations

import asyncio
import statistics
import uuid

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from catalog.models import Store
from shop_assistant.chat.answers.prompting import assemble, user_turn_content
from shop_assistant.chat.protocol.session import ChatSession
from shop_assistant.studio import services
from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT
from shop_assistant.studio.prewarm import aprewarm, prewarm, system_prefix_ids

from .conftest import make_user

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_settings")]


def publish_unique(store: Store, marker: str):
    """A published prompt whose very first words are new, so none of its blocks can be in the cache yet."""
    text = f"Revision {marker}. " + DEFAULT_SYSTEM_PROMPT.format(store=store.name)
    return services.publish(services.create_draft(store, text))


async def first_turn_usage(engine, store: Store, system_text: str, question: str, salt: str) -> dict:
    from inference import SamplingParams

    ids = assemble(
        engine.tokenizer, system_text, [], user_turn_content(question, ""), max_model_len=1024, max_tokens=4
    ).token_ids
    usage = None
    async for delta in engine.stream(f"probe-{uuid.uuid4().hex}", ids, SamplingParams(max_tokens=1), cache_salt=salt):
        if delta.usage is not None:
            usage = delta.usage
    return {"prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens}


async def test_prewarm_caches_the_full_blocks_for_the_stores_salt_only(transactional_db, chat_engine):
    store = await database_sync_to_async(Store.objects.create)(slug="warm", name="Warm Outfitters")
    version = await database_sync_to_async(publish_unique)(store, uuid.uuid4().hex)
    text = version.full_text()
    block = chat_engine.block_size
    prefix = len(system_prefix_ids(chat_engine, text))
    full = prefix // block * block
    assert full >= 4 * block

    result = await aprewarm(store, version, chat_engine)
    assert (result.prompt_tokens, result.cached_tokens, result.warm_tokens) == (prefix, 0, full)

    shopper = await first_turn_usage(chat_engine, store, text, "Do you sell tents?", store.cache_salt)
    assert shopper["cached_tokens"] == full
    other_salt = await first_turn_usage(chat_engine, store, text, "Do you sell tents?", "another-store-salt")
    assert other_salt["cached_tokens"] == 0

    # The blocking form (the background thread's) finds it warm already: every full block, except that the engine
    # always computes a prompt's last token, so a prefix of exactly n blocks finds n - 1 of them (the uuid in the
    # marker makes the prefix's length vary from run to run).
    again = await asyncio.to_thread(prewarm, store, version)
    assert again.cached_tokens == (prefix - 1) // block * block and again.warm_tokens == full
    assert again.cached_tokens >= full - block


async def first_token_ms(store: Store) -> tuple[float, dict]:
    """A new shopper's first message through the real chat pipeline: the engine's ms to its first token, and usage.

    The engine's, not the first `token` frame's: that one is the answer's opening, composed from the store's data
    before the engine starts, so a cold prefix no longer shows in it; it shows in the engine's first token."""
    frames: list[dict] = []
    done = asyncio.Event()

    async def send(frame: dict) -> None:
        frames.append(frame)
        if frame["type"] in ("end", "error"):
            done.set()

    session = await ChatSession.open(store_slug=store.slug, resume_token=None, send=send)
    await session.receive('{"type": "message", "text": "Hello, what do you sell?"}')
    await asyncio.wait_for(done.wait(), 120)
    await session.close()
    end = frames[-1]
    assert end["type"] == "end", end
    return end["timing"]["engine_ttft_ms"], end["usage"]


RUNS = 5


async def test_first_shopper_after_publish_ttft_with_and_without_prewarm(transactional_db, chat_engine, record_property):
    store = await database_sync_to_async(Store.objects.create)(slug="ttft", name="Timing Outfitters")
    block = chat_engine.block_size
    timings: dict[str, list[float]] = {"prewarmed": [], "cold": []}
    for run in range(RUNS):
        for mode in ("cold", "prewarmed") if run % 2 else ("prewarmed", "cold"):
            version = await database_sync_to_async(publish_unique)(store, f"{mode}-{run}-{uuid.uuid4().hex}")
            full = len(system_prefix_ids(chat_engine, version.full_text())) // block * block
            if mode == "prewarmed":
                await aprewarm(store, version, chat_engine)
            ms, usage = await first_token_ms(store)
            timings[mode].append(ms)
            if mode == "prewarmed":
                assert usage["cached_tokens"] >= full, usage
            else:
                assert usage["cached_tokens"] == 0, usage
    medians = {mode: round(statistics.median(values), 1) for mode, values in timings.items()}
    record_property("ttft_ms", {"runs": timings, "median": medians})
    print(f"\nfirst shopper's time to first token after a publish, median of {RUNS}: {medians} (all: {timings})")
    assert medians["prewarmed"] < medians["cold"]


# --- every node: announced by the publish, pre-warmed by the node's listener ----------------------------------


@pytest.fixture
def one_node(settings, chat_engine):
    """This process as the single-process default runs it: one node on the in-memory channel layer."""
    from shop_assistant.runtime import nodes
    from shop_assistant.studio.prewarm import start_node

    settings.NODE_NAME = "solo"
    settings.REDIS_URL = ""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    nodes.stop_listener()  # a test before this one may have left one, under other settings
    listener = start_node()
    assert listener.started.wait(120)
    yield listener
    nodes.stop_listener()


async def wait_for_report(version_id: int, timeout: float = 120.0) -> dict:
    from shop_assistant.runtime import nodes
    from shop_assistant.studio.prewarm import report_topic

    for _ in range(int(timeout / 0.1)):
        report = nodes.board().reports(report_topic(version_id)).get(nodes.node_name())
        if report is not None:
            return report
        await asyncio.sleep(0.1)
    raise AssertionError(f"no node reported version {version_id}")


async def test_a_publish_is_prewarmed_by_the_node_and_reported(transactional_db, one_node, chat_engine):
    from shop_assistant.studio.prewarm import node_status

    store = await database_sync_to_async(Store.objects.create)(slug="fanout", name="Fanout Outfitters")
    version = await database_sync_to_async(publish_unique)(store, uuid.uuid4().hex)
    full = len(system_prefix_ids(chat_engine, version.full_text())) // chat_engine.block_size * chat_engine.block_size
    report = await wait_for_report(version.pk)
    assert (report["node"], report["version"], report["cached_tokens"]) == ("solo", version.version, full)
    status = await database_sync_to_async(node_status)(version)
    assert status.summary() == "pre-warmed on 1 of 1 node" and status.nodes == ["solo"]
    # What the prompt page follows after a publish (studio.js), as the store's owner reads it.
    owner = await database_sync_to_async(make_user)("fanout-owner", store, "owner")
    client = Client()
    await database_sync_to_async(client.force_login)(owner)
    response = await database_sync_to_async(client.get)(f"/studio/fanout/versions/{version.pk}/nodes.json")
    assert response.json() == {"warm": 1, "nodes": 1, "text": f"Pre-warmed on 1 of 1 node: solo ({full} tokens)."}

    # The first shopper finds it (the chat's own pipeline, as in the TTFT test).
    _, usage = await first_token_ms(store)
    assert usage["cached_tokens"] >= full > 0, usage

    # A rollback is announced the same way: the restored text is warm again under a new version.
    target = await database_sync_to_async(publish_unique)(store, uuid.uuid4().hex)
    await wait_for_report(target.pk)
    restored = await database_sync_to_async(services.rollback)(version)
    assert (await wait_for_report(restored.pk))["cached_tokens"] == full


async def test_a_node_that_starts_prewarms_the_published_prompts(transactional_db, chat_engine, settings):
    from shop_assistant.runtime import nodes
    from shop_assistant.studio.prewarm import prewarm_published

    # Published while no node listens (the server is down): nobody warms it...
    store = await database_sync_to_async(Store.objects.create)(slug="restart", name="Restart Outfitters")
    version = await database_sync_to_async(publish_unique)(store, uuid.uuid4().hex)
    full = len(system_prefix_ids(chat_engine, version.full_text())) // chat_engine.block_size * chat_engine.block_size
    assert nodes.board().reports(f"prewarm:{version.pk}") == {}
    # ...until a node starts: its start hook warms every published prompt (newest first, bounded).
    settings.PREWARM_ON_START_MAX_STORES = 1
    assert await prewarm_published() == 1
    assert (await wait_for_report(version.pk, timeout=1))["cached_tokens"] == full
    _, usage = await first_token_ms(store)
    assert usage["cached_tokens"] >= full > 0, usage
