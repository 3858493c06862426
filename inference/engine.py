"""The engine loop: ``LLMEngine`` (add_request / step / abort). The offline API is ``llm.LLM``, the
asynchronous one ``async_engine.AsyncLLM``; both drive this class.

One ``step()`` = schedule -> model forward -> sample -> update the scheduler -> detokenize and check stops.
Sequences of ``n > 1`` requests are siblings sharing the prompt: the first one is prefilled alone and the
others are admitted once its first token exists, so with prefix caching they find the prompt's full blocks
already cached instead of computing them n times.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from inference.core.config import EngineConfig
from inference.core.sampling_params import SamplingParams
from inference.core.scheduler import Scheduler, SchedulerOutput
from inference.core.sequence import FinishReason, Sequence, SequenceStatus
from inference.core.stats import SchedulerStats
from inference.detokenizer import IncrementalDetokenizer, fast_decoder
from inference.outputs import CompletionOutput, RequestMetrics, RequestOutput, Usage
from inference.worker.sampler import Sampler

PromptType = Union[str, list[int], dict[str, Any]]


@dataclass
class _Completion:
    """Engine-side state of one sibling sequence."""

    index: int
    seq: Sequence
    detok: IncrementalDetokenizer
    new_token_ids: list[int] = field(default_factory=list)  # since the last output
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None
    reported: bool = False  # its finish has been returned by step()


@dataclass
class _Request:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    metrics: RequestMetrics
    completions: list[_Completion]
    pending: list[_Completion] = field(default_factory=list)  # siblings waiting for the prompt to be cached

    @property
    def finished(self) -> bool:
        return all(c.finish_reason is not None for c in self.completions)

    def usage(self) -> Usage:
        return Usage(
            prompt_tokens=len(self.prompt_token_ids),
            completion_tokens=sum(c.seq.num_output_tokens for c in self.completions),
            cached_tokens=self.metrics.num_cached_tokens,
        )


class LLMEngine:
    """Synchronous engine. Not thread-safe: drive it from one thread (``AsyncLLM`` does that for you)."""

    def __init__(self, config: EngineConfig, model_path: str | None = None) -> None:
        from inference.worker import loader
        from inference.worker.model_runner import ModelRunner  # deferred: importing it loads torch

        self.config = config
        path = model_path or str(loader.resolve_model(config.model))
        self.model_path = path
        self.tokenizer = loader.load_tokenizer(path)
        self.model_config = loader.load_model_config(path)
        self.runner = ModelRunner(config, path)
        self.scheduler = Scheduler(config, self.runner.num_blocks)
        eos = set(self.model_config.eos_token_ids)
        if self.tokenizer.eos_token_id is not None:
            eos.add(int(self.tokenizer.eos_token_id))
        self.eos_token_ids = frozenset(eos)
        self.vocab_size = self.model_config.vocab_size
        self.sampler = Sampler(self.vocab_size, self.eos_token_ids, seed=config.seed)
        self._decoder = fast_decoder(self.tokenizer)
        self._requests: dict[str, _Request] = {}
        self._by_seq: dict[str, tuple[_Request, _Completion]] = {}
        self._outbox: list[RequestOutput] = []  # outputs produced outside step() (aborts)
        self.num_requests_added = 0
        self.num_requests_finished = 0
        self.num_requests_aborted = 0
        self.last_step_num_tokens = 0  # tokens the last step() computed; 0: nothing could be scheduled
        # Called with each step's scheduler output before the model runs (the benchmark counts the work).
        self.step_observers: list[Callable[[SchedulerOutput], None]] = []

    # -- requests -----------------------------------------------------------------------------------------

    def tokenize(self, prompt: PromptType) -> tuple[str | None, list[int]]:
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                return prompt.get("prompt"), list(prompt["prompt_token_ids"])
            prompt = prompt["prompt"]
        if isinstance(prompt, str):
            return prompt, self.tokenizer.encode(prompt)
        return None, [int(t) for t in prompt]

    def add_request(
        self,
        request_id: str,
        prompt: PromptType,
        params: SamplingParams | None = None,
        session_id: str | None = None,
        cache_salt: str | None = None,
        arrival_time: float | None = None,
    ) -> None:
        """Queue a request. Raises ValueError (``RequestTooLongError`` when it can never fit) before queueing."""
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already running")
        params = params or SamplingParams()
        text, ids = self.tokenize(prompt)
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt token ids out of the vocabulary (size {self.vocab_size}): {bad[:5]}")
        arrival = time.monotonic() if arrival_time is None else arrival_time
        completions = []
        for i in range(params.n):
            seq_id = request_id if params.n == 1 else f"{request_id}#{i}"
            if seq_id in self._by_seq:
                raise ValueError(f"request id {seq_id!r} clashes with a running request")
            # Siblings get distinct seeds, else a seeded n > 1 request would return n identical samples.
            p = params if params.seed is None or i == 0 else dataclasses.replace(params, seed=params.seed + i)
            seq = Sequence(seq_id, ids, p, session_id=session_id, cache_salt=cache_salt, arrival_time=arrival)
            completions.append(_Completion(i, seq, IncrementalDetokenizer(self._decoder, ids, p)))
        self.scheduler.add(completions[0].seq)  # raises before anything is registered
        request = _Request(request_id, text, ids, params, RequestMetrics(arrival_time=arrival), completions)
        if self.config.enable_prefix_caching:
            request.pending = completions[1:]
        else:
            for c in completions[1:]:
                self.scheduler.add(c.seq)
        self._requests[request_id] = request
        for c in completions:
            self._by_seq[c.seq.request_id] = (request, c)
        self.num_requests_added += 1

    def abort(self, request_id: str, report: bool = True) -> bool:
        """Stop a request now (its blocks are freed in this call); False if it is not running.

        With ``report`` its final output (finish_reason "abort") comes from the next ``step()``."""
        return self._finish_request(request_id, "abort", report)

    def abort_all(self, reason: FinishReason = "abort", report: bool = True) -> None:
        for request_id in list(self._requests):
            self._finish_request(request_id, reason, report)

    def _finish_request(self, request_id: str, reason: FinishReason, report: bool = True) -> bool:
        request = self._requests.get(request_id)
        if request is None:
            return False
        for c in request.completions:
            if c.finish_reason is None:
                self._finish_completion(request, c, reason)
        request.pending.clear()
        if report:
            self._outbox.append(self._make_output(request))
        return True

    def has_unfinished(self) -> bool:
        """Requests still running, or outputs that ``step()`` has not returned yet."""
        return bool(self._requests) or bool(self._outbox)

    def end_session(self, session_id: str) -> None:
        """The caller's session (a conversation) ended or went idle: its cached blocks stop outranking
        one-off traffic (see ``core.block_pool``). A later request with the same id makes it live again."""
        self.scheduler.kv.end_session(session_id)

    # -- one step -----------------------------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        """Run one batch; returns what is new per request (``RequestOutput`` in delta form)."""
        outputs, self._outbox = self._outbox, []
        sched = self.scheduler.schedule()
        self.last_step_num_tokens = sched.num_batched_tokens
        if sched.is_empty:
            return outputs
        for observe in self.step_observers:
            observe(sched)
        now = time.monotonic()
        for item in sched.scheduled:
            request, _ = self._by_seq[item.seq.request_id]
            if request.metrics.first_scheduled_time is None:
                request.metrics.first_scheduled_time = now
                request.metrics.num_cached_tokens = item.seq.num_cached_tokens
        sampled = self._sample(sched)
        finished = self.scheduler.update(sched, sampled)
        now = time.monotonic()
        touched: dict[str, _Request] = {}
        for seq_id in sampled:
            request, completion = self._by_seq[seq_id]
            self._on_token(request, completion, now)
            touched[request.request_id] = request
        for seq in finished:
            if seq.prefill_only:  # its prompt is in the cache; there is no token to report
                request, completion = self._by_seq[seq.request_id]
                self._finish_completion(request, completion, "length")
                touched[request.request_id] = request
        for request in touched.values():
            outputs.append(self._make_output(request))
        return outputs

    def _sample(self, sched: SchedulerOutput) -> dict[str, int]:
        samplers = [item.seq for item in sched.scheduled if item.samples]
        logits = self.runner.execute(sched)
        if not samplers:
            return {}
        tokens = self.sampler(
            logits,
            [s.request_id for s in samplers],
            [s.sampling_params for s in samplers],
            [s.prompt_token_ids for s in samplers],
            [s.output_token_ids for s in samplers],
        )
        return dict(zip((s.request_id for s in samplers), tokens))

    def _on_token(self, request: _Request, c: _Completion, now: float) -> None:
        seq = c.seq
        token = seq.token_ids[-1]
        c.new_token_ids.append(token)
        metrics = request.metrics
        if metrics.first_token_time is None:
            metrics.first_token_time = now
        metrics.last_token_time = now
        metrics.num_generated_tokens = max(metrics.num_generated_tokens, seq.num_output_tokens)
        if c.index == 0 and request.pending:
            # The prompt's full blocks are cached now: the siblings will find them.
            for sibling in request.pending:
                self.scheduler.add(sibling.seq)
            request.pending.clear()

        p = seq.sampling_params
        reason: FinishReason | None = None
        stop_reason: str | int | None = None
        stop_token = False
        if seq.num_output_tokens >= p.min_tokens:
            if not p.ignore_eos and token in self.eos_token_ids:
                reason, stop_token = "stop", True
            elif token in p.stop_token_ids:
                reason, stop_reason, stop_token = "stop", token, True
        stop_string = c.detok.update([token], stop_terminated=stop_token)
        if reason is None and stop_string is not None:
            reason, stop_reason = "stop", stop_string
        if reason is None and seq.status == SequenceStatus.FINISHED_LENGTH:  # the scheduler's length limits
            reason = "length"
        if reason is not None:
            c.stop_reason = stop_reason
            self._finish_completion(request, c, reason)

    def _finish_completion(self, request: _Request, c: _Completion, reason: FinishReason) -> None:
        c.finish_reason = reason
        if not c.seq.status.is_finished:
            self.scheduler.finish(c.seq.request_id, SequenceStatus.finished_by(reason))  # frees its blocks now
        # Also for a sibling never admitted, or one the scheduler already finished for its length.
        c.seq.status = SequenceStatus.finished_by(reason)
        if c.detok.stop_reason is None:
            c.detok.flush()
        self.sampler.free(c.seq.request_id)
        if request.finished:
            request.metrics.finished_time = time.monotonic()
            self._requests.pop(request.request_id, None)
            for sibling in request.completions:
                self._by_seq.pop(sibling.seq.request_id, None)
            if reason == "abort":
                self.num_requests_aborted += 1
            else:
                self.num_requests_finished += 1

    def _make_output(self, request: _Request) -> RequestOutput:
        completions = []
        for c in request.completions:
            finishing = c.finish_reason is not None and not c.reported
            text = c.detok.get_delta(finished=c.finish_reason is not None)
            if not (c.new_token_ids or text or finishing):
                continue
            completions.append(
                CompletionOutput(c.index, text, c.new_token_ids, c.finish_reason if finishing else None, c.stop_reason)
            )
            c.new_token_ids = []
            c.reported = c.reported or finishing
        return RequestOutput(
            request_id=request.request_id,
            prompt=request.prompt,
            prompt_token_ids=request.prompt_token_ids,
            outputs=completions,
            finished=request.finished,
            metrics=request.metrics,
            num_cached_tokens=request.metrics.num_cached_tokens,
            usage=request.usage() if request.finished else None,
        )

    # -- reconfiguration ----------------------------------------------------------------------------------

    _RESETTABLE = frozenset(
        {"max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching", "kv_allocator", "num_gpu_blocks_override"}
    )

    def reset(self, **overrides: Any) -> None:
        """Start over with a fresh scheduler (empty block pool and prefix cache, zeroed counters), optionally
        with other scheduling settings; the loaded model and its KV-cache tensors are kept, so trying several
        scheduling configurations (tests, benchmarks) does not reload the weights.

        ``num_gpu_blocks_override`` may only shrink the pool below the blocks the runner allocated."""
        unknown = set(overrides) - self._RESETTABLE
        if unknown:
            raise ValueError(f"cannot change {sorted(unknown)} without reloading; allowed: {sorted(self._RESETTABLE)}")
        if self._requests:
            raise RuntimeError("reset() with requests still running")
        config = dataclasses.replace(self.config, **overrides)
        num_blocks = self.runner.num_blocks
        if config.num_gpu_blocks_override is not None:
            if not 0 < config.num_gpu_blocks_override <= num_blocks:
                raise ValueError(f"num_gpu_blocks_override must be in [1, {num_blocks}] (the blocks allocated)")
            num_blocks = config.num_gpu_blocks_override
        self.config = config
        self.scheduler = Scheduler(config, num_blocks)
        self._outbox.clear()
        self.num_requests_added = self.num_requests_finished = self.num_requests_aborted = 0

    # -- counters -----------------------------------------------------------------------------------------

    def snapshot(self) -> SchedulerStats:
        """The scheduler's and KV cache's counters now; cheap enough to take after every step."""
        return self.scheduler.snapshot()

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block (refused while requests hold blocks)."""
        return self.scheduler.kv.reset_prefix_cache()

    def stats(self) -> dict[str, Any]:
        out = self.scheduler.stats()
        out.update(
            num_requests_unfinished=len(self._requests),
            num_requests_added=self.num_requests_added,
            num_requests_finished=self.num_requests_finished,
            num_requests_aborted=self.num_requests_aborted,
        )
        return out
