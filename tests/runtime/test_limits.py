"""The limits (``shop_assistant.runtime.limits``), all on the ``limits`` library: the shared ones in this process's
memory, in Redis shared by several processes, and back in memory while Redis is down; the per-connection ones."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import time
import types
import uuid

import pytest

from shop_assistant.runtime.limits import SharedLimits, SlidingWindowLimiter, Throttle


def _key() -> str:
    return f"test:{uuid.uuid4().hex}"  # Redis db 15 is shared by test runs


async def test_the_local_fallback_forgets_an_address_once_its_window_has_passed() -> None:
    limits = SharedLimits("")
    for n in range(1000):  # a scan from many addresses
        assert await limits.hit(f"ip:10.0.{n // 256}.{n % 256}", 5, window=1.0) is None
    assert limits.local_keys() == 1000
    await asyncio.sleep(1.2)
    await limits.hit("ip:10.1.0.1", 5, window=1.0)  # the next event sweeps what has expired
    deadline = time.monotonic() + 10
    while limits.local_keys() > 1:
        assert time.monotonic() < deadline, f"{limits.local_keys()} keys still held"
        await asyncio.sleep(0.05)
    assert limits.local_keys() == 1


async def test_the_local_fallback_still_limits() -> None:
    limits = SharedLimits("")
    key = _key()
    assert [await limits.hit(key, 2) for _ in range(2)] == [None, None]
    retry_after = await limits.hit(key, 2)
    assert retry_after is not None and 59 < retry_after <= 60
    assert await limits.hit(_key(), 2) is None  # another key has its own window


async def test_local_connections_are_counted_and_forgotten_when_closed() -> None:
    limits = SharedLimits("")
    keys = [f"ip:10.2.0.{n}" for n in range(200)]
    for key in keys:
        assert await limits.acquire(key, 2, "a") and await limits.acquire(key, 2, "b")
        assert not await limits.acquire(key, 2, "c")
    assert limits.local_keys() == 200
    for key in keys:
        await limits.release(key, "a")
        await limits.release(key, "b")
    assert limits.local_keys() == 0


@pytest.mark.services
async def test_two_processes_share_the_limits_through_redis(redis_url: str) -> None:
    one, two = SharedLimits(redis_url), SharedLimits(redis_url)
    key = _key()
    assert await one.hit(key, 2) is None and await two.hit(key, 2) is None
    retry_after = await one.hit(key, 2)
    assert retry_after is not None and 0 < retry_after <= 60
    assert await two.hit(key, 2) is not None
    assert await one.acquire(key, 1, "a") and not await two.acquire(key, 1, "b")
    await one.release(key, "a")
    assert await two.acquire(key, 1, "b")
    await two.release(key, "b")
    assert one.local_keys() == two.local_keys() == 0  # nothing fell back to memory


async def test_with_redis_down_the_limits_hold_in_this_process(caplog) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    limits = SharedLimits(f"redis://127.0.0.1:{port}/0")
    key = _key()
    with caplog.at_level(logging.WARNING, logger="shop_assistant.runtime.limits"):
        assert [await limits.hit(key, 2) for _ in range(2)] == [None, None]
        assert await limits.hit(key, 2) is not None
        assert await limits.acquire(key, 1, "a") and not await limits.acquire(key, 1, "b")
    assert [r.message for r in caplog.records if "Redis unavailable" in r.message]


@pytest.fixture
def clock(monkeypatch):
    """The time the per-connection limits read (the ``limits`` library's memory storage and ``retry_after``),
    set by the test: ``clock[0] = 30.0``."""
    import limits.storage.memory

    from shop_assistant.runtime import limits as runtime_limits

    now = [1000.0]
    fake = types.SimpleNamespace(time=lambda: now[0], monotonic=lambda: now[0])
    monkeypatch.setattr(limits.storage.memory, "time", fake)
    monkeypatch.setattr(runtime_limits, "time", fake)
    return now


def test_a_per_connection_limit_of_0_is_off_as_0_is_for_every_other_limit(clock) -> None:
    """Before: CHAT_MESSAGES_PER_MINUTE=0 refused every message, then retry_after read the first event of an empty
    window: IndexError, and every shopper's message failed (issue 39, item 12)."""
    limiter = SlidingWindowLimiter(0, 60.0)
    assert all(limiter.allow() for _ in range(500)) and limiter.retry_after() == 0.0
    limited = SlidingWindowLimiter(1, 60.0)
    assert limited.allow() and not limited.allow() and limited.retry_after() == 60.0  # the control


def test_sliding_window_limiter(clock) -> None:
    limiter = SlidingWindowLimiter(3, 60.0)
    assert [limiter.allow() for _ in range(4)] == [True, True, True, False]
    clock[0] += 30.0
    assert not limiter.allow() and limiter.retry_after() == pytest.approx(30.0)
    clock[0] += 30.001  # the first three leave the window together
    assert limiter.allow() and SlidingWindowLimiter(3, 60.0).allow()  # another connection has its own window


def test_throttle(clock) -> None:
    throttle = Throttle(1.0)
    assert throttle.allow() and not throttle.allow()
    clock[0] += 1.001
    assert throttle.allow()


def test_a_closed_connection_leaves_nothing_behind(clock) -> None:
    from shop_assistant.runtime import limits as runtime_limits

    before = len(runtime_limits._connection_storage.events)
    limiters = [SlidingWindowLimiter(5, 60.0) for _ in range(100)]
    assert all(limiter.allow() for limiter in limiters)
    assert len(runtime_limits._connection_storage.events) == before + 100
    del limiters
    gc.collect()
    assert len(runtime_limits._connection_storage.events) == before
