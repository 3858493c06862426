"""This process as one node of several: its name, a heartbeat, and messages to every node at once.

Each daphne process that serves chats runs one background listener (``start_listener``, started with the engine
by ``shop_assistant.startup``) on a thread of its own with its own event loop. It joins the channel layer's
``engine-nodes`` group and hands each message to the handler registered for its ``type`` (the studio's pre-warm).
``broadcast`` sends to that group: through Redis every node hears it; with the in-memory layer of the
single-process default only this process does, which is all there is.

Heartbeats and what nodes report (``NodeBoard``) live in Redis when ``REDIS_URL`` is set, hashes with an expiry:
they describe caches that die with their process, so they belong next to the channel layer with a lifetime, not
in a table that outlives them. Without Redis there is one process, and its memory holds them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers, get_channel_layer
from django.conf import settings

from .retry import retrying_async

logger = logging.getLogger(__name__)

GROUP = "engine-nodes"
KEY_PREFIX = "shop_assistant:nodes:"
REPORT_TTL = 24 * 3600  # seconds a report outlives its last update
JOIN_FIRST_WAIT, JOIN_MAX_WAIT = 0.5, 10.0  # seconds between tries to join the group while the layer is away

Handler = Callable[[dict[str, Any]], Awaitable[None]]
StartHook = Callable[[], Awaitable[None]]


def node_name() -> str:
    """This node's name: ``NODE_NAME``, or the host's name (a container's is its id)."""
    return settings.NODE_NAME or socket.gethostname()


def heartbeat_seconds() -> float:
    return float(settings.NODE_HEARTBEAT_SECONDS)


# --- the board: heartbeats and reports every node can read ----------------------------------------------------


class NodeBoard:
    """Heartbeats and per-topic reports of every node: Redis hashes when ``redis_url`` is set, memory otherwise."""

    def __init__(self, redis_url: str = "") -> None:
        self.redis_url = redis_url
        self._local: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._client: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self.redis_url, socket_connect_timeout=1.0, socket_timeout=2.0)
        return self._client

    def _set(self, key: str, field: str, value: dict[str, Any], ttl: int) -> None:
        data = json.dumps(value)
        if self.redis_url:
            pipe = self._redis().pipeline()
            pipe.hset(KEY_PREFIX + key, field, data)
            pipe.expire(KEY_PREFIX + key, ttl)
            pipe.execute()
        else:
            with self._lock:
                self._local.setdefault(key, {})[field] = data

    def _all(self, key: str) -> dict[str, dict[str, Any]]:
        if self.redis_url:
            raw = {k.decode(): v.decode() for k, v in self._redis().hgetall(KEY_PREFIX + key).items()}
        else:
            with self._lock:
                raw = dict(self._local.get(key, {}))
        return {field: json.loads(value) for field, value in raw.items()}

    def heartbeat(self, node: str) -> None:
        self._set("alive", node, {"at": time.time()}, REPORT_TTL)

    def forget(self, node: str) -> None:
        """A node leaving on purpose (drain): it stops counting at once rather than when its heartbeat ages."""
        if self.redis_url:
            self._redis().hdel(KEY_PREFIX + "alive", node)
        else:
            with self._lock:
                self._local.get("alive", {}).pop(node, None)

    def live_nodes(self, max_age: float | None = None) -> list[str]:
        """Nodes whose last heartbeat is younger than ``max_age`` (three heartbeats by default), sorted."""
        max_age = 3 * heartbeat_seconds() if max_age is None else max_age
        now = time.time()
        return sorted(node for node, beat in self._all("alive").items() if now - beat.get("at", 0) <= max_age)

    def report(self, topic: str, node: str, data: dict[str, Any]) -> None:
        self._set(f"report:{topic}", node, {**data, "node": node, "at": time.time()}, REPORT_TTL)

    def reports(self, topic: str) -> dict[str, dict[str, Any]]:
        """Each node's last report on ``topic``, by node name."""
        return self._all(f"report:{topic}")


_boards: dict[str, NodeBoard] = {}
_boards_lock = threading.Lock()


def board() -> NodeBoard:
    """The board on this process's Redis (``REDIS_URL``), or its memory."""
    url = settings.REDIS_URL
    with _boards_lock:
        if url not in _boards:
            _boards[url] = NodeBoard(url)
        return _boards[url]


# --- the listener ---------------------------------------------------------------------------------------------


