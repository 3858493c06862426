"""Per-request sampling settings; field names follow vLLM's ``SamplingParams``.

Parallel sampling (vLLM's semantics): ``best_of`` candidates (default ``n``) are generated from one prefill of
the prompt and the ``n`` with the highest cumulative log-probability of their sampled tokens are returned.
With ``best_of > n`` the choice is only known at the end, so the engine reports such a request once, when it
finishes (the OpenAI API refuses to stream it, as OpenAI and vLLM do).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Seeds are signed 64-bit integers, as in vLLM's OpenAI server (and C's int64_t): anything else is refused here,
# so no caller can hand the sampler a seed torch's ``Generator.manual_seed`` would reject mid-step.
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class StructuredOutputsParams:
    """A constraint on what a request may generate (vLLM's ``StructuredOutputsParams``): exactly one of them.

    ``json``: a JSON schema (a dict or its text); ``json_object``: any JSON object; ``regex``: the whole output
    matches it; ``choice``: the output is one of these strings; ``grammar``: a context-free grammar in the
    grammar library's EBNF; ``structural_tag``: the grammar library's structural tag (a dict or its JSON text:
    xgrammar's ``{"type": "structural_tag", "format": ...}``, as vLLM's field of that name), e.g. free text or
    tool calls in a model's own format. The engine compiles each distinct constraint once (cached by its key) and masks the
    logits of the request's rows with it; a constraint that does not compile is refused when the request is
    added (``inference.structured.StructuredOutputError``, a ``ValueError``), with the library's message.
    """

    json: dict[str, Any] | str | None = None
    json_object: bool = False
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    grammar: str | None = None
    structural_tag: dict[str, Any] | str | None = None

    def __post_init__(self) -> None:
        if self.choice is not None:
            object.__setattr__(self, "choice", tuple(self.choice))
            if not self.choice or not all(isinstance(c, str) and c for c in self.choice):
                raise ValueError("choice must be a non-empty list of non-empty strings")
        given = [k for k in ("json", "regex", "choice", "grammar", "structural_tag") if getattr(self, k) is not None]
        given += ["json_object"] if self.json_object else []
        if len(given) != 1:
            raise ValueError("structured outputs take exactly one of json, json_object, regex, choice, grammar, "
                             f"structural_tag; got {given or 'none'}")


@dataclass
class SamplingParams:
    n: int = 1
    best_of: int | None = None  # candidates to generate (>= n); None: n
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: disabled
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] | str | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    max_tokens: int | None = 16  # 0: prefill the prompt into the KV cache and generate nothing (pre-warm)
    min_tokens: int = 0
    # vLLM's name. None: no logprobs; 0: each sampled token's logprob (log-softmax of the processed logits the
    # token was drawn from) and their sum in ``CompletionOutput``. Top alternatives (> 0) are not supported.
    logprobs: int | None = None
    structured_outputs: StructuredOutputsParams | None = None  # None: free text

    def __post_init__(self) -> None:
        for name in ("n", "best_of", "top_k", "min_tokens", "max_tokens", "seed", "logprobs"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        for name in ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"):
            value = getattr(self, name)
            # NaN passes every range check below and would turn a row's probabilities into NaN.
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.seed is not None and not SEED_MIN <= self.seed <= SEED_MAX:
            raise ValueError(f"seed must be a signed 64-bit integer, in [{SEED_MIN}, {SEED_MAX}], got {self.seed}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        if not all(isinstance(s, str) for s in self.stop):
            raise ValueError("stop must be a string or a list of strings")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in self.stop_token_ids):
            raise ValueError("stop_token_ids must be a list of integers")
        if self.top_k is None or self.top_k < 0:
            self.top_k = 0
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if self.best_of is None:
            self.best_of = self.n
        if self.best_of < self.n:
            raise ValueError(f"best_of must be at least n ({self.n}), got {self.best_of}")
        if self.logprobs is not None and self.logprobs != 0:
            raise ValueError(f"only logprobs=0 (the sampled tokens' logprobs) is supported, got {self.logprobs}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.max_tokens is not None and self.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0 (0: prefill only), got {self.max_tokens}")
        if self.max_tokens == 0 and self.best_of > 1:
            raise ValueError(
                "a prefill-only request (max_tokens=0) has no completions to multiply: n and best_of must be 1"
            )
        if self.min_tokens < 0 or (self.max_tokens is not None and self.min_tokens > self.max_tokens):
            raise ValueError("min_tokens must be between 0 and max_tokens")

    @property
    def num_candidates(self) -> int:
        """Sequences the request runs: ``best_of`` (``__post_init__`` sets it to ``n`` when not given)."""
        return self.best_of if self.best_of is not None else self.n

    @property
    def needs_logprobs(self) -> bool:
        """Whether the sampler must report this request's sampled-token logprobs: asked for, or needed to
        choose the best ``n`` of ``best_of``."""
        return self.logprobs is not None or self.num_candidates > self.n

    @property
    def greedy(self) -> bool:
        # vLLM treats temperature below this as greedy.
        return self.temperature < 1e-5
