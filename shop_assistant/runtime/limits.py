"""Rate limits: per connection (in memory: a connection lives in exactly one process), and shared ones per
client IP and per store (``SharedLimits``: Redis when there is one)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class SlidingWindowLimiter:
    """At most ``limit`` events in any ``window`` seconds.

    A sliding window rather than a fixed per-minute bucket, so a burst straddling a minute boundary cannot
    double the allowance.
    """

    def __init__(self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._events: deque[float] = deque()

    def _expire(self, now: float) -> None:
        while self._events and now - self._events[0] >= self.window:
            self._events.popleft()

    def allow(self) -> bool:
        """Record an event and say whether it is within the limit (refused events are not recorded)."""
        now = self._clock()
        self._expire(now)
        if len(self._events) >= self.limit:
            return False
        self._events.append(now)
        return True

    def retry_after(self) -> float:
        """Seconds until the next event would be allowed (0 when it would be now)."""
        now = self._clock()
        self._expire(now)
        if len(self._events) < self.limit:
            return 0.0
        return max(0.0, self.window - (now - self._events[0]))


class Throttle:
    """Let one event through per ``interval`` seconds, silently dropping the rest (typing notices)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last: float | None = None

    def allow(self) -> bool:
        now = self._clock()
        if self._last is not None and now - self._last < self.interval:
            return False
        self._last = now
        return True


# --- shared limits: per client IP and per store, across connections and processes ---------------------------
#
# Redis (REDIS_URL) holds them when it is there, so reconnecting, or connecting to another process, does not
# reset them; otherwise, and whenever Redis fails, this process's memory does (fail open to a local limit,
# never to no limit and never to an error for the shopper).

_SLIDING_WINDOW = """
local key, now, window, limit, member = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if count >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return {0, tostring(oldest[2] + window - now)}
end
redis.call('ZADD', key, now, member)
redis.call('EXPIRE', key, math.ceil(window) + 1)
return {1, '0'}
"""
# Connections are members of a sorted set until they close; one left by a crashed process expires after this.
CONNECTION_MAX_AGE = 6 * 3600.0
REDIS_RETRY_AFTER = 5.0  # after a Redis error, limits stay local this long before Redis is tried again
KEY_PREFIX = "shop-assistant:limit:"


class SharedLimits:
    """Sliding-window event limits and open-connection counts keyed by strings such as ``ip:1.2.3.4``."""

    def __init__(self, redis_url: str = "", clock: Callable[[], float] = time.time) -> None:
        self.redis_url = redis_url
        self._clock = clock
        self._clients: dict[int, Any] = {}  # one asyncio client per event loop
        self._redis_failed_at: float | None = None
        self._windows: dict[tuple[str, int, float], SlidingWindowLimiter] = {}
        self._connections: dict[str, set[str]] = {}

    # -- events ----------------------------------------------------------------------------------------------

    async def hit(self, key: str, limit: int, window: float = 60.0) -> float | None:
        """Record an event under ``key``; None when allowed, else seconds until one would be."""
        client = self._redis()
        if client is not None:
            try:
                allowed, retry_after = await client.eval(
                    _SLIDING_WINDOW, 1, KEY_PREFIX + key, self._clock(), window, limit, uuid.uuid4().hex
                )
                return None if int(allowed) else max(0.0, float(retry_after))
            except Exception as exc:  # noqa: BLE001 - any Redis failure falls back to the local limit
                self._redis_down(exc)
        limiter = self._windows.get((key, limit, window))
        if limiter is None:
            limiter = self._windows[(key, limit, window)] = SlidingWindowLimiter(limit, window)
        return None if limiter.allow() else limiter.retry_after()

    # -- open connections --------------------------------------------------------------------------------------

    async def acquire(self, key: str, limit: int, member: str) -> bool:
        """Count connection ``member`` under ``key`` if fewer than ``limit`` are open; False when full."""
        client = self._redis()
        if client is not None:
            try:
                allowed, _ = await client.eval(
                    _SLIDING_WINDOW, 1, KEY_PREFIX + "conn:" + key, self._clock(), CONNECTION_MAX_AGE, limit, member
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
        self._connections.get(key, set()).discard(member)
        client = self._redis()
        if client is not None:
            try:
                await client.zrem(KEY_PREFIX + "conn:" + key, member)
            except Exception as exc:  # noqa: BLE001
                self._redis_down(exc)

    # -- Redis -------------------------------------------------------------------------------------------------

    def _redis(self) -> Any:
        if not self.redis_url:
            return None
        if self._redis_failed_at is not None and time.monotonic() - self._redis_failed_at < REDIS_RETRY_AFTER:
            return None
        loop = asyncio.get_running_loop()
        client = self._clients.get(id(loop))
        if client is None:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(self.redis_url, socket_connect_timeout=0.5, socket_timeout=1.0)
            self._clients[id(loop)] = client
        return client

    def _redis_down(self, exc: BaseException) -> None:
        if self._redis_failed_at is None:
            logger.warning("rate limits: Redis unavailable (%s: %s); limiting in this process", type(exc).__name__, exc)
        self._redis_failed_at = time.monotonic()


_shared: SharedLimits | None = None


def shared_limits() -> SharedLimits:
    """The process's limits, on settings.REDIS_URL (created on first use)."""
    global _shared
    if _shared is None:
        from django.conf import settings

        _shared = SharedLimits(getattr(settings, "REDIS_URL", ""))
    return _shared


def reset_shared_limits() -> None:
    """Forget the process's limits (tests)."""
    global _shared
    _shared = None
