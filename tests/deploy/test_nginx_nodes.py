"""Past one machine: Debian's nginx with the repository's config (deploy/nginx.conf, ports substituted) in front
of two real daphne nodes on one Redis and the test database, with a Celery worker. A store's sessions all land on
one node and stores spread over both; a publish through the studio's service is pre-warmed on every node (the
first shopper on each finds the prompt's full blocks cached), and without the fan-out it is not."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter

import pytest
import websockets
from channels.db import database_sync_to_async

from tests.chat.conftest import FRAME_TIMEOUT, collect_answer, run_daphne, run_worker
from tests.deploy.nginx import run_nginx

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.services]

SESSIONS_PER_STORE = 10


@pytest.fixture
def nodes_redis_url(redis_url) -> str:
    """A Redis database of these tests' own (11), emptied: channel-layer groups and the node board are per
    database, so another run's nodes can neither hear this one's publishes nor count as its nodes."""
    import redis

    base, _, db = redis_url.rpartition("/")
    url = f"{base}/11" if db.isdigit() else redis_url.rstrip("/") + "/11"
    redis.Redis.from_url(url).flushdb()
    return url


async def ready_frame(url: str, origin: str) -> dict:
    async with websockets.connect(url, origin=origin, proxy=None, open_timeout=FRAME_TIMEOUT) as connection:
        frame = json.loads(await asyncio.wait_for(connection.recv(), FRAME_TIMEOUT))
        assert frame["type"] == "ready", frame
        return frame


async def first_answer_usage(http: str, slug: str) -> dict:
    ws = http.replace("http://", "ws://") + f"/ws/chat/?store={slug}"
    async with websockets.connect(ws, origin=http, proxy=None, open_timeout=FRAME_TIMEOUT) as connection:

        async def receive(timeout: float = FRAME_TIMEOUT) -> dict:
            return json.loads(await asyncio.wait_for(connection.recv(), timeout))

        assert (await receive())["type"] == "ready"
        await connection.send(json.dumps({"type": "message", "text": "Hello, what do you sell?"}))
        answer = await collect_answer(receive)
        return answer.end["usage"]


def make_stores(count: int, tag: str) -> list[str]:
    from catalog.models import Store

    return [Store.objects.create(slug=f"{tag}-{i}", name=f"Store {tag} {i}").slug for i in range(count)]


def publish_unique(slug: str):
    """A published prompt whose first words are new: none of its blocks can be cached anywhere yet."""
    from catalog.models import Store
    from shop_assistant.studio import services
    from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT

    store = Store.objects.get(slug=slug)
    text = f"Revision {uuid.uuid4().hex}. " + DEFAULT_SYSTEM_PROMPT.format(store=store.name)
    return services.publish(services.create_draft(store, text))


async def wait_for_reports(board, version_id: int, names: set[str], timeout: float = 300.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reports = await asyncio.to_thread(board.reports, f"prewarm:{version_id}")
        if names <= set(reports):
            return reports
        await asyncio.sleep(0.2)
    raise AssertionError(f"only {sorted(reports)} of {sorted(names)} reported version {version_id}")


def miss_report(log_dir, a, b) -> str:
    """What explains a node that got no store: nginx's errors and warnings (a node marked failed leaves the ring
    for fail_timeout), every request that went to more than one upstream or did not upgrade, and both nodes'
    last lines."""
    lines = (log_dir / "nginx.log").read_text(errors="replace").splitlines()
    notable = [line for line in lines if "[error]" in line or "[warn]" in line or "[crit]" in line
               or ", " in line.partition("upstream=")[2] or ("upstream_status=" in line and "=101" not in line)]
    return "\n".join([f"node-a on {a.port}, node-b on {b.port}; nginx: {len(lines)} lines, the notable ones:",
                      *notable[:80], "node-a's log ends:", a.log_text()[-1500:], "node-b's log ends:",
                      b.log_text()[-1500:]])


async def test_store_affinity_and_prewarm_on_every_node(transactional_db, nodes_redis_url, tmp_path, settings,
                                                        record_property):
    from inference.core.config import EngineConfig
    from shop_assistant.runtime import nodes

    block = EngineConfig.__dataclass_fields__["block_size"].default
    stores = await database_sync_to_async(make_stores)(3, f"aff{uuid.uuid4().hex[:4]}")
    spread = await database_sync_to_async(make_stores)(12, f"spr{uuid.uuid4().hex[:4]}")
    names = {"node-a", "node-b"}
    # Few start-up pre-warms: the test engine's small KV cache holds a handful of pinned prompts.
    env = {"REDIS_URL": nodes_redis_url, "NODE_HEARTBEAT_SECONDS": "1", "PREWARM_ON_START_MAX_STORES": "2"}
    with (
        run_worker(tmp_path, nodes_redis_url),
        run_daphne(tmp_path, NODE_NAME="node-a", **env) as a,
        run_daphne(tmp_path, NODE_NAME="node-b", **env) as b,
        run_nginx(tmp_path, [a.port, b.port]) as port,
    ):
        front = f"http://127.0.0.1:{port}"
        direct = {"node-a": a.http, "node-b": b.http}

        # (a) Every session of a store on one node; stores spread over both.
        placement: dict[str, Counter] = {}
        for slug in stores:
            frames = [await ready_frame(f"ws://127.0.0.1:{port}/ws/chat/?store={slug}", front)
                      for _ in range(SESSIONS_PER_STORE)]
            placement[slug] = Counter(frame["node"] for frame in frames)
        affinity = {slug: max(c.values()) / SESSIONS_PER_STORE for slug, c in placement.items()}
        spread_nodes = {(await ready_frame(f"ws://127.0.0.1:{port}/ws/chat/?store={slug}", front))["node"]
                        for slug in spread}
        print(f"\nsessions per store on their node: {dict(placement)}; 12 more stores on {sorted(spread_nodes)}")
        assert all(share == 1.0 for share in affinity.values()), placement
        # On a miss, which upstream nginx chose for each request (its access log names it) tells a ring that
        # skipped a node from a node that answered under the wrong name.
        assert spread_nodes | {n for c in placement.values() for n in c} == names, miss_report(tmp_path, a, b)

        # Both nodes are alive on the board (their heartbeats), as the studio counts them.
        settings.REDIS_URL = nodes_redis_url
        settings.CHANNEL_LAYERS = {"default": {
            "BACKEND": "shop_assistant.runtime.layers.ResilientRedisChannelLayer",
            "CONFIG": {"hosts": [{"address": nodes_redis_url, "socket_timeout": 15}]},
        }}
        board = nodes.board()
        for _ in range(300):
            if names <= set(board.live_nodes()):
                break
            await asyncio.sleep(0.2)
        assert names <= set(board.live_nodes())

        # (b) A publish through the studio's service, from this process (no node): every node pre-warms it.
        slug = stores[0]
        version = await database_sync_to_async(publish_unique)(slug)
        reports = await wait_for_reports(board, version.pk, names)
        full = reports["node-a"]["prompt_tokens"] // block * block
        assert full >= 4 * block
        assert {n: r["cached_tokens"] for n, r in reports.items()} == {"node-a": full, "node-b": full}
        from shop_assistant.studio.prewarm import node_status

        status = await database_sync_to_async(node_status)(version)
        assert status.summary() == "pre-warmed on 2 of 2 nodes", status
        warm = {node: (await first_answer_usage(http, slug))["cached_tokens"] for node, http in direct.items()}

        # Without the fan-out (a publish nobody hears): the first shopper on each node computes the whole prompt.
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
        cold_version = await database_sync_to_async(publish_unique)(stores[1])
        cold = {node: (await first_answer_usage(http, stores[1]))["cached_tokens"] for node, http in direct.items()}
        assert await asyncio.to_thread(board.reports, f"prewarm:{cold_version.pk}") == {}

    figures = {"affinity": affinity, "placement": {k: dict(v) for k, v in placement.items()},
               "full_blocks_tokens": full, "first_shopper_cached_tokens": {"fan_out": warm, "no_fan_out": cold}}
    record_property("nodes", figures)
    print(f"first shopper's cached tokens per node after a publish: {figures['first_shopper_cached_tokens']} "
          f"(prompt's full blocks: {full})")
    assert all(tokens >= full for tokens in warm.values()), warm
    assert all(tokens == 0 for tokens in cold.values()), cold
