"""AsyncLLM: streaming from one engine thread, aborts by consumers that leave, several loops and threads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inference import AsyncLLM, EngineDeadError, LLM, RequestTooLongError, SamplingParams, StreamDelta


@pytest.fixture
def engine(llm: LLM) -> Iterator[AsyncLLM]:
    """A fresh engine thread over the session LLM's engine (no second model load); nothing else drives that
    engine while the thread lives."""
    async_llm = AsyncLLM(engine=llm.llm_engine)
    yield async_llm
    async_llm.shutdown()
    assert not async_llm._thread.is_alive()


def _greedy(n: int, **kw: Any) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, **kw)


async def _wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out; stats: {_last_stats}"
        await asyncio.sleep(0.02)


_last_stats: dict[str, Any] = {}


def _idle(engine: AsyncLLM) -> bool:
    s = engine.stats()
    _last_stats.update(s)
    return s["num_blocks_used"] == 0 and s["num_requests_unfinished"] == 0 and s["num_streams"] == 0


async def test_stream_deltas_join_to_the_text_and_end_with_usage(engine: AsyncLLM, tokenizer: Any) -> None:
    prompt = "Three reasons to buy a cast-iron pan, according to the kitchen experts of our shop:"
    deltas = [d async for d in engine.stream("join", prompt, _greedy(16))]
    assert all(isinstance(d, StreamDelta) and d.request_id == "join" for d in deltas)
    assert all(d.usage is None and d.finish_reason is None for d in deltas[:-1])
    last = deltas[-1]
    assert last.finish_reason == "length" and last.usage is not None
    tokens = [t for d in deltas for t in d.token_ids]
    assert len(tokens) == 16
    assert "".join(d.text for d in deltas) == tokenizer.decode(tokens, skip_special_tokens=True)
    assert last.usage.prompt_tokens == len(tokenizer.encode(prompt))
    assert last.usage.completion_tokens == 16 and last.usage.cached_tokens == 0
    again = [d async for d in engine.stream("join-again", prompt, _greedy(16))]
    assert [t for d in again for t in d.token_ids] == tokens
    assert last.usage.prompt_tokens > 16 and again[-1].usage.cached_tokens == 16
    await _wait_for(lambda: _idle(engine))


async def test_breaking_out_of_the_stream_aborts_and_frees_blocks(engine: AsyncLLM) -> None:
    aborted_before = engine.stats()["num_requests_aborted"]
    seen = 0
    async for _ in engine.stream("leaver", "Write a long story about a shoe shop. " * 8, _greedy(500)):
        seen += 1
        if seen == 2:
            assert engine.stats()["num_blocks_used"] > 0
            break
    await _wait_for(lambda: _idle(engine))
    assert engine.stats()["num_requests_aborted"] == aborted_before + 1


async def test_cancelled_consumer_aborts_its_request(engine: AsyncLLM) -> None:
    aborted_before = engine.stats()["num_requests_aborted"]
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in engine.stream("cancelled", "List every colour of our sweaters. " * 8, _greedy(500)):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _wait_for(lambda: _idle(engine))
    assert engine.stats()["num_requests_aborted"] == aborted_before + 1


async def test_abort_from_another_thread_ends_the_stream(engine: AsyncLLM) -> None:
    deltas = []
    async for d in engine.stream("stopped-by-server", "Describe our store in detail.", _greedy(500)):
        deltas.append(d)
        if len(deltas) == 1:
            threading.Thread(target=engine.abort, args=("stopped-by-server",)).start()
    last = deltas[-1]
    assert last.finish_reason == "abort" and last.usage is not None
    assert last.usage.completion_tokens == sum(len(d.token_ids) for d in deltas) < 500
    await _wait_for(lambda: _idle(engine))


async def test_rejected_request_raises_on_iteration(engine: AsyncLLM) -> None:
    too_long = [100] * (engine.max_model_len + 1)
    with pytest.raises(RequestTooLongError):
        async for _ in engine.stream("too-long", too_long, _greedy(4)):
            pass
    await _wait_for(lambda: _idle(engine))


async def test_n_completions_stream_with_their_index(engine: AsyncLLM) -> None:
    deltas = [d async for d in engine.stream("three", "Name a hat:", SamplingParams(n=3, seed=5, max_tokens=6,
                                                                                     ignore_eos=True))]
    assert {d.index for d in deltas} == {0, 1, 2}
    per_index = {i: sum(len(d.token_ids) for d in deltas if d.index == i) for i in range(3)}
    assert per_index == {0: 6, 1: 6, 2: 6}
    assert deltas[-1].usage is not None and deltas[-1].usage.completion_tokens == 18
    assert sum(d.finish_reason == "length" for d in deltas) == 3


async def test_best_of_arrives_at_the_end(engine: AsyncLLM) -> None:
    params = SamplingParams(n=2, best_of=3, temperature=1.0, seed=5, max_tokens=6, ignore_eos=True)
    deltas = [d async for d in engine.stream("best", "Name a hat:", params)]
    # One output at the end: the two chosen completions, whole, and the usage of all three candidates.
    assert [d.index for d in deltas] == [0, 1] and all(len(d.token_ids) == 6 for d in deltas)
    assert deltas[-1].usage is not None and deltas[-1].usage.completion_tokens == 18
    await _wait_for(lambda: _idle(engine))


def test_streams_from_several_threads_and_event_loops(engine: AsyncLLM) -> None:
    prompts = ["Best gift for a runner:", "Is merino wool itchy?", "How do I clean suede?"]

    async def collect(prompt: str, rid: str) -> list[int]:
        return [t async for d in engine.stream(rid, prompt, _greedy(8)) for t in d.token_ids]

    expected = {p: asyncio.run(collect(p, f"solo-{i}")) for i, p in enumerate(prompts)}
    results: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        async def main() -> None:
            outs = await asyncio.gather(*(collect(p, f"t{k}-{i}") for i, p in enumerate(prompts)))
            for i, out in enumerate(outs):
                results[f"t{k}-{i}"] = out

        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors
    assert len(results) == 9
    for rid, tokens in results.items():
        assert tokens == expected[prompts[int(rid.split("-")[1])]]


def test_idle_engine_thread_sleeps(engine: AsyncLLM) -> None:
    before = engine.num_loop_iterations
    time.sleep(0.5)
    assert engine.num_loop_iterations == before
    engine.abort("nobody")  # a command wakes it exactly once or twice, then it sleeps again
    time.sleep(0.2)
    woke = engine.num_loop_iterations
    assert 1 <= woke - before <= 2
    time.sleep(0.3)
    assert engine.num_loop_iterations == woke


async def test_shutdown_ends_streams_and_refuses_new_ones(engine: AsyncLLM, llm: LLM) -> None:
    local = engine
    received: list[StreamDelta] = []

    async def consume() -> None:
        async for d in local.stream("long", "Tell me everything about boots.", _greedy(500)):
            received.append(d)

    task = asyncio.create_task(consume())
    await _wait_for(lambda: len(received) > 0)
    await asyncio.to_thread(local.shutdown)
    await asyncio.wait_for(task, 30)
    assert received[-1].finish_reason == "abort"
    assert llm.llm_engine.stats()["num_blocks_used"] == 0
    with pytest.raises(EngineDeadError):
        async for _ in local.stream("late", "hi", _greedy(2)):
            pass


async def test_many_streams_leaving_at_random_leave_no_blocks(tmp_path, make_tiny_checkpoint, tokenizer) -> None:
    """500 concurrent streams on a tiny random Llama: consumers break, get cancelled, are aborted by the server
    or read to the end; afterwards no block is in use."""
    import random

    folder = make_tiny_checkpoint(tmp_path / "tiny")
    tokenizer.save_pretrained(folder)
    local = AsyncLLM(str(folder), dtype="float32", block_size=2, num_gpu_blocks_override=64, max_num_seqs=16,
                     max_model_len=64)
    rng = random.Random(0)
    outcomes: dict[str, str] = {}

    async def consume(i: int) -> None:
        rid = f"s{i}"
        mode = rng.choice(["read", "break", "cancel", "server-abort"])
        prompt = [rng.randrange(3, 96) for _ in range(rng.randint(1, 20))]
        params = SamplingParams(temperature=1.0, seed=i, max_tokens=rng.randint(1, 12))
        leave_after = rng.randint(1, 3)
        seen = 0
        async for delta in local.stream(rid, prompt, params):
            seen += 1
            if delta.finished:
                outcomes[rid] = delta.finish_reason or "done"
            elif seen == leave_after and mode == "break":
                outcomes[rid] = "left"
                break
            elif seen == leave_after and mode == "server-abort":
                local.abort(rid)
            elif seen == leave_after and mode == "cancel":
                # Delivered at the next await, inside the stream's __anext__, like a cancelled web request.
                outcomes[rid] = "cancelled"
                asyncio.current_task().cancel()

    try:
        results = await asyncio.gather(*(consume(i) for i in range(500)), return_exceptions=True)
        assert all(r is None or isinstance(r, asyncio.CancelledError) for r in results)
        assert len(outcomes) == 500
        assert {"left", "cancelled", "abort", "length"} <= set(outcomes.values())
        await _wait_for(lambda: _idle(local))
        stats = local.stats()
        assert stats["num_requests_added"] == 500 and stats["num_blocks_used"] == 0
    finally:
        local.shutdown()


# -- the facade the web app uses ---------------------------------------------------------------------------


async def test_facade_exposes_limits_tokenizer_and_chat_encoding(engine: AsyncLLM) -> None:
    assert engine.max_model_len == engine.engine.scheduler.max_seq_len <= engine.engine.config.max_model_len
    assert engine.block_size == engine.engine.config.block_size
    assert engine.max_num_seqs == engine.engine.config.max_num_seqs
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    ids = engine.encode_chat(conversation)
    text = engine.tokenizer.decode(ids)
    assert "Be brief." in text and text.rstrip().endswith("assistant")  # the generation prompt is there
    history = engine.encode_chat(conversation, add_generation_prompt=False)
    assert len(history) < len(ids) and ids[: len(history)] == history



def test_the_tokenizer_is_used_by_one_thread_at_a_time(engine: AsyncLLM) -> None:
    results: dict[str, Any] = {}

    def other_thread() -> None:
        results["ids"] = engine.encode(" rain jacket")
        results["chat"] = engine.encode_chat([{"role": "user", "content": "Hi"}])

    with engine.tokenizer_held() as tokenizer:
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive() and not results  # waits while this thread holds the tokenizer
        # The holder itself may still go through the engine's methods (the lock is reentrant).
        assert engine.encode(" rain jacket") == list(tokenizer.encode(" rain jacket"))
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert results["ids"] == list(engine.tokenizer.encode(" rain jacket"))
    assert results["chat"] == engine.encode_chat([{"role": "user", "content": "Hi"}])

async def test_prefill_warms_the_prefix_for_the_next_request_of_the_same_salt_only(engine: AsyncLLM) -> None:
    engine.engine.reset_prefix_cache()
    bs = engine.block_size
    prefix = list(range(2000, 2000 + 3 * bs + 5))  # 3 full blocks and a partial one
    warm = await engine.prefill(prefix, cache_salt="store-a")
    assert warm.prompt_tokens == len(prefix) and warm.completion_tokens == 0 and warm.cached_tokens == 0
    await _wait_for(lambda: _idle(engine))
    question = prefix + [7, 8, 9]
    same = await engine.generate(question, _greedy(2), cache_salt="store-a")
    assert same[-1].usage.cached_tokens == 3 * bs
    other = await engine.generate(question, _greedy(2), cache_salt="store-b")
    assert other[-1].usage.cached_tokens == 0
    await _wait_for(lambda: _idle(engine))


async def test_a_request_failing_in_a_step_ends_its_stream_alone(engine: AsyncLLM, monkeypatch) -> None:
    """Issue 39: one request's fault inside a step (here its sampler setup raising, as torch's manual_seed did for
    a seed past 64 bits) ends that stream with finish_reason "error" and the message; a concurrent stream in the
    same batches finishes normally with the tokens it has alone."""
    prompt = "Three reasons to buy a rain jacket:"
    alone = [t for d in await engine.generate(prompt, _greedy(8), "alone") for t in d.token_ids]
    sampler = engine.engine.sampler
    setup = sampler._generator

    def generator(request_id: str, seed: int | None, device: Any) -> Any:
        if request_id == "faulty":
            raise ValueError("Overflow when unpacking long long")
        return setup(request_id, seed, device)

    monkeypatch.setattr(sampler, "_generator", generator)
    good, bad = await asyncio.wait_for(asyncio.gather(
        engine.generate(prompt, _greedy(8), "good"),
        engine.generate("Tell me about socks.", SamplingParams(max_tokens=8, seed=1), "faulty"),
    ), 60)
    assert [t for d in good for t in d.token_ids] == alone and good[-1].finish_reason == "length"
    assert bad[-1].finished and bad[-1].finish_reason == "error"
    assert "Overflow when unpacking long long" in (bad[-1].error or "")
    await _wait_for(lambda: _idle(engine))


async def test_a_failed_forward_closes_every_open_stream_and_the_engine_goes_on(engine: AsyncLLM, monkeypatch) -> None:
    """A failure of the whole step (the model's forward) fails the batch, but no stream is left open: each one
    raises, and the next requests are served."""
    runner = engine.engine.runner
    execute = runner.execute
    calls = {"n": 0}

    def failing(sched: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("device lost")
        return execute(sched)

    monkeypatch.setattr(runner, "execute", failing)

    async def consume(rid: str) -> list[StreamDelta]:
        got = []
        async for d in engine.stream(rid, "Tell me everything about boots.", _greedy(200)):
            got.append(d)
        return got

    results = await asyncio.wait_for(asyncio.gather(consume("one"), consume("two"), return_exceptions=True), 60)
    assert all(isinstance(r, RuntimeError) and "device lost" in str(r) for r in results), results
    await _wait_for(lambda: _idle(engine))
    after = await engine.generate("Hello", _greedy(2), "after")
    assert after[-1].finish_reason == "length"


# --- fair share: a shopper's first token while a heavy API request runs (issue 39, item 11) -------------------------

_CHAT_PRIORITY, _API_PRIORITY = 0, 1  # the web app's (shop_assistant.runtime.engine_service): chat, /v1


def _chat_prompt(engine: AsyncLLM, i: int) -> list[int]:
    """A chat-sized prompt (about 300 tokens: the store's instructions, a few product rows, the question),
    different each time so that none of it comes from the prefix cache."""
    rows = "\n".join(f"- Trail boot model {i}-{k}: waterproof leather, {200 + k} g, size 36-47, 129.00 USD"
                     for k in range(12))
    conversation = [{"role": "system", "content": f"You are the shop assistant of store {i}. Products:\n{rows}"},
                    {"role": "user", "content": f"Which boot is the lightest, question {i}?"}]
    return engine.encode_chat(conversation)  # the chat's own encoding


async def _first_token_ms(engine: AsyncLLM, rid: str, prompt: list[int], priority: int, timeout: float) -> float:
    started = time.perf_counter()
    stream = engine.stream(rid, prompt, _greedy(4), cache_salt=rid, priority=priority)
    try:
        async with asyncio.timeout(timeout):
            async for delta in stream:
                if delta.token_ids:
                    return (time.perf_counter() - started) * 1000
    except TimeoutError:
        return timeout * 1000  # a lower bound: it had no token yet
    finally:
        await stream.aclose()
    raise AssertionError("the request ended without a token")


async def measure_fair_share(engine: AsyncLLM, shopper_priority: int, rounds: int = 3,
                             timeout: float = 30.0) -> tuple[float, float, int]:
    """(idle ms, loaded ms, preemptions): the median first token of a chat-sized request alone, and while one
    API-style request runs n = best_of = max_num_seqs candidates of a 1,400-token prompt (max_tokens 512)."""
    idle = sorted([await _first_token_ms(engine, f"idle-{i}", _chat_prompt(engine, i), shopper_priority, timeout)
                   for i in range(rounds)])[rounds // 2]
    seats = engine.max_num_seqs
    heavy_prompt = [1000 + (7 * k) % 40000 for k in range(1400)]
    heavy_params = SamplingParams(n=seats, best_of=seats, temperature=1.0, max_tokens=512, seed=3)
    heavy = engine.stream("heavy", heavy_prompt, heavy_params, cache_salt="api-key", priority=_API_PRIORITY)
    decoding: set[int] = set()

    async def drain() -> None:
        async for delta in heavy:
            if delta.token_ids:
                decoding.add(delta.index)

    task = asyncio.create_task(drain())
    before = engine.stats()["num_preemptions"]
    try:
        await _wait_for(lambda: len(decoding) == seats, timeout=120)  # every candidate decoding
        loaded = sorted([await _first_token_ms(engine, f"busy-{i}", _chat_prompt(engine, 100 + i),
                                               shopper_priority, timeout) for i in range(rounds)])[rounds // 2]
        assert not task.done(), "the heavy request ended before the measurement did"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await heavy.aclose()
    return idle, loaded, engine.stats()["num_preemptions"] - before


@pytest.mark.heavy
async def test_a_shoppers_first_token_keeps_its_latency_while_a_heavy_api_request_runs(
    model_path: Any, test_device: str
) -> None:
    """The issue: n = best_of = 64, max_tokens 512, a 1,400-token prompt held the engine 84.5 s and a shopper's
    answer took 17.4 s instead of 4.7 s. With the chat's requests at a higher priority than the API's, a shopper's
    first token while such a request runs is at most twice its idle value. The engine has the web app's
    defaults (EngineConfig's: 64 seats, 512 MiB of KV cache, the default dtype), as settings.ENGINE leaves them.

    Measured on the 2-core machine (shared with other jobs): before (one priority for all, the old order) idle
    1,013 ms, loaded > 60,000 ms (no seat until a candidate ended; 22 preemptions); after, over six runs, idle
    437-623 ms, loaded 397-1,064 ms (0.91-1.71x, 1-2 preemptions; the machine shared with other jobs)."""
    llm = LLM(str(model_path), device=test_device)
    engine = AsyncLLM(engine=llm.llm_engine)
    try:
        idle, loaded, preemptions = await measure_fair_share(engine, _CHAT_PRIORITY, rounds=5)
    finally:
        engine.shutdown()
    print(f"\nshopper first token: idle {idle:.0f} ms, with a heavy API request {loaded:.0f} ms "
          f"({loaded / idle:.2f}x), {preemptions} preemptions")
    assert loaded <= 2 * idle, (idle, loaded)
