"""What the engine hands back: vLLM-shaped ``RequestOutput`` / ``CompletionOutput`` and the async stream's deltas."""

from __future__ import annotations

from dataclasses import dataclass, field

from inference.core.sequence import FinishReason


@dataclass
class RequestMetrics:
    """Wall-clock times (``time.monotonic()``) of one request's life, and its prefix-cache hit."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    num_generated_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache

    @property
    def time_to_first_token(self) -> float | None:
        if self.first_token_time is None:
            return None
        return self.first_token_time - self.arrival_time

    @property
    def time_in_queue(self) -> float | None:
        if self.first_scheduled_time is None:
            return None
        return self.first_scheduled_time - self.arrival_time

    @property
    def time_per_output_token(self) -> float | None:
        """Mean gap between output tokens after the first (vLLM's TPOT); None with fewer than two tokens."""
        if self.first_token_time is None or self.last_token_time is None or self.num_generated_tokens < 2:
            return None
        return (self.last_token_time - self.first_token_time) / (self.num_generated_tokens - 1)

    @property
    def e2e_latency(self) -> float | None:
        if self.finished_time is None:
            return None
        return self.finished_time - self.arrival_time

    def timing_ms(self) -> dict[str, float]:
        """The engine's own view of the request in milliseconds (time to first token, queue, end to end)."""
        values = {
            "engine_ttft_ms": self.time_to_first_token,
            "queue_ms": self.time_in_queue,
            "e2e_ms": self.e2e_latency,
        }
        return {name: round(seconds * 1000, 1) for name, seconds in values.items() if seconds is not None}


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: FinishReason | None = None
    # The stop string or stop token id that ended the sequence; None for EOS, length or abort.
    stop_reason: str | int | None = None
    # Sum of the sampled tokens' logprobs so far (vLLM's name); None unless the request asked for logprobs
    # or ranks candidates (best_of > n).
    cumulative_logprob: float | None = None
    # Each sampled token's logprob, aligned with token_ids (a delta, like them), with SamplingParams(logprobs=0).
    # vLLM gives a dict of top alternatives per token; only the sampled token's value is kept here.
    logprobs: list[float] | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """One request's result. From ``LLM.generate`` it is cumulative; from ``LLMEngine.step`` it holds only what
    is new since the previous step (``text`` and ``token_ids`` of each completion are deltas), like vLLM's
    ``RequestOutputKind.DELTA``."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics
    num_cached_tokens: int = 0
    usage: Usage | None = None  # set once the request is finished
    # Why the request ended with finish_reason "error" (an exception of its own in the engine step); None otherwise.
    error: str | None = None


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
        }


@dataclass
class StreamDelta:
    """One item of ``AsyncLLM.stream``: the new text and tokens of completion ``index``; ``usage`` on the last."""

    request_id: str
    text: str
    token_ids: list[int] = field(default_factory=list)
    index: int = 0
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None
    usage: Usage | None = None
    metrics: RequestMetrics | None = None
    error: str | None = None  # on the last delta of a request that ended with finish_reason "error"

    @property
    def finished(self) -> bool:
        return self.usage is not None
