"""Rate limits, every one on the ``limits`` library's moving window: per connection (in memory: a connection lives
in exactly one process), and shared ones per client IP, per store and per API key (``SharedLimits``: Redis when
there is one)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
import weakref

from limits import RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage as AsyncMemoryStorage
from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

logger = logging.getLogger(__name__)


# --- per connection: the ``limits`` library's moving window, in this process's memory ---------------------------
#
# A connection lives in one process, so its limits do too: one memory storage for the process, one key per
# limiter (forgotten when the limiter is collected, so closed connections leave nothing behind). Windows are whole
# seconds (the library's granularity), as for the shared limits below.

_connection_storage = MemoryStorage()
_connection_windows = MovingWindowRateLimiter(_connection_storage)


def _item(limit: int, window: float) -> RateLimitItemPerSecond:
    return RateLimitItemPerSecond(max(1, limit), max(1, math.ceil(window)))


class SlidingWindowLimiter:
    """At most ``limit`` events in any ``window`` seconds.

    A moving window rather than a fixed per-minute bucket, so a burst straddling a minute boundary cannot double
    the allowance. A ``limit`` of 0 (or less) turns it off, as 0 does for every other limit (README): it used to
    refuse every event and then fail to say when one would be allowed (an empty window).
    """

    def __init__(self, limit: int, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self._item = _item(limit, window)
        self._key = f"connection:{uuid.uuid4().hex}"
        weakref.finalize(self, _connection_storage.clear, self._item.key_for(self._key))

    def allow(self) -> bool:
        """Record an event and say whether it is within the limit (refused events are not recorded)."""
        return self.limit <= 0 or _connection_windows.hit(self._item, self._key)

    def retry_after(self) -> float:
        """Seconds until the next event would be allowed (0 when it would be now)."""
        if self.limit <= 0:
            return 0.0
        stats = _connection_windows.get_window_stats(self._item, self._key)
        return 0.0 if stats.remaining > 0 else max(0.0, stats.reset_time - time.time())


class Throttle(SlidingWindowLimiter):
    """Let one event through per ``interval`` seconds, silently dropping the rest (typing notices)."""

    def __init__(self, interval: float) -> None:
        super().__init__(1, interval)


# --- shared limits: per client IP, per store and per API key, across connections and processes ---------------
#
# Redis (REDIS_URL) holds them when it is there, so reconnecting, or connecting to another process, does not
# reset them; otherwise, and whenever Redis fails, this process's memory does (fail open to a local limit,
# never to no limit and never to an error for the shopper). Events use the same moving window as the
# per-connection limits above; its memory storage drops a key once its window has passed.

# Open connections are members of a sorted set until they close (``limits`` counts events, not things held);
# one left by a crashed process expires after CONNECTION_MAX_AGE.
_ACQUIRE = """
local key, now, max_age, limit, member = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - max_age)
if redis.call('ZCARD', key) >= limit then
  return 0
end
redis.call('ZADD', key, now, member)
redis.call('EXPIRE', key, math.ceil(max_age) + 1)
return 1
"""
CONNECTION_MAX_AGE = 6 * 3600.0
REDIS_RETRY_AFTER = 5.0  # after a Redis error, limits stay local this long before Redis is tried again
KEY_PREFIX = "shop-assistant:limit:"


class _Redis:
    """One event loop's Redis client, and the ``limits`` moving window on its connection pool."""

    def __init__(self, url: str) -> None:
        import redis.asyncio

        self.client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1.0)
        storage = RedisStorage(
            url, implementation="redispy", key_prefix=KEY_PREFIX.rstrip(":"), connection_pool=self.client.connection_pool
        )
        self.window = AsyncMovingWindow(storage)


class SharedLimits:
    """Moving-window event limits and open-connection counts keyed by strings such as ``ip:1.2.3.4``."""

    def __init__(self, redis_url: str = "") -> None:
        self.redis_url = redis_url
        self._clients: dict[int, _Redis] = {}  # one per event loop: an asyncio client belongs to its loop
        self._redis_failed_at: float | None = None
        self._local_storage = AsyncMemoryStorage()
        self._local = AsyncMovingWindow(self._local_storage)
        self._connections: dict[str, set[str]] = {}

    # -- events ----------------------------------------------------------------------------------------------

    async def hit(self, key: str, limit: int, window: float = 60.0) -> float | None:
        """Record an event under ``key``; None when allowed, else seconds until one would be."""
        item = RateLimitItemPerSecond(limit, max(1, math.ceil(window)))
        redis = self._redis()
        if redis is not None:
            try:
                return await _hit(redis.window, item, key)
            except Exception as exc:  # noqa: BLE001 - any Redis failure falls back to the local limit
                self._redis_down(exc)
        return await _hit(self._local, item, key)

    # -- open connections --------------------------------------------------------------------------------------

    async def acquire(self, key: str, limit: int, member: str) -> bool:
        """Count connection ``member`` under ``key`` if fewer than ``limit`` are open; False when full."""
        redis = self._redis()
        if redis is not None:
            try:
                allowed = await redis.client.eval(
                    _ACQUIRE, 1, KEY_PREFIX + "conn:" + key, time.time(), CONNECTION_MAX_AGE, limit, member
                )
                return bool(int(allowed))
            except Exception as exc:  # noqa: BLE001
                self._redis_down(exc)
        members = self._connections.setdefault(key, set())
        if len(members) >= limit:
            return False
        members.add(member)
        return True

    async def release(self, key: str, member: str) -> None:
        members = self._connections.get(key)
        if members is not None:
            members.discard(member)
            if not members:  # an address with nothing open is forgotten
                del self._connections[key]
        redis = self._redis()
        if redis is not None:
            try:
                await redis.client.zrem(KEY_PREFIX + "conn:" + key, member)
            except Exception as exc:  # noqa: BLE001
                self._redis_down(exc)

    def local_keys(self) -> int:
        """Keys this process holds in memory (the fallback): each goes once its window has passed or, for
        connections, once nothing under it is open."""
        return len(self._local_storage.events) + len(self._connections)

    # -- Redis -------------------------------------------------------------------------------------------------

    def _redis(self) -> _Redis | None:
        if not self.redis_url:
            return None
        if self._redis_failed_at is not None and time.monotonic() - self._redis_failed_at < REDIS_RETRY_AFTER:
            return None
        loop = asyncio.get_running_loop()
        redis = self._clients.get(id(loop))
        if redis is None:
            redis = self._clients[id(loop)] = _Redis(self.redis_url)
        return redis

    def _redis_down(self, exc: BaseException) -> None:
        if self._redis_failed_at is None:
            logger.warning("rate limits: Redis unavailable (%s: %s); limiting in this process", type(exc).__name__, exc)
        self._redis_failed_at = time.monotonic()


async def _hit(window: AsyncMovingWindow, item: RateLimitItemPerSecond, key: str) -> float | None:
    if await window.hit(item, key):
        return None
    stats = await window.get_window_stats(item, key)
    return max(0.0, stats.reset_time - time.time())


_shared: SharedLimits | None = None


def shared_limits() -> SharedLimits:
    """The process's limits, on settings.REDIS_URL (created on first use)."""
    global _shared
    if _shared is None:
        from django.conf import settings

        _shared = SharedLimits(settings.REDIS_URL)
    return _shared


def reset_shared_limits() -> None:
    """Forget the process's limits (tests)."""
    global _shared
    _shared = None
