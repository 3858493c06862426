"""Abuse limits at the websocket's edge: open connections and messages per client IP and per store.

Shared through Redis when ``REDIS_URL`` is set (see ``runtime.limits.SharedLimits``), so closing and reopening the
socket, or reaching another process, does not reset them. The consumer asks ``admit`` before opening a
session and ``release`` when the socket closes; the session asks ``check_message`` for every message it accepts.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from shop_assistant.runtime import metrics
from shop_assistant.runtime.limits import shared_limits

# Application close code for "too many connections" (the widget may retry later).
CLOSE_TOO_MANY = 4429


def _limits() -> dict[str, int]:
    return dict(getattr(settings, "CHAT_LIMITS", {}))


def client_ip(scope: dict[str, Any]) -> str:
    """The client's address: the peer's, or what a trusted proxy says (runtime/proxy.py settled it in the scope)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class ConnectionGuard:
    def __init__(self, scope: dict[str, Any], store_slug: str | None) -> None:
        self.ip = client_ip(scope)
        self.store = (store_slug or "-")[:100]
        self.member = uuid.uuid4().hex
        self._held: list[str] = []

    def _keys(self) -> list[tuple[str, str]]:
        return [(f"ip:{self.ip}", "per_ip"), (f"store:{self.store}", "per_store")]

    async def admit(self) -> dict[str, Any] | None:
        """Count this connection; an error frame (and nothing held) when a limit is full."""
        limits = _limits()
        for key, scope in self._keys():
            limit = limits.get(f"connections_{scope}") or 0
            if limit <= 0:
                continue
            if not await shared_limits().acquire(key, limit, self.member):
                await self.release()
                metrics.RATE_LIMITED.labels(limit=f"connections_{scope}").inc()
                who = "this address" if scope == "per_ip" else "this store"
                return {
                    "type": "error",
                    "code": "too_many_connections",
                    "message": f"too many open chats from {who} (at most {limit}); close one and try again",
                    "limit": limit,
                }
            self._held.append(key)
        return None

    async def release(self) -> None:
        held, self._held = self._held, []
        for key in held:
            await shared_limits().release(key, self.member)

    async def check_message(self) -> tuple[int, float] | None:
        """Record one message; None when within every limit, else (the limit, seconds to wait)."""
        limits = _limits()
        for key, scope in self._keys():
            limit = limits.get(f"messages_per_minute_{scope}") or 0
            if limit <= 0:
                continue
            retry_after = await shared_limits().hit(f"msg:{key}", limit, 60.0)
            if retry_after is not None:
                metrics.RATE_LIMITED.labels(limit=f"messages_{scope}").inc()
                return limit, retry_after
        return None
