"""The Redis channel layer, made to survive Redis going away.

channels-redis lets a connection error escape from ``receive``, which Channels runs for every consumer: with
Redis down, every shopper's websocket died with 1011. Here ``receive`` waits and retries (with backoff) instead,
so the chat itself, which needs no Redis to answer, goes on; what does need Redis (``group_add``,
``group_send``: agent messages across processes) still raises, and the consumer says the agent features are
unavailable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis import exceptions as redis_errors

logger = logging.getLogger(__name__)

CONNECTION_ERRORS = (OSError, redis_errors.ConnectionError, redis_errors.TimeoutError)


class ResilientRedisChannelLayer(RedisChannelLayer):
    #: monotonic time of the last connection error, None while Redis answers
    down_since: float | None = None

    async def receive(self, channel: str) -> dict[str, Any]:
        delay = 0.5
        while True:
            try:
                message = await super().receive(channel)
            except CONNECTION_ERRORS as exc:
                if self.down_since is None:
                    self.down_since = time.monotonic()
                    logger.warning("channel layer: Redis unreachable (%s); retrying, agent features paused", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if self.down_since is not None:
                logger.info("channel layer: Redis is back")
                self.down_since = None
            return message
