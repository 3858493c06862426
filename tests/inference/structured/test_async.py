"""Structured output through AsyncLLM: a bad constraint raises on iteration, a good one streams, a consumer that
leaves frees its matchers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from inference import AsyncLLM, LLM, SamplingParams
from inference.core.sampling_params import StructuredOutputsParams as S
from inference.structured import StructuredOutputError


@pytest.fixture
def engine(llm: LLM) -> Iterator[AsyncLLM]:
    async_llm = AsyncLLM(engine=llm.llm_engine)
    yield async_llm
    async_llm.shutdown()


async def _until_idle(engine: AsyncLLM, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while engine.stats()["num_requests_unfinished"] or engine.stats()["num_streams"]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def test_a_bad_constraint_raises_on_iteration_with_the_librarys_message(engine: AsyncLLM, llm: LLM) -> None:
    with pytest.raises(StructuredOutputError, match="parenthesis is not closed"):
        async for _ in engine.stream("bad", "Hi", SamplingParams(structured_outputs=S(regex="(a"))):
            pass
    await _until_idle(engine)
    assert llm.llm_engine.structured.num_live == 0


async def test_a_constrained_stream_and_a_consumer_that_leaves(engine: AsyncLLM, llm: LLM) -> None:
    params = SamplingParams(temperature=1.0, seed=3, max_tokens=16, structured_outputs=S(regex="(yes|no), [a-z]{2,6}"))
    deltas = [d async for d in engine.stream("ok", "Is it raining?", params)]
    text = "".join(d.text for d in deltas)
    assert deltas[-1].finish_reason == "stop" and text.split(", ")[0] in ("yes", "no"), text
    long = SamplingParams(n=2, temperature=1.0, seed=1, max_tokens=200, structured_outputs=S(regex="[a-z ]{100,}"))  # no end before 100 chars
    async for _ in engine.stream("leaves", "Describe a tent.", long):
        assert llm.llm_engine.structured.num_live == 2
        break  # the consumer goes: the request is aborted
    await _until_idle(engine)
    assert llm.llm_engine.structured.num_live == 0
