"""The OpenAI-compatible API over the chat's engine: request parsing, prompts, and response bodies.

Shapes follow OpenAI's (and vLLM's server): ``chat.completion``, ``chat.completion.chunk`` for SSE, and
``text_completion``; ``usage.prompt_tokens_details.cached_tokens`` says how much of the prompt came from the
prefix cache. Every request runs with its store's ``cache_salt``, so stores never share KV blocks.

``n`` choices come from one prefill of the prompt (the engine's parallel sampling); streamed, their chunks
interleave, each with its choice's ``index``. ``/v1/completions`` also takes ``best_of`` (the ``n`` of
``best_of`` candidates with the highest cumulative logprob), which, as on OpenAI, cannot be streamed. Usage
counts the tokens of every candidate generated.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from shop_assistant.runtime import engine_service, metrics
from shop_assistant.runtime.text import clean_text


logger = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, code: str, kind: str = "invalid_request_error", param: str | None = None,
        **headers: str,
    ):
        super().__init__(message)
        self.status, self.message, self.code, self.kind, self.headers = status, message, code, kind, headers
        self.param = param  # the request field at fault, as OpenAI names it

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def model_name() -> str:
    configured = settings.API.get("model_name")
    if configured:
        return configured
    engine = engine_service.running_engine()
    model = getattr(getattr(getattr(engine, "engine", None), "config", None), "model", None) or settings.ENGINE.get("model")
    return Path(str(model)).name if model else "SmolLM2-135M-Instruct"


def models_body() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": model_name(), "object": "model", "created": 0, "owned_by": "shop-assistant"}],
    }


@dataclass
class Request:
    kind: str  # "chat" or "text"
    prompt_ids: list[int]
    params: Any
    stream: bool
    include_usage: bool
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))


def _text_of(content: Any) -> str:
    """A message's content: a string, or OpenAI's list of parts of which the text parts count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if len(parts) == len(content):
            return "".join(str(p) for p in parts)
    raise ApiError(400, "message content must be a string or a list of text parts", "invalid_content")


def _number(body: dict[str, Any], name: str, default: Any, low: float, high: float) -> Any:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ApiError(400, f"{name} must be a number in [{low}, {high}]", "invalid_parameter", param=name)
    return value


def _flag(body: dict[str, Any], name: str) -> bool:
    """An optional boolean: true, false or null (a string such as "false" is refused, not read as true)."""
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"{name} must be a boolean", "invalid_parameter", param=name)
    return value


def _seed(body: dict[str, Any]) -> int | None:
    from inference.core.sampling_params import SEED_MAX, SEED_MIN

    seed = body.get("seed")
    if seed is None:
        return None
    # A signed 64-bit integer, as vLLM's server takes it: a larger one overflowed torch's manual_seed mid-step.
    if isinstance(seed, bool) or not isinstance(seed, int) or not SEED_MIN <= seed <= SEED_MAX:
        raise ApiError(400, f"seed must be an integer in [{SEED_MIN}, {SEED_MAX}]", "invalid_parameter", param="seed")
    return seed


# OpenAI's limit on stop sequences.
MAX_STOP_SEQUENCES = 4


def _stop(body: dict[str, Any]) -> list[str] | None:
    stop = body.get("stop")
    if stop is None:
        return None
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise ApiError(400, "stop must be a non-empty string or a list of non-empty strings", "invalid_parameter",
                       param="stop")
    if len(stops) > MAX_STOP_SEQUENCES:
        raise ApiError(400, f"stop takes at most {MAX_STOP_SEQUENCES} sequences", "invalid_parameter", param="stop")
    return stops


def _logprobs(body: dict[str, Any], kind: str) -> None:
    """Checked to OpenAI's types and ranges, then refused when asked for: the responses carry no logprobs, and
    answering ``"logprobs": null`` to a request for them would be silently wrong."""
    value = body.get("logprobs")
    if kind == "chat":
        top = body.get("top_logprobs")
        if value is not None and not isinstance(value, bool):
            raise ApiError(400, "logprobs must be a boolean", "invalid_parameter", param="logprobs")
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20):
            raise ApiError(400, "top_logprobs must be an integer in [0, 20]", "invalid_parameter", param="top_logprobs")
        asked = bool(value) or bool(top)
    else:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 5):
            raise ApiError(400, "logprobs must be an integer in [0, 5]", "invalid_parameter", param="logprobs")
        asked = value is not None
    if asked:
        raise ApiError(400, "logprobs are not supported by this server", "invalid_parameter", param="logprobs")


