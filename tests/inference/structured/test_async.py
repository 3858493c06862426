"""Structured output through AsyncLLM: a bad constraint raises on iteration, a good one streams, a consumer that
leaves frees its matchers."""

from __future__ import annotations

import asyncio
import threading
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


async def test_a_new_constraint_is_compiled_off_the_engine_thread(engine: AsyncLLM, llm: LLM, monkeypatch) -> None:
    """Compiling a new schema takes seconds for a large one: on the engine thread it would stall every running
    sequence's next step, so the stream compiles it on a worker thread first and the engine finds it cached."""
    structured = llm.llm_engine.structured
    threads: list[str] = []
    compile_ = structured.compile

    def recording(params: S):
        threads.append(threading.current_thread().name)
        return compile_(params)

    monkeypatch.setattr(structured, "compile", recording)
    before = structured.compiler.num_compiled
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "teal", "ochre"]}}, "required": ["colour"]}
    params = SamplingParams(max_tokens=16, structured_outputs=S(json=schema))
    deltas = [d async for d in engine.stream("new-schema", "Pick a colour.", params)]
    assert deltas[-1].finish_reason == "stop" and structured.compiler.num_compiled == before + 1
    engine_thread = engine._thread.name
    assert len(threads) == 2 and threads[0] != engine_thread and threads[1] == engine_thread  # compiled, then a hit
    # Prepared ahead (a planner's prewarm): the request itself then compiles nothing at all.
    other = S(json={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    await engine.compile_constraint(other)
    assert structured.compiler.num_compiled == before + 2
    [d async for d in engine.stream("prepared", "A number?", SamplingParams(max_tokens=8, structured_outputs=other))]
    assert structured.compiler.num_compiled == before + 2
