"""The Redis channel layer, made to survive Redis going away.

channels-redis lets a connection error escape from ``receive``, which Channels runs for every consumer: with
Redis down, every shopper's websocket died with 1011. Here ``receive`` waits and retries (with backoff) instead,
so the chat itself, which needs no Redis to answer, goes on; what does need Redis (``group_add``,
``group_send``: agent messages across processes) still raises, and the consumer says the agent features are
unavailable.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis import exceptions as redis_errors

from .retry import retrying_async

logger = logging.getLogger(__name__)

CONNECTION_ERRORS = (OSError, redis_errors.ConnectionError, redis_errors.TimeoutError)


class ResilientRedisChannelLayer(RedisChannelLayer):
    #: monotonic time of the last connection error, None while Redis answers
    down_since: float | None = None

    async def receive(self, channel: str) -> dict[str, Any]:
        # Until Redis answers: a consumer has nothing else to do, and giving up would close the shopper's socket.
        until_redis_answers = retrying_async(
            retry_on=CONNECTION_ERRORS, first_wait=0.5, max_wait=10.0, before_retry=self._went_down
        )
        message = await until_redis_answers(super().receive, channel)
        if self.down_since is not None:
            logger.info("channel layer: Redis is back")
            self.down_since = None
        return message

    def _went_down(self, attempt: int, error: BaseException) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            logger.warning("channel layer: Redis unreachable (%s); retrying, agent features paused", error)