def _stream_options(body: dict[str, Any], stream: bool) -> bool:
    """``include_usage`` from ``stream_options`` (an object, only with ``stream``; a list or a string was a 500)."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object", "invalid_parameter", param="stream_options")
    if not stream:
        raise ApiError(400, "stream_options is only allowed when stream is true", "invalid_parameter",
                       param="stream_options")
    unknown = sorted(set(options) - {"include_usage"})
    if unknown:
        raise ApiError(400, f"stream_options has unknown fields: {', '.join(unknown)}", "invalid_parameter",
                       param="stream_options")
    return _flag(options, "include_usage")


def parse(body: Any, kind: str, engine: Any) -> Request:
    """Validate an OpenAI request body and tokenize its prompt (blocking: run it on a thread)."""
    from inference import SamplingParams

    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object", "invalid_body")
    if body.get("model") != model_name():
        raise ApiError(404, f"The model `{body.get('model')}` does not exist.", "model_not_found", "NotFoundError")
    n, best_of = _choices(body, kind, engine)
    # Every field is checked before the prompt is encoded: a bad one is a 400, never a failure in the engine.
    stream = _flag(body, "stream")
    include_usage = _stream_options(body, stream)
    seed = _seed(body)
    stop = _stop(body)
    _logprobs(body, kind)
    tokenizer = engine.tokenizer
    # The chat uses the same tokenizer from other threads: one process-wide lock.
    with engine.tokenizer_held():
        if kind == "chat":
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ApiError(400, "messages must be a non-empty list", "invalid_messages")
            chat = []
            for message in messages:
                if not isinstance(message, dict) or message.get("role") not in {"system", "user", "assistant"}:
                    raise ApiError(400, "each message needs a role: system, user or assistant", "invalid_messages")
                chat.append({"role": message["role"], "content": clean_text(_text_of(message.get("content")))})
            prompt_ids = engine.encode_chat(chat)
        else:
            prompt = body.get("prompt")
            # OpenAI's batch forms, one item long: ["text"] or [[ids]]; a bare [id] is already a prompt.
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
                prompt = prompt[0]
            if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
                prompt_ids = list(prompt)
                _check_token_ids(prompt_ids, engine.vocab_size)
            elif isinstance(prompt, str) and prompt:
                prompt_ids = list(tokenizer.encode(clean_text(prompt)))
            else:
                raise ApiError(400, "prompt must be a non-empty string or list of token ids", "invalid_prompt")
    room = engine.max_model_len - len(prompt_ids)
    if room < 1:
        raise ApiError(
            400,
            f"This model's maximum context length is {engine.max_model_len} tokens; "
            f"the prompt has {len(prompt_ids)}",
            "context_length_exceeded",
        )
    cap = min(room, settings.API["max_tokens"])
    requested = body.get("max_completion_tokens", body.get("max_tokens"))
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int) or requested < 1):
        raise ApiError(400, "max_tokens must be a positive integer", "invalid_parameter", param="max_tokens")
    max_tokens = cap if requested is None else min(requested, cap)
    try:
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=float(_number(body, "temperature", 1.0, 0.0, 2.0)),
            top_p=float(_number(body, "top_p", 1.0, 0.0, 1.0)) or 1.0,
            presence_penalty=float(_number(body, "presence_penalty", 0.0, -2.0, 2.0)),
            frequency_penalty=float(_number(body, "frequency_penalty", 0.0, -2.0, 2.0)),
            seed=seed,
            stop=stop,
            n=n,
            best_of=best_of,
        )
    except ValueError as exc:
        raise ApiError(400, str(exc), "invalid_parameter") from None
    if stream and best_of > n:
        # The best candidates are only known once all have finished (OpenAI: "results cannot be streamed").
        raise ApiError(400, "best_of greater than n cannot be streamed", "invalid_parameter", param="best_of")
    return Request(kind, prompt_ids, params, stream, include_usage)


def _check_token_ids(ids: list[int], vocab_size: int) -> None:
    """Refuse ids the model has no embedding for here, before the response starts: found later, in the engine,
    a stream has already sent its status line and a plain request ends in a 500."""
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        shown = ", ".join(str(t) for t in bad[:5])
        raise ApiError(400, f"prompt token ids must be in [0, {vocab_size}); got {shown}", "invalid_prompt")


def _choices(body: dict[str, Any], kind: str, engine: Any) -> tuple[int, int]:
    """``n`` and ``best_of`` (completions only, as on OpenAI): every candidate runs at once, so together
    they must fit the engine's ``max_num_seqs``."""

    def positive(name: str, default: int) -> int:
        value = body.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"{name} must be a positive integer", "invalid_parameter", param=name)
        return value

    n = positive("n", 1)
    if kind == "chat" and body.get("best_of") is not None:
        raise ApiError(400, "best_of is only supported by /v1/completions", "invalid_parameter", param="best_of")
    best_of = positive("best_of", n)
    if best_of < n:
        raise ApiError(400, f"best_of must be at least n ({n})", "invalid_parameter", param="best_of")
    limit = engine.max_num_seqs
    if best_of > limit:
        raise ApiError(400, f"n and best_of must be at most {limit}", "invalid_parameter", param="n")
    return n, best_of


