"""``AsyncLLM``: the engine for the web app. One background thread owns the ``LLMEngine`` (scheduler, model,
tokenizer); every other thread only appends commands to a queue under a condition variable and wakes it.

Consumers use ``async for delta in engine.stream(...)`` from any event loop; the engine thread hands each
delta to the consumer's loop with ``call_soon_threadsafe``. A consumer that stops listening (breaks out,
drops the stream or is cancelled) aborts its request, which frees its KV blocks on the engine thread's next
turn, before the next step.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from inference.chat_template import encode_chat
from inference.core.config import EngineConfig
from inference.core.sampling_params import SamplingParams, StructuredOutputsParams
from inference.engine import LLMEngine, PromptType
from inference.outputs import RequestOutput, StreamDelta, Usage

logger = logging.getLogger(__name__)

# Only as a safety net: if a step schedules nothing while requests are queued (should not happen), the loop
# waits this long for a command instead of spinning.
_STALL_WAIT_S = 0.01


class EngineDeadError(RuntimeError):
    """The engine has been shut down or its thread failed."""


class _Sink:
    """The engine thread's end of a stream: where to put deltas. It never references the ``RequestStream``, so
    a consumer that drops its stream lets it be collected (which aborts the request)."""

    def __init__(self, request_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.request_id = request_id
        self.loop = loop
        self.queue: asyncio.Queue[StreamDelta | BaseException] = asyncio.Queue()
        self.cancelled = False  # set by the consumer side; read by the engine thread

    def deliver(self, item: StreamDelta | BaseException) -> bool:
        """Hand an item to the consumer's loop; False when that loop is gone."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # loop closed
            return False
        return True