class Listener:
    """One per process: a thread running an event loop that hears the ``engine-nodes`` group."""

    def __init__(self, handlers: dict[str, Handler], on_start: Iterable[StartHook] = ()) -> None:
        self.handlers = dict(handlers)
        self.on_start = list(on_start)
        self.name = node_name()
        self.loop = asyncio.new_event_loop()
        self.joined = threading.Event()  # in the group: a broadcast from now on reaches this node
        self.started = threading.Event()  # the start hooks (pre-warming published prompts) are done
        self.handled = 0  # messages handled, for tests and the log
        self._stop: asyncio.Event | None = None
        # A layer of its own: channels-redis refuses two event loops receiving on one layer object, and the
        # process's (get_channel_layer()) is daphne's loop's.
        self.layer: Any = None
        self._thread = threading.Thread(target=self._run, name="engine-node-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        except Exception:
            logger.exception("node listener of %s stopped", self.name)
        finally:
            self.joined.set()
            self.started.set()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        layer = self.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        channel = await layer.new_channel("engine-node")
        await self._join(layer, channel)
        self.joined.set()
        beating = asyncio.create_task(self._beat(layer, channel))
        try:
            for hook in self.on_start:
                try:
                    await hook()
                except Exception:
                    logger.exception("node start hook %s failed", getattr(hook, "__name__", hook))
            self.started.set()
            receiving = asyncio.create_task(self._receive(layer, channel))
            await self._stop.wait()
            receiving.cancel()
        finally:
            beating.cancel()
            await asyncio.to_thread(_quietly, board().forget, self.name)
            try:
                await layer.group_discard(GROUP, channel)
            except Exception:  # Redis gone: the membership expires on its own
                pass

    async def _join(self, layer: Any, channel: str) -> None:
        # Retried until it works (0.5 s doubling to 10 s): a node that starts while Redis is down must still join
        # when it is back.
        async def join() -> None:
            await layer.group_add(GROUP, channel)
            await asyncio.to_thread(board().heartbeat, self.name)

        def log(attempt: int, error: BaseException) -> None:
            logger.warning("node %s cannot join %s yet (%s); retrying", self.name, GROUP, error)

        await retrying_async(retry_on=Exception, first_wait=JOIN_FIRST_WAIT, max_wait=JOIN_MAX_WAIT, before_retry=log)(
            join
        )

    async def _beat(self, layer: Any, channel: str) -> None:
        while True:
            await asyncio.sleep(heartbeat_seconds())
            try:
                # Renewed with every beat: channels-redis drops a group member after its group_expiry.
                await layer.group_add(GROUP, channel)
                await asyncio.to_thread(board().heartbeat, self.name)
            except Exception as error:
                logger.warning("node %s heartbeat failed: %s", self.name, error)

    async def _receive(self, layer: Any, channel: str) -> None:
        while True:
            message = await layer.receive(channel)
            handler = self.handlers.get(message.get("type", ""))
            if handler is None:
                logger.warning("node %s: no handler for %r", self.name, message.get("type"))
                continue
            # Each message on its own task: a slow pre-warm does not hold back the next message.
            asyncio.create_task(self._handle(handler, message))

    async def _handle(self, handler: Handler, message: dict[str, Any]) -> None:
        try:
            await handler(message)
        except Exception:
            logger.exception("node %s: handling %r failed", self.name, message.get("type"))
        finally:
            self.handled += 1

    def stop(self, timeout: float = 10.0) -> None:
        if self._stop is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)


def _quietly(function: Callable[..., Any], *args: Any) -> None:
    try:
        function(*args)
    except Exception as error:
        logger.warning("%s failed: %s", getattr(function, "__name__", function), error)


_listener: Listener | None = None
_listener_lock = threading.Lock()


def start_listener(
    handlers: dict[str, Handler], on_start: Iterable[StartHook] = (), *, wait_for: Callable[[], Any] | None = None
) -> Listener:
    """Start this process's listener once (idempotent). ``wait_for``, called on the listener's thread first,
    blocks until the node can serve (the engine loaded), so the start hooks find it running."""
    global _listener
    with _listener_lock:
        if _listener is not None and _listener._thread.is_alive():
            return _listener
        listener = Listener(handlers, on_start)
        if wait_for is not None:
            listener.on_start.insert(0, _blocking_hook(wait_for))
        listener.start()
        _listener = listener
        return listener


def _blocking_hook(function: Callable[[], Any]) -> StartHook:
    async def hook() -> None:
        await asyncio.to_thread(function)

    hook.__name__ = getattr(function, "__name__", "wait_for")
    return hook


def running_listener() -> Listener | None:
    return _listener


def stop_listener() -> None:
    """Stop this process's listener (tests)."""
    global _listener
    with _listener_lock:
        listener, _listener = _listener, None
    if listener is not None:
        listener.stop()


def broadcast(message: dict[str, Any], timeout: float = 5.0) -> bool:
    """Send ``message`` (its ``type`` names the handler) to every node's listener; blocking, from sync code.

    Where this process runs a listener, the send goes through the listener's own layer on its loop: the in-memory
    layer (one process) only reaches receivers of the same layer object, read on that loop. False (and a log
    line) when the layer could not take it."""
    listener = _listener
    try:
        if listener is not None and listener.layer is not None and listener.loop.is_running():
            future = asyncio.run_coroutine_threadsafe(listener.layer.group_send(GROUP, message), listener.loop)
            future.result(timeout)
        else:
            async_to_sync(get_channel_layer().group_send)(GROUP, message)
        return True
    except (FutureTimeout, Exception) as error:
        logger.warning("broadcast of %r to the nodes failed: %s", message.get("type"), error)
        return False