def _finish(reason: str | None) -> str:
    return reason if reason in ("stop", "length") else "stop"


def usage_body(usage: Any, prompt_tokens: int) -> dict[str, Any]:
    if usage is None:
        return {"prompt_tokens": prompt_tokens, "completion_tokens": 0, "total_tokens": prompt_tokens,
                "prompt_tokens_details": {"cached_tokens": 0}}
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


async def deltas(engine: Any, request: Request, cache_salt: str) -> AsyncIterator[Any]:
    """The engine's deltas for the request; the final one is observed for /metrics."""
    import contextlib

    stream = engine.stream(request.id, request.prompt_ids, request.params, cache_salt=cache_salt,
                           priority=engine_service.API_PRIORITY)
    async with contextlib.aclosing(stream):  # a client that leaves aborts the request at once
        async for delta in stream:
            if delta.usage is not None:
                metrics.observe_request(delta.metrics, delta.usage, delta.finish_reason)
            if delta.finish_reason == "error":
                # This request failed in the engine (the others went on): a server error, not an answer.
                logger.error("API request %s failed in the engine: %s", request.id, delta.error)
                raise ApiError(500, "the request failed on the server", "internal_error", "server_error")
            yield delta


async def complete(engine: Any, request: Request, cache_salt: str) -> dict[str, Any]:
    n = request.params.n
    parts: list[list[str]] = [[] for _ in range(n)]
    finishes: list[str | None] = [None] * n
    usage = None
    async for delta in deltas(engine, request, cache_salt):
        parts[delta.index].append(delta.text)
        finishes[delta.index] = delta.finish_reason or finishes[delta.index]
        usage = delta.usage or usage
    choices = []
    for index, (pieces, finish) in enumerate(zip(parts, finishes)):
        text = "".join(pieces)
        if request.kind == "chat":
            choices.append({"index": index, "message": {"role": "assistant", "content": text}, "logprobs": None,
                            "finish_reason": _finish(finish)})
        else:
            choices.append({"index": index, "text": text, "logprobs": None, "finish_reason": _finish(finish)})
    kind, prefix = ("chat.completion", "chatcmpl-") if request.kind == "chat" else ("text_completion", "cmpl-")
    return {
        "id": prefix + request.id,
        "object": kind,
        "created": request.created,
        "model": model_name(),
        "choices": choices,
        "usage": usage_body(usage, len(request.prompt_ids)),
    }


async def stream_events(engine: Any, request: Request, cache_salt: str) -> AsyncIterator[str]:
    """Server-sent events: chunks, an optional usage chunk, then ``[DONE]``."""
    import json

    chat = request.kind == "chat"
    base = {
        "id": ("chatcmpl-" if chat else "cmpl-") + request.id,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": request.created,
        "model": model_name(),
    }

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        return f"data: {json.dumps({**base, 'choices': choices, **extra}, ensure_ascii=False)}\n\n"

    if chat:  # each choice opens with its role, as vLLM's server does
        for index in range(request.params.n):
            yield event([{"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                          "finish_reason": None}])
    usage = None
    try:
        async for delta in deltas(engine, request, cache_salt):
            finish = _finish(delta.finish_reason) if delta.finish_reason else None
            if delta.text or finish:
                if chat:
                    piece = {"content": delta.text} if delta.text else {}
                    yield event([{"index": delta.index, "delta": piece, "logprobs": None, "finish_reason": finish}])
                else:
                    yield event([{"index": delta.index, "text": delta.text, "logprobs": None, "finish_reason": finish}])
            usage = delta.usage or usage
    except Exception as exc:
        # The 200 is out: the failure goes as an error event (the openai client raises it as APIError, as for
        # vLLM's server) and the stream is closed with [DONE]. An exception escaping here left the response
        # open until the client gave up.
        error = exc if isinstance(exc, ApiError) else ApiError(500, "the request failed on the server",
                                                              "internal_error", "server_error")
        if not isinstance(exc, ApiError):
            logger.exception("streamed API request %s failed", request.id)
        yield f"data: {json.dumps(error.body())}\n\n"
        yield "data: [DONE]\n\n"
        return
    if request.include_usage:
        yield event([], usage=usage_body(usage, len(request.prompt_ids)))
    yield "data: [DONE]\n\n"