class RequestStream:
    """Async iterator over one request's ``StreamDelta``s. The request is submitted on the first ``__anext__``;
    leaving early (break, ``aclose``, cancellation, or just dropping the object) aborts it."""

    def __init__(
        self,
        engine: AsyncLLM,
        request_id: str,
        submit: Callable[[_Sink], None],
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.request_id = request_id
        self._engine = engine
        self._submit = submit
        self._prepare = prepare  # awaited before the submission (a constraint compiled off the engine thread)
        self._sink: _Sink | None = None
        self._done = False

    def __aiter__(self) -> RequestStream:
        return self

    @property
    def finished(self) -> bool:
        """Its last delta (or error) has been read, or it was left; nothing more will come."""
        return self._done

    async def __anext__(self) -> StreamDelta:
        if self._done:
            raise StopAsyncIteration
        if self._sink is None:
            if self._prepare is not None:
                prepare, self._prepare = self._prepare, None
                await prepare()
            sink = _Sink(self.request_id, asyncio.get_running_loop())
            self._submit(sink)  # raises EngineDeadError after shutdown: then there is nothing to abort
            self._sink = sink
        try:
            item = await self._sink.queue.get()
        except BaseException:  # cancelled (or interrupted) while waiting: nobody will read the rest
            self._cancel()
            raise
        if isinstance(item, BaseException):
            self._done = True
            raise item
        if item.finished:
            self._done = True
        return item

    async def aclose(self) -> None:
        self._cancel()

    async def __aenter__(self) -> RequestStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cancel()

    def _cancel(self) -> None:
        if self._sink is not None and not self._done:
            self._done = True
            self._sink.cancelled = True
            self._engine._abort(self.request_id, gone=self._sink)

    def __del__(self) -> None:
        # A consumer that broke out of `async for` just drops the iterator.
        try:
            self._cancel()
        except Exception:  # interpreter shutdown
            pass


class AsyncLLM:
    """``AsyncLLM(model=None, **EngineConfig fields)`` or ``AsyncLLM.from_engine(LLMEngine(...))``."""

    def __init__(self, model: str | None = None, *, engine: LLMEngine | None = None, **config: Any) -> None:
        self.engine = engine if engine is not None else LLMEngine(EngineConfig(model=model, **config))
        self._cond = threading.Condition()
        self._commands: deque[Callable[[], None]] = deque()
        self._closing = False
        self._dead: BaseException | None = None
        self._streams: dict[str, _Sink] = {}  # engine thread only
        self._ids = itertools.count()
        # The Hugging Face tokenizer is not safe from several threads at once ("Already borrowed"), and the
        # web app calls it from worker threads while this engine's thread may encode a text prompt. Reentrant:
        # a caller holding it (``tokenizer_held``) may still call ``encode`` or ``encode_chat``.
        self._tokenizer_lock = threading.RLock()
        self._stats: dict[str, Any] = {}
        self._publish_stats()
        self.num_loop_iterations = 0  # lets tests check the thread sleeps when idle
        self._thread = threading.Thread(target=self._run, name="inference-engine", daemon=True)
        self._thread.start()

    @classmethod
    def from_engine(cls, engine: LLMEngine) -> AsyncLLM:
        return cls(engine=engine)

    # -- what callers may read, any thread ----------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (Hugging Face), which carries its chat template. Not thread-safe: call it
        inside ``tokenizer_held()``, or use ``encode`` / ``encode_chat``, which take the lock themselves."""
        return self.engine.tokenizer

    @contextmanager
    def tokenizer_held(self) -> Iterator[Any]:
        """``with engine.tokenizer_held() as tokenizer:`` the tokenizer, no other thread using it meanwhile."""
        with self._tokenizer_lock:
            yield self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        """Most tokens (prompt + answer) one request may reach: ``max_model_len``, or less when the whole KV
        cache holds fewer."""
        return self.engine.scheduler.max_seq_len

    @property
    def vocab_size(self) -> int:
        """Token ids a prompt may hold are ``0 .. vocab_size - 1`` (the model's embedding rows)."""
        return self.engine.vocab_size

    @property
    def block_size(self) -> int:
        return self.engine.config.block_size

    @property
    def max_num_seqs(self) -> int:
        """Most sequences running at once; a request's ``best_of`` candidates must fit in it."""
        return self.engine.scheduler.max_num_seqs

    @property
    def model_name(self) -> str:
        return self.engine.model_path

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (any thread)."""
        with self._tokenizer_lock:
            return list(self.engine.tokenizer.encode(text))

    def encode_chat(self, conversation: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
        """Prompt token ids of a conversation in the model's chat template (any thread)."""
        with self._tokenizer_lock:
            return encode_chat(self.engine.tokenizer, conversation, add_generation_prompt)

    # -- public API, any thread ---------------------------------------------------------------------------

    def stream(
        self,
        request_id: str | None,
        prompt: PromptType,
        params: SamplingParams | None = None,
        session_id: str | None = None,
        cache_salt: str | None = None,
        priority: int = 0,
    ) -> RequestStream:
        """``async for delta in engine.stream(...)``; a rejected request raises its ValueError on iteration.
        ``priority``: lower first (``LLMEngine.add_request``).

        With ``n > 1`` the candidates' deltas interleave, each with its ``index``; with ``best_of > n`` the
        chosen ``n`` arrive only when the request finishes (see ``engine``)."""
        rid = request_id if request_id is not None else f"async-{next(self._ids)}"
        # The request arrives now, as in vLLM: the wait for the engine thread's current step counts in its
        # queue time and time to first token, not as the caller's.
        arrival = time.monotonic()

        def submit(sink: _Sink) -> None:
            self._enqueue(lambda: self._add(sink, prompt, params, session_id, cache_salt, arrival, priority))

        async def prepare() -> None:
            if params is not None and params.structured_outputs is not None:
                await self.compile_constraint(params.structured_outputs)

        return RequestStream(self, rid, submit, prepare)

    async def compile_constraint(self, constraint: StructuredOutputsParams) -> None:
        """Compile ``constraint`` into the engine's grammar cache on a worker thread, so that the engine thread's
        ``add_request`` finds it there: a new schema's compilation (two seconds for the planner's ten tools)
        then holds up its own request, not every running sequence's next step (vLLM compiles off its core loop
        too). One that does not compile is left for ``add_request`` to refuse with the library's message."""
        try:
            await asyncio.to_thread(self.engine.structured.compile, constraint)
        except Exception:  # noqa: BLE001 - refused where every request's errors are: add_request
            logger.debug("constraint did not compile ahead of its request", exc_info=True)

    async def generate(
        self,
        prompt: PromptType,
        params: SamplingParams | None = None,
        request_id: str | None = None,
        **kwargs: Any,
    ) -> list[StreamDelta]:
        """Convenience: every delta of one request."""
        return [d async for d in self.stream(request_id, prompt, params, **kwargs)]

    async def prefill(
        self, prompt: PromptType, cache_salt: str | None = None, session_id: str | None = None
    ) -> Usage:
        """Compute a prompt's KV blocks into the prefix cache without sampling (pre-warming a system prompt
        before the first shopper needs it). The usage's ``cached_tokens`` says how much was there already."""
        deltas = await self.generate(
            prompt, SamplingParams(max_tokens=0), session_id=session_id, cache_salt=cache_salt
        )
        usage = deltas[-1].usage
        assert usage is not None  # the last delta of a finished request carries it
        return usage

    def end_session(self, session_id: str) -> None:
        """A session (conversation) is over: see ``LLMEngine.end_session``."""
        try:
            self._enqueue(lambda: self.engine.end_session(session_id))
        except EngineDeadError:
            pass  # nothing is cached any more

    def abort(self, request_id: str) -> None:
        """Abort a request; its consumer (if any) gets a final delta with finish_reason "abort"."""
        self._abort(request_id)

    def stats(self) -> dict[str, Any]:
        """Counters as of the engine thread's last turn (KV cache, prefix cache, requests)."""
        return dict(self._stats)

    def is_running(self) -> bool:
        return self._thread.is_alive() and not self._closing

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Abort everything (consumers get "abort"), stop the thread and wait for it."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- internals ----------------------------------------------------------------------------------------

    def _enqueue(self, command: Callable[[], None]) -> None:
        with self._cond:
            if self._closing or self._dead is not None:
                raise EngineDeadError("the engine is shut down") from self._dead
            self._commands.append(command)
            self._cond.notify()

    def _abort(self, request_id: str, gone: _Sink | None = None) -> None:
        """``gone``: the sink of a consumer that left; only its own request is aborted (the id may be reused)."""

        def command() -> None:
            if gone is None:
                self.engine.abort(request_id)
            elif self._streams.get(request_id) is gone:
                del self._streams[request_id]
                self.engine.abort(request_id, report=False)

        try:
            self._enqueue(command)
        except EngineDeadError:
            pass  # everything was aborted already

    def _add(
        self,
        sink: _Sink,
        prompt: PromptType,
        params: SamplingParams | None,
        session_id: str | None,
        cache_salt: str | None,
        arrival_time: float,
        priority: int = 0,
    ) -> None:
        if sink.cancelled:  # the consumer left before the engine saw the request
            return
        if sink.request_id in self._streams:
            sink.deliver(ValueError(f"request {sink.request_id!r} is already running"))
            return
        try:
            if _is_text(prompt):  # the engine encodes it here, on this thread: not while a web thread does
                with self._tokenizer_lock:
                    self.engine.add_request(
                        sink.request_id, prompt, params, session_id, cache_salt, arrival_time, priority
                    )
            else:
                self.engine.add_request(sink.request_id, prompt, params, session_id, cache_salt, arrival_time, priority)
        except Exception as exc:  # rejected: the consumer gets the error instead of a delta
            sink.deliver(exc)
            return
        self._streams[sink.request_id] = sink

    def _run(self) -> None:
        try:
            self._loop_forever()
        except BaseException as exc:  # consumers must not be left waiting forever
            logger.exception("inference engine thread failed")
            with self._cond:
                self._dead = exc
            self._fail_all(EngineDeadError(f"the engine thread failed: {exc!r}"))

    def _loop_forever(self) -> None:
        stalled = False
        while True:
            with self._cond:
                if stalled:
                    if not (self._commands or self._closing):
                        self._cond.wait(_STALL_WAIT_S)
                else:
                    while not (self._commands or self._closing or self.engine.has_unfinished()):
                        self._cond.wait()
                commands = list(self._commands)
                self._commands.clear()
                closing = self._closing
            self.num_loop_iterations += 1
            for command in commands:
                command()
            if closing:
                self.engine.abort_all()
                self._dispatch(self.engine.step())
                self._publish_stats()
                for sink in self._streams.values():
                    sink.deliver(EngineDeadError("the engine was shut down"))
                self._streams.clear()
                self.engine.close()  # on this thread: no step of its workers is in flight any more
                return
            stalled = False
            if self.engine.has_unfinished():
                try:
                    outputs = self.engine.step()
                except Exception as exc:
                    # Fail the batch's requests but keep serving: the next requests may well succeed.
                    logger.exception("engine step failed")
                    self._fail_all(RuntimeError(f"engine step failed: {exc!r}"))
                    outputs = []
                stalled = self.engine.last_step_num_tokens == 0 and self.engine.has_unfinished()
                # Stats first: a consumer that has seen a delta then reads counters at least that recent.
                self._publish_stats()
                self._dispatch(outputs)
            self._publish_stats()

    def _dispatch(self, outputs: list[RequestOutput]) -> None:
        for output in outputs:
            sink = self._streams.get(output.request_id)
            if sink is None:
                continue
            for delta in _to_deltas(output):
                if not sink.deliver(delta):  # its event loop is gone
                    self.engine.abort(output.request_id, report=False)
                    self._streams.pop(output.request_id, None)
                    break
            if output.finished:
                self._streams.pop(output.request_id, None)

    def _publish_stats(self) -> None:
        stats = self.engine.stats()
        stats["num_streams"] = len(self._streams)
        self._stats = stats  # one reference swap: readers on other threads see a consistent dict

    def _fail_all(self, exc: BaseException) -> None:
        try:
            self.engine.abort_all("error", report=False)
        except Exception:
            logger.exception("could not release the requests of a failed engine")
        for sink in list(self._streams.values()):
            sink.deliver(exc)
        self._streams.clear()


def _is_text(prompt: PromptType) -> bool:
    """Whether the engine must tokenize ``prompt`` (text, not token ids)."""
    return isinstance(prompt, str) or (isinstance(prompt, dict) and "prompt_token_ids" not in prompt)


def _to_deltas(output: RequestOutput) -> list[StreamDelta]:
    deltas = [
        StreamDelta(output.request_id, c.text, c.token_ids, c.index, c.finish_reason, c.stop_reason)
        for c in output.outputs
    ]
    if output.finished:
        if not deltas:
            deltas.append(StreamDelta(output.request_id, ""))
        deltas[-1].usage = output.usage
        deltas[-1].metrics = output.metrics
        deltas[-1].error = output.error
    return deltas
