"""Per-connection rate limits (in memory: a connection lives in exactly one process)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


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
