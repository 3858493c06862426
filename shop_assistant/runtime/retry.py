"""Trying an operation again while it fails for a passing reason: a busy or restarting database, Redis away.

Every retry loop of the project has the same shape, kept here on tenacity: which errors are worth another try,
how many tries in all (``None``: until one works), the wait before each retry (doubling from ``first_wait`` up to
``max_wait``; none when ``first_wait`` is 0), and ``before_retry(attempt, error)``, run before each wait (to log,
count or reconnect). When the tries run out, or an error is not worth retrying, that error itself is raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_never,
    wait_exponential,
    wait_none,
)

# Exception types, or a predicate that says whether an error is worth another try.
RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
BeforeRetry = Callable[[int, BaseException], None]


def _options(
    retry_on: RetryOn, attempts: int | None, first_wait: float, max_wait: float | None, before_retry: BeforeRetry | None
) -> dict[str, Any]:
    if isinstance(retry_on, (type, tuple)):
        types = retry_on

        def worth_retrying(error: BaseException) -> bool:
            return isinstance(error, types)

    else:
        worth_retrying = retry_on

    def before_sleep(state: RetryCallState) -> None:
        if before_retry is not None and state.outcome is not None:
            before_retry(state.attempt_number, state.outcome.exception())

    wait = wait_none()
    if first_wait:
        wait = wait_exponential(multiplier=first_wait, max=max_wait if max_wait is not None else float("inf"))
    return {
        "retry": retry_if_exception(worth_retrying),
        "stop": stop_after_attempt(attempts) if attempts else stop_never,
        "wait": wait,
        "before_sleep": before_sleep,
        "reraise": True,  # the caller sees the database's (or Redis's) own error, not tenacity's RetryError
    }


def retrying(
    *,
    retry_on: RetryOn,
    attempts: int | None = None,
    first_wait: float = 0.0,
    max_wait: float | None = None,
    before_retry: BeforeRetry | None = None,
) -> Retrying:
    """A policy for blocking code: ``retrying(...)(function, *args)`` calls ``function`` until it returns."""
    return Retrying(**_options(retry_on, attempts, first_wait, max_wait, before_retry))


def retrying_async(
    *,
    retry_on: RetryOn,
    attempts: int | None = None,
    first_wait: float = 0.0,
    max_wait: float | None = None,
    before_retry: BeforeRetry | None = None,
) -> AsyncRetrying:
    """``retrying`` for coroutines: ``await retrying_async(...)(coroutine_function, *args)``; waits with
    ``asyncio.sleep``, so the event loop goes on meanwhile."""
    return AsyncRetrying(**_options(retry_on, attempts, first_wait, max_wait, before_retry))
