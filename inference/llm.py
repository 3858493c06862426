"""The offline API, vLLM-shaped: ``LLM(model=None, **EngineConfig fields).generate(prompts, params)``."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence as SequenceT
from typing import Any

from inference.chat_template import encode_chat
from inference.core.config import EngineConfig
from inference.core.sampling_params import SamplingParams
from inference.engine import LLMEngine, PromptType
from inference.outputs import CompletionOutput, RequestOutput


class LLM:
    """Batch generation on a private engine: ``LLM(model=None, **EngineConfig fields)``."""

    def __init__(self, model: str | None = None, **config: Any) -> None:
        self.llm_engine = LLMEngine(EngineConfig(model=model, **config))
        self._ids = itertools.count()

    def close(self) -> None:
        """See ``LLMEngine.close``: stops tensor-parallel workers."""
        self.llm_engine.close()

    def get_tokenizer(self) -> Any:
        return self.llm_engine.tokenizer

    def reset(self, **scheduler_config: Any) -> None:
        """See ``LLMEngine.reset``: new scheduling settings and an empty cache, same loaded model."""
        self.llm_engine.reset(**scheduler_config)

    def stats(self) -> dict[str, Any]:
        return self.llm_engine.stats()

    def generate(
        self,
        prompts: PromptType | SequenceT[PromptType],
        sampling_params: SamplingParams | SequenceT[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """One finished ``RequestOutput`` per prompt, in input order (cumulative text and token ids)."""
        prompt_list = _as_prompt_list(prompts)
        params_list = _as_params_list(sampling_params, len(prompt_list))
        engine = self.llm_engine
        ids = [f"llm-{next(self._ids)}" for _ in prompt_list]
        try:
            for request_id, prompt, params in zip(ids, prompt_list, params_list):
                engine.add_request(request_id, prompt, params)
        except Exception:
            for request_id in ids:
                engine.abort(request_id, report=False)
            raise
        results: dict[str, RequestOutput] = {}
        while engine.has_unfinished():
            for delta in engine.step():
                _accumulate(results, delta)
        return [results[request_id] for request_id in ids]

    def chat(
        self,
        messages: list[dict[str, str]] | SequenceT[list[dict[str, str]]],
        sampling_params: SamplingParams | SequenceT[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """Apply the model's chat template (with the assistant's generation prompt) to each conversation."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        prompts = [{"prompt_token_ids": self.encode_chat(conv)} for conv in conversations]
        return self.generate(prompts, sampling_params)

    def encode_chat(self, conversation: list[dict[str, str]]) -> list[int]:
        return encode_chat(self.llm_engine.tokenizer, conversation)


def _accumulate(results: dict[str, RequestOutput], delta: RequestOutput) -> None:
    current = results.get(delta.request_id)
    if current is None:
        current = results[delta.request_id] = dataclasses.replace(delta, outputs=[])
    by_index = {c.index: c for c in current.outputs}
    for c in delta.outputs:
        acc = by_index.get(c.index)
        if acc is None:
            acc = by_index[c.index] = CompletionOutput(c.index, "", [])
            current.outputs.append(acc)
        acc.text += c.text
        acc.token_ids.extend(c.token_ids)
        if c.logprobs is not None:
            acc.logprobs = (acc.logprobs or []) + c.logprobs
        if c.cumulative_logprob is not None:
            acc.cumulative_logprob = c.cumulative_logprob  # a running total, not a delta
        if c.finish_reason is not None:
            acc.finish_reason, acc.stop_reason = c.finish_reason, c.stop_reason
    current.outputs.sort(key=lambda c: c.index)
    current.finished = delta.finished
    current.metrics = delta.metrics
    current.num_cached_tokens = delta.num_cached_tokens
    current.usage = delta.usage


def _as_prompt_list(prompts: PromptType | SequenceT[PromptType]) -> list[PromptType]:
    if isinstance(prompts, (str, dict)):
        return [prompts]
    prompts = list(prompts)
    if prompts and all(isinstance(t, int) for t in prompts):
        return [prompts]  # one prompt given as token ids
    return prompts


def _as_params_list(params: SamplingParams | SequenceT[SamplingParams] | None, n: int) -> list[SamplingParams]:
    if params is None:
        return [SamplingParams() for _ in range(n)]
    if isinstance(params, SamplingParams):
        return [params] * n
    params = list(params)
    if len(params) != n:
        raise ValueError(f"got {len(params)} sampling params for {n} prompts")
    return params
