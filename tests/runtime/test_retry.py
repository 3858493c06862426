"""shop_assistant.runtime.retry: errors worth another try are retried with doubling waits; others at once raised."""

from __future__ import annotations

import asyncio
import time

import pytest

from shop_assistant.runtime.retry import retrying, retrying_async


class Flaky:
    """Fails with ``error`` the first ``failures`` calls, then returns how many calls it took."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.calls


def test_an_error_worth_retrying_is_retried_until_it_works_with_doubling_waits():
    seen: list[tuple[int, str]] = []
    flaky = Flaky(2, ConnectionError("down"))
    started = time.monotonic()
    result = retrying(retry_on=ConnectionError, attempts=3, first_wait=0.05,
                      before_retry=lambda attempt, error: seen.append((attempt, str(error))))(flaky)
    assert result == 3 and seen == [(1, "down"), (2, "down")]
    assert time.monotonic() - started >= 0.05 + 0.1


def test_when_the_attempts_run_out_the_last_error_itself_is_raised():
    flaky = Flaky(5, ConnectionError("still down"))
    with pytest.raises(ConnectionError, match="still down"):
        retrying(retry_on=ConnectionError, attempts=3)(flaky)
    assert flaky.calls == 3


def test_an_error_not_worth_retrying_is_raised_at_once():
    flaky = Flaky(1, ValueError("bad row"))
    retried: list[int] = []
    with pytest.raises(ValueError, match="bad row"):
        retrying(retry_on=lambda error: not isinstance(error, ValueError), attempts=5,
                 before_retry=lambda attempt, error: retried.append(attempt))(flaky)
    assert flaky.calls == 1 and retried == []


def test_the_wait_stops_doubling_at_max_wait():
    flaky = Flaky(4, OSError("gone"))
    started = time.monotonic()
    assert retrying(retry_on=OSError, first_wait=0.05, max_wait=0.05)(flaky) == 5  # attempts None: until it works
    elapsed = time.monotonic() - started
    assert 4 * 0.05 <= elapsed < 0.6  # uncapped, it would wait 0.05 + 0.1 + 0.2 + 0.4 = 0.75


def test_a_coroutine_is_retried_without_blocking_the_loop():
    flaky = Flaky(2, OSError("redis away"))
    ticks: list[int] = []

    async def call() -> int:
        return flaky()

    async def ticker() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0.01)

    async def main() -> int:
        task = asyncio.create_task(ticker())
        try:
            return await retrying_async(retry_on=(OSError,), first_wait=0.05)(call)
        finally:
            task.cancel()

    assert asyncio.run(main()) == 3
    assert len(ticks) >= 5  # the loop ran while the retry waited
