"""One request's tokens, progress and block table (nano-vllm's ``Sequence``, vLLM v1's ``Request``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import TYPE_CHECKING, Literal

from inference.core.sampling_params import SamplingParams

if TYPE_CHECKING:
    from inference.core.block_pool import BlockHash


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED_STOPPED = auto()
    FINISHED_LENGTH = auto()
    FINISHED_ABORTED = auto()
    FINISHED_ERROR = auto()

    @property
    def is_finished(self) -> bool:
        return self in _FINISH_REASONS

    @property
    def finish_reason(self) -> FinishReason | None:
        """OpenAI-style ``finish_reason``, None while unfinished."""
        return _FINISH_REASONS.get(self)

    @staticmethod
    def finished_by(reason: FinishReason) -> SequenceStatus:
        return _STATUS_OF[reason]


# The one list of finish reasons: OpenAI's names, plus "abort" (cancelled by the caller) and "error".
FinishReason = Literal["stop", "length", "abort", "error"]

_FINISH_REASONS: dict[SequenceStatus, FinishReason] = {
    SequenceStatus.FINISHED_STOPPED: "stop",
    SequenceStatus.FINISHED_LENGTH: "length",
    SequenceStatus.FINISHED_ABORTED: "abort",
    SequenceStatus.FINISHED_ERROR: "error",
}
_STATUS_OF = {reason: status for status, reason in _FINISH_REASONS.items()}


@dataclass(eq=False)
class Sequence:
    """A request as the scheduler and the KV-cache manager see it.

    ``token_ids`` is prompt + generated tokens. After a preemption (recompute) the generated tokens stay
    in ``token_ids`` and are prefilled again together with the prompt, so ``num_prompt_tokens`` is not
    the prefill length: ``len(token_ids) - num_computed_tokens`` is what remains to compute.
    """

    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams = field(default_factory=SamplingParams)
    # Retention hint: the blocks of a live session outlast one-off traffic in the prefix cache until the
    # caller ends the session (``KVCacheManager.end_session``).
    session_id: str | None = None
    # Part of every block hash: requests with different salts (different stores) never share blocks.
    cache_salt: str | None = None
    arrival_time: float = field(default_factory=time.monotonic)
    # vLLM's request priority: lower values are scheduled first (the web app: the chat 0, the /v1 API 1).
    priority: int = 0

    token_ids: list[int] = field(init=False)
    num_prompt_tokens: int = field(init=False)
    num_computed_tokens: int = field(init=False, default=0)
    num_cached_tokens: int = field(init=False, default=0)
    block_table: list[int] = field(init=False, default_factory=list)
    # Hashes of the full blocks of token_ids, filled lazily by the KV-cache manager. They depend on the
    # tokens only, so they survive preemption and let a recomputed request find its blocks again.
    block_hashes: list[BlockHash] = field(init=False, default_factory=list)
    status: SequenceStatus = field(init=False, default=SequenceStatus.WAITING)
    num_preemptions: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.prompt_token_ids = list(self.prompt_token_ids)
        self.token_ids = list(self.prompt_token_ids)
        self.num_prompt_tokens = len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def last_token_id(self) -> int:
        return self.token_ids[-1]

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status.is_finished

    @property
    def prefill_only(self) -> bool:
        """``max_tokens=0``: compute the prompt's KV (pre-warming the prefix cache) and sample nothing."""
        return self.sampling_params.max_tokens == 0

    def samples_after(self, num_new_tokens: int) -> bool:
        """Whether computing ``num_new_tokens`` more tokens makes this sequence sample one.

        The one rule the scheduler, the model runner and the engine share: a chunk that reaches the end of
        the sequence's tokens samples the next one (a prefill-only request never does)."""
        return self.num_computed_tokens + num_new_tokens == self.num_tokens and not self.prefill_only

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
