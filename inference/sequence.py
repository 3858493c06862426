"""One request's tokens, progress and block table (nano-vllm's ``Sequence``, vLLM v1's ``Request``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import TYPE_CHECKING

from inference.sampling_params import SamplingParams

if TYPE_CHECKING:
    from inference.block_pool import BlockHash


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
    def finish_reason(self) -> str | None:
        """OpenAI-style ``finish_reason`` ("stop", "length", "abort", "error"), None while unfinished."""
        return _FINISH_REASONS.get(self)


_FINISH_REASONS = {
    SequenceStatus.FINISHED_STOPPED: "stop",
    SequenceStatus.FINISHED_LENGTH: "length",
    SequenceStatus.FINISHED_ABORTED: "abort",
    SequenceStatus.FINISHED_ERROR: "error",
}


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
    # Blocks of a request with a conversation id are kept longer in the prefix cache.
    conversation_id: str | None = None
    # Part of every block hash: requests with different salts (different stores) never share blocks.
    cache_salt: str | None = None
    arrival_time: float = field(default_factory=time.monotonic)

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

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)
