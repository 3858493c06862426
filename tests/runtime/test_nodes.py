"""Nodes: the listener hears a broadcast through the channel layer (the in-memory one of the single-process
default here; Redis in tests/deploy), the board keeps heartbeats and reports, and /metrics names the node."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shop_assistant.runtime import metrics, nodes


@pytest.fixture
def node_settings(settings):
    settings.NODE_NAME = f"node-{uuid.uuid4().hex[:6]}"
    settings.NODE_HEARTBEAT_SECONDS = 0.2
    settings.REDIS_URL = ""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    nodes.stop_listener()  # a test before this one may have left one
    yield settings
    nodes.stop_listener()


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_a_broadcast_reaches_the_listener_after_its_start_hooks(node_settings):
    heard: list[dict] = []
    order: list[str] = []
    gate = threading.Event()

    async def handler(message: dict) -> None:
        order.append(f"message {message['n']}")
        heard.append(message)

    async def on_start() -> None:
        order.append("start hook")

    listener = nodes.start_listener({"test.ping": handler}, [on_start], wait_for=gate.wait)
    assert nodes.start_listener({}, []) is listener  # one per process
    assert listener.joined.wait(10)
    assert not listener.started.is_set()  # the start hooks wait for the engine (here: the gate)
    # Joined before the hooks run: what is announced while the engine loads is not lost.
    assert nodes.broadcast({"type": "test.ping", "n": 1})
    gate.set()
    assert listener.started.wait(10)
    assert nodes.broadcast({"type": "test.ping", "n": 2})
    assert nodes.broadcast({"type": "no.handler"})
    assert wait_until(lambda: listener.handled >= 2 and len(heard) == 2)
    assert [m["n"] for m in heard] == [1, 2]
    assert order[0] == "start hook"


def test_heartbeats_and_reports_on_the_board(node_settings):
    listener = nodes.start_listener({}, [])
    assert listener.started.wait(10)
    board = nodes.board()
    name = node_settings.NODE_NAME
    assert name in board.live_nodes()
    board.report("topic", name, {"cached_tokens": 64})
    assert board.reports("topic")[name]["cached_tokens"] == 64
    # A node that stops is forgotten at once; one that goes silent drops out after three heartbeats.
    nodes.stop_listener()
    assert name not in board.live_nodes()
    board.heartbeat("silent")
    assert "silent" in board.live_nodes()
    time.sleep(0.7)
    assert "silent" not in board.live_nodes()


@pytest.mark.services
def test_the_board_on_redis_is_shared_by_every_client(redis_url):
    one, other = nodes.NodeBoard(redis_url), nodes.NodeBoard(redis_url)
    node = f"n-{uuid.uuid4().hex[:6]}"
    one.heartbeat(node)
    one.report(f"t-{node}", node, {"cached_tokens": 3})
    assert node in other.live_nodes()
    assert other.reports(f"t-{node}")[node]["cached_tokens"] == 3
    other.forget(node)
    assert node not in one.live_nodes()


def test_metrics_carry_the_node_and_the_engines_model_name(settings):
    settings.NODE_NAME = "web7"
    settings.API = {**settings.API, "model_name": "shop-model"}
    metrics.MESSAGES.labels(role="user").inc()
    metrics.PROMPT_TOKENS.inc(0)
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    messages = [s for s in families["shop_assistant_chat_messages"].samples if s.name.endswith("_total")]
    assert messages and all(s.labels["node"] == "web7" and "model_name" not in s.labels for s in messages)
    assert {"role": "user", "node": "web7"} in [s.labels for s in messages]
    prompt = [s for s in families["vllm:prompt_tokens"].samples if s.name.endswith("_total")]
    assert prompt and all(s.labels == {"node": "web7", "model_name": "shop-model"} for s in prompt)
    for family in families.values():
        assert all(sample.labels.get("node") == "web7" for sample in family.samples), family.name


def test_node_name_defaults_to_the_host(settings):
    import socket

    settings.NODE_NAME = ""
    assert nodes.node_name() == socket.gethostname()


async def test_a_broadcast_nobody_hears_is_fine_and_one_from_the_event_loop_fails_soft(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert nodes.running_listener() is None
    assert await asyncio.to_thread(nodes.broadcast, {"type": "x"}) is True  # no node: nothing to warm
    # A publish is sync code; called on an event loop by mistake, it logs and goes on rather than raise.
    assert nodes.broadcast({"type": "x"}) is False


def test_a_node_joins_once_the_layer_comes_back(node_settings, monkeypatch, caplog):
    """A node started while the channel layer is away keeps trying (tenacity, doubling waits) and joins when it is
    back, rather than giving up or spinning."""
    from channels.layers import InMemoryChannelLayer

    failures = {"left": 2}
    real_add = InMemoryChannelLayer.group_add

    async def flaky_add(self, group, channel):
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("layer away")
        return await real_add(self, group, channel)

    monkeypatch.setattr(InMemoryChannelLayer, "group_add", flaky_add)
    monkeypatch.setattr(nodes, "JOIN_FIRST_WAIT", 0.05)
    started = time.monotonic()
    listener = nodes.start_listener({}, [])
    assert listener.joined.wait(10) and listener.started.wait(10)
    assert failures["left"] == 0 and node_settings.NODE_NAME in nodes.board().live_nodes()
    assert time.monotonic() - started >= 0.05 + 0.1  # it waited 0.05 s, then 0.1 s: doubling, not spinning
    assert sum("cannot join" in r.getMessage() for r in caplog.records) == 2
