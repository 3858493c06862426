"""The engine loop: ``LLMEngine`` (add_request / step / abort). The offline API is ``llm.LLM``, the
asynchronous one ``async_engine.AsyncLLM``; both drive this class.

One ``step()`` = schedule -> model forward -> sample -> update the scheduler -> detokenize and check stops.

Parallel sampling (``SamplingParams.n``, ``best_of``), as vLLM's: a request runs ``best_of`` candidate
sequences. The prompt is prefilled once, by candidate 0; the step that finishes it samples every candidate's
first token from that one logits row (each candidate with its own seed, ``seed + i``), and the scheduler
forks the others from candidate 0: they hold all the prompt's KV blocks by reference, the partial last block
included, which is copied on write by the first candidates to write into it. From then on each candidate is
an ordinary sequence (preempted and recomputed alone if memory runs out); each one's blocks are released when
it finishes, all of them on abort. With ``best_of > n`` nothing is reported until every candidate has
finished; then the ``n`` with the highest cumulative logprob come out at once, best first, as indices
0..n-1. Usage counts every candidate's tokens (all were generated, as OpenAI bills ``best_of``).

Structured output (``SamplingParams.structured_outputs``, ``inference.structured``): ``add_request`` compiles the
constraint (cached) and refuses one that does not compile (``StructuredOutputError``) before queueing; each
candidate gets its own grammar matcher; each step the sampler masks every constrained row with its matcher's
allowed tokens, and the sampled token advances the matcher. A sequence whose grammar is complete (its end
token accepted) finishes with "stop". Matchers are freed with their sequences (finish, abort, failure).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from inference.core.config import EngineConfig
from inference.core.sampling_params import SEED_MAX, SEED_MIN, SamplingParams
from inference.core.scheduler import Scheduler, SchedulerOutput
from inference.core.sequence import FinishReason, Sequence, SequenceStatus
from inference.core.stats import SchedulerStats
from inference.detokenizer import IncrementalDetokenizer, fast_decoder
from inference.outputs import CompletionOutput, RequestMetrics, RequestOutput, Usage
from inference.structured.compiler import is_json
from inference.structured.matchers import StructuredOutputs
from inference.worker.sampler import Sampler

PromptType = Union[str, list[int], dict[str, Any]]

logger = logging.getLogger(__name__)


@dataclass
class _Completion:
    """Engine-side state of one sibling sequence."""

    index: int
    seq: Sequence
    detok: IncrementalDetokenizer
    new_token_ids: list[int] = field(default_factory=list)  # since the last output
    new_logprobs: list[float] = field(default_factory=list)  # with SamplingParams(logprobs=0)
    cumulative_logprob: float = 0.0  # summed when the request needs logprobs (asked for, or best_of > n)
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
    completions: list[_Completion]  # every candidate (best_of of them)
    error: str | None = None  # set when an exception of its own failed it ("error"); see ``_fail_request``

    @property
    def finished(self) -> bool:
        return all(c.finish_reason is not None for c in self.completions)

    @property
    def ranks_candidates(self) -> bool:
        """best_of > n: which candidates are returned is only known once all have finished."""
        return self.params.num_candidates > self.params.n

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
        self.structured = StructuredOutputs(self.tokenizer, self.vocab_size, self.eos_token_ids)
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
        priority: int = 0,
    ) -> None:
        """Queue a request. Raises ValueError (``RequestTooLongError`` when it can never fit) before queueing.

        ``priority`` (vLLM's): lower values are scheduled first and may preempt higher ones (``core.scheduler``)."""
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already running")
        params = params or SamplingParams()
        text, ids = self.tokenize(prompt)
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt token ids out of the vocabulary (size {self.vocab_size}): {bad[:5]}")
        arrival = time.monotonic() if arrival_time is None else arrival_time
        # Compiled (or found in the cache) before anything is registered: a bad constraint is refused here.
        grammar = None if params.structured_outputs is None else self.structured.compile(params.structured_outputs)
        completions = []
        num_candidates = params.num_candidates
        for i in range(num_candidates):
            seq_id = request_id if num_candidates == 1 else f"{request_id}#{i}"
            if seq_id in self._by_seq:
                raise ValueError(f"request id {seq_id!r} clashes with a running request")
            # Candidates get distinct seeds (vLLM: seed + index), else a seeded request would return n
            # identical samples.
            # Wrapped within the signed 64-bit range SamplingParams accepts: the same generator stream as seed + i
            # (the sampler seeds torch with the value modulo 2**64).
            p = params if params.seed is None or i == 0 else dataclasses.replace(
                params, seed=_wrap_seed(params.seed + i)
            )
            seq = Sequence(
                seq_id, ids, p, session_id=session_id, cache_salt=cache_salt, arrival_time=arrival, priority=priority
            )
            completions.append(_Completion(i, seq, IncrementalDetokenizer(self._decoder, ids, p)))
        # Candidate 0 prefills the prompt; the others are forked from it. Raises before anything is registered.
        self.scheduler.add(completions[0].seq, [c.seq for c in completions[1:]])
        if grammar is not None:
            compact_json = is_json(params.structured_outputs)  # type: ignore[arg-type]
            for c in completions:
                self.structured.start(c.seq.request_id, grammar, compact_json)
        request = _Request(request_id, text, ids, params, RequestMetrics(arrival_time=arrival), completions)
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
        # Forks first: a parent finished before them would hand its pending forks on to one of them.
        for c in reversed(request.completions):
            if c.finish_reason is None:
                self._finish_completion(request, c, reason)
        output = self._make_output(request) if report else None
        if output is not None:
            self._outbox.append(output)
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
        sampled, logprobs, failed = self._sample(sched)
        touched: dict[str, _Request] = {}
        # A request whose row could not be sampled fails alone, before update() looks for its token: its blocks
        # are freed now and the scheduler skips it; the rest of the batch goes on.
        for seq_id, exc in failed.items():
            entry = self._by_seq.get(seq_id)
            if entry is not None and entry[0].error is None:
                self._fail_request(entry[0], exc)
                touched[entry[0].request_id] = entry[0]
        finished = self.scheduler.update(sched, sampled)
        now = time.monotonic()
        for seq_id in sampled:
            entry = self._by_seq.get(seq_id)
            if entry is None or entry[1].finish_reason is not None:  # its request failed above
                continue
            request, completion = entry
            touched[request.request_id] = request
            try:  # detokenization and stop checks: this request's own work
                self._on_token(request, completion, logprobs.get(seq_id), now)
            except Exception as exc:
                self._fail_request(request, exc)
        for seq in finished:
            if seq.prefill_only:  # its prompt is in the cache; there is no token to report
                request, completion = self._by_seq[seq.request_id]
                touched[request.request_id] = request
                try:
                    self._finish_completion(request, completion, "length")
                except Exception as exc:
                    self._fail_request(request, exc)
        for request in touched.values():
            try:
                output = self._make_output(request)
            except Exception as exc:
                self._fail_request(request, exc)
                output = self._make_output(request)  # the error output touches no detokenizer
            if output is not None:
                outputs.append(output)
        return outputs

    def _sample(self, sched: SchedulerOutput) -> tuple[dict[str, int], dict[str, float], dict[str, Exception]]:
        """Each sampling sequence's token (and logprob, where needed), and the sequences that could not be
        sampled (``Sampler``'s per-row errors). Logits row ``i`` belongs to the ``i``-th sampling item; the forks
        of an item that finishes its prompt sample from that same row. A failure of the forward itself raises."""
        rows: list[int] = []
        seqs: list[Sequence] = []
        for row, item in enumerate(item for item in sched.scheduled if item.samples):
            for seq in (item.seq, *item.forks):
                rows.append(row)
                seqs.append(seq)
        ids = [s.request_id for s in seqs]
        # Filled on the CPU before the forward, which (on a GPU) it overlaps.
        bitmasks = self.structured.bitmasks(ids)
        logits = self.runner.execute(sched)
        if not seqs:
            return {}, {}, {}
        if len(rows) != logits.shape[0]:
            logits = logits[rows]
        out = self.sampler(
            logits,
            ids,
            [s.sampling_params for s in seqs],
            [s.prompt_token_ids for s in seqs],
            [s.output_token_ids for s in seqs],
            bitmasks,
        )
        failed = {ids[row]: exc for row, exc in out.errors.items()}
        logprobs = {rid: lp for rid, lp in zip(ids, out.logprobs) if lp is not None and rid not in failed}
        return {rid: t for rid, t in zip(ids, out.token_ids) if rid not in failed}, logprobs, failed

    def _on_token(self, request: _Request, c: _Completion, logprob: float | None, now: float) -> None:
        seq = c.seq
        token = seq.token_ids[-1]
        c.new_token_ids.append(token)
        if logprob is not None:
            c.cumulative_logprob += logprob
            if seq.sampling_params.logprobs is not None:
                c.new_logprobs.append(logprob)
        metrics = request.metrics
        if metrics.first_token_time is None:
            metrics.first_token_time = now
        metrics.last_token_time = now
        metrics.num_generated_tokens = max(metrics.num_generated_tokens, seq.num_output_tokens)

        p = seq.sampling_params
        reason: FinishReason | None = None
        stop_reason: str | int | None = None
        stop_token = False
        if self.structured.accept(seq.request_id, token):  # the grammar is complete: nothing more may follow
            reason, stop_token = "stop", token in self.eos_token_ids
        elif seq.num_output_tokens >= p.min_tokens:
            if not p.ignore_eos and token in self.eos_token_ids:
                reason, stop_token = "stop", True
            elif token in p.stop_token_ids:
                reason, stop_reason, stop_token = "stop", token, True
        stop_string = c.detok.update([token], stop_terminated=stop_token)
        if reason is None and stop_string is not None:
            reason, stop_reason = "stop", stop_string
        if reason is None and seq.status == SequenceStatus.FINISHED_LENGTH:  # the scheduler's length limits
            reason = "length"
        if reason is None:
            jumped = self._jump_forward(c)
            if jumped is not None:  # the forced tokens complete the grammar ("") or end on a stop string
                reason, stop_reason = "stop", jumped or None
        if reason is not None:
            c.stop_reason = stop_reason
            self._finish_completion(request, c, reason)

    def _jump_forward(self, c: _Completion) -> str | None:
        """Append the tokens the sequence's grammar forces (``StructuredOutputs.forced_tokens``): the next step
        prefills them with the last sampled one and samples after them, one model step for the whole span.
        Within max_tokens and max_model_len, leaving room for the token sampled after them. Returns "" when they
        complete the grammar, the stop string when they end on one, None when the sequence goes on."""
        seq, p = c.seq, c.seq.sampling_params
        if not self.config.structured_jump_forward or p.logprobs is not None:
            return None
        room = self.config.max_model_len - seq.num_tokens - 1
        if p.max_tokens is not None:
            room = min(room, p.max_tokens - seq.num_output_tokens - 1)
        forced = self.structured.forced_tokens(seq.request_id, room)
        if not forced:
            return None
        for token in forced:
            seq.append_token(token)
        c.new_token_ids.extend(forced)
        stop_string = c.detok.update(forced, stop_terminated=False)
        if stop_string is not None:
            return stop_string
        return "" if self.structured.is_complete(seq.request_id) else None

    def _fail_request(self, request: _Request, exc: Exception) -> None:
        """An exception raised by this request's own work in a step (its sampler setup or row, its detokenizer
        or stop checks, its output): it ends, every candidate with finish_reason "error", its blocks freed now,
        and the message goes out with its last output. The other requests of the step are not touched."""
        logger.error("request %s failed in an engine step", request.request_id, exc_info=exc)
        request.error = f"{type(exc).__name__}: {exc}"
        for c in reversed(request.completions):  # forks first, as in _finish_request
            if c.finish_reason is None:
                self._finish_completion(request, c, "error")

    def _finish_completion(self, request: _Request, c: _Completion, reason: FinishReason) -> None:
        c.finish_reason = reason
        if not c.seq.status.is_finished:
            self.scheduler.finish(c.seq.request_id, SequenceStatus.finished_by(reason))  # frees its blocks now
        # Also for a candidate never forked, or one the scheduler already finished for its length.
        c.seq.status = SequenceStatus.finished_by(reason)
        if c.detok.stop_reason is None and reason != "error":  # a failed request's detokenizer may be the fault
            c.detok.flush()
        self.sampler.free(c.seq.request_id)
        self.structured.free(c.seq.request_id)
        if request.finished:
            request.metrics.finished_time = time.monotonic()
            self._requests.pop(request.request_id, None)
            for sibling in request.completions:
                self._by_seq.pop(sibling.seq.request_id, None)
            if reason == "abort":
                self.num_requests_aborted += 1
            else:
                self.num_requests_finished += 1

    def _make_output(self, request: _Request) -> RequestOutput | None:
        """What is new in ``request`` since its last output; None while a best_of > n request is running."""
        if request.error is not None:
            return self._error_output(request)
        candidates = list(enumerate(request.completions))
        if request.ranks_candidates:
            if not request.finished:
                return None
            # The n best by cumulative logprob, best first (ties: lower index), renumbered 0..n-1.
            best = sorted(request.completions, key=lambda c: -c.cumulative_logprob)[: request.params.n]
            candidates = list(enumerate(best))
        completions = []
        for index, c in candidates:
            finishing = c.finish_reason is not None and not c.reported
            text = c.detok.get_delta(finished=c.finish_reason is not None)
            if not (c.new_token_ids or text or finishing):
                continue
            p = c.seq.sampling_params
            completions.append(
                CompletionOutput(
                    index,
                    text,
                    c.new_token_ids,
                    c.finish_reason if finishing else None,
                    c.stop_reason,
                    cumulative_logprob=c.cumulative_logprob if p.needs_logprobs else None,
                    logprobs=c.new_logprobs if p.logprobs is not None else None,
                )
            )
            c.new_token_ids = []
            c.new_logprobs = []
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

    def _error_output(self, request: _Request) -> RequestOutput:
        """The last output of a failed request: each unreported completion ends with "error", without the text
        its detokenizer held back (it may be what failed). With best_of > n nothing was ranked: indices 0..n-1."""
        shown = request.completions[: request.params.n] if request.ranks_candidates else request.completions
        completions = []
        for index, c in enumerate(shown):
            if c.reported:
                continue
            tokens = c.new_token_ids if not request.ranks_candidates else []
            completions.append(CompletionOutput(index, "", tokens, "error"))
            c.new_token_ids, c.new_logprobs, c.reported = [], [], True
        return RequestOutput(
            request_id=request.request_id,
            prompt=request.prompt,
            prompt_token_ids=request.prompt_token_ids,
            outputs=completions,
            finished=True,
            metrics=request.metrics,
            num_cached_tokens=request.metrics.num_cached_tokens,
            usage=request.usage(),
            error=request.error,
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

    def close(self) -> None:
        """Stop the tensor-parallel worker processes, if any (``EngineConfig.tensor_parallel_size``); the engine
        cannot run steps after this. Without tensor parallelism there is nothing to stop."""
        self.runner.close()

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


def _wrap_seed(seed: int) -> int:
    """``seed`` brought into [SEED_MIN, SEED_MAX] modulo 2**64 (two's complement), as int64 arithmetic wraps."""
    return (seed - SEED_MIN) % 2**64 + SEED_MIN
