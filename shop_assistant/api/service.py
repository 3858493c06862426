"""The OpenAI-compatible API over the chat's engine: request parsing, prompts, and response bodies.

Shapes follow OpenAI's (and vLLM's server): ``chat.completion``, ``chat.completion.chunk`` for SSE, and
``text_completion``; ``usage.prompt_tokens_details.cached_tokens`` says how much of the prompt came from the
prefix cache. Every request runs with its store's ``cache_salt``, so stores never share KV blocks.

``n`` choices come from one prefill of the prompt (the engine's parallel sampling); streamed, their chunks
interleave, each with its choice's ``index``. ``/v1/completions`` also takes ``best_of`` (the ``n`` of
``best_of`` candidates with the highest cumulative logprob), which, as on OpenAI, cannot be streamed. Usage
counts the tokens of every candidate generated.

Structured output (``response_format``, or vLLM's ``structured_outputs`` / ``guided_*``) and forced tool calls
become the engine's ``SamplingParams.structured_outputs``; tool calls come back as ``message.tool_calls``
(``tools`` reads them). A constraint the engine cannot compile is a 400 before any response starts: such a
request waits for the engine to accept it (its first token) before the status line goes out.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from inference.chat_template import encode_chat
from inference.core.sampling_params import StructuredOutputsParams
from shop_assistant.runtime import engine_service, metrics
from shop_assistant.runtime.text import clean_text, clean_value

from . import schemas
from .errors import ApiError
from .tools import Call, Content, Event, ToolCalling, tool_calling

__all__ = ["ApiError", "Request", "complete", "model_name", "models_body", "open_deltas", "parse", "stream_events"]

logger = logging.getLogger(__name__)

model_name = engine_service.model_name  # the one source of the served name


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
    tools: ToolCalling | None = None  # how tool calls are read from the answer; None: they are not
    constraint_param: str | None = None  # the field a structured-output constraint came from
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))


def _stream_options(body: schemas.GenerationRequest, stream: bool) -> bool:
    """``include_usage`` from ``stream_options`` (only with ``stream``)."""
    if body.stream_options is None:
        return False
    if not stream:
        raise ApiError(400, "stream_options is only allowed when stream is true", "invalid_parameter",
                       param="stream_options")
    return bool(body.stream_options.include_usage)


def _logprobs(body: schemas.GenerationRequest) -> None:
    """Checked to OpenAI's types and ranges by the schema, then refused when asked for: the responses carry no
    logprobs, and answering ``"logprobs": null`` to a request for them would be silently wrong."""
    if isinstance(body, schemas.ChatRequest):
        asked = bool(body.logprobs) or bool(body.top_logprobs)
    else:
        asked = body.logprobs is not None
    if asked:
        raise ApiError(400, "logprobs are not supported by this server", "invalid_parameter", param="logprobs")


def _constraint(
    body: schemas.GenerationRequest, tools: ToolCalling | None
) -> tuple[StructuredOutputsParams | None, str | None]:
    """The one structured-output constraint of the request: a forced tool call's, the one asked for, or else the
    shape of an ``auto`` answer (calls in the model's format, or prose)."""
    try:
        asked = body.constraints()
    except ValueError as exc:  # StructuredOutputsParams refused it (none or several in ``structured_outputs``)
        raise ApiError(400, str(exc), "invalid_parameter", param="structured_outputs") from None
    if tools is not None and tools.schema is not None:
        if asked:
            raise ApiError(400, f"{asked[0][0]} cannot be combined with tool_choice required or a named function",
                           "invalid_parameter", param=asked[0][0])
        return tools.constraint(), "tools"
    if len(asked) > 1:
        raise ApiError(400, f"{asked[1][0]} cannot be combined with {asked[0][0]}: give one constraint",
                       "invalid_parameter", param=asked[1][0])
    if asked:
        return asked[0][1], asked[0][0]
    return (tools.constraint(), "tools") if tools is not None else (None, None)


def _conversation(body: schemas.ChatRequest) -> list[dict[str, Any]]:
    """The messages as the chat template takes them (``developer`` is OpenAI's newer name for ``system``)."""
    chat = []
    for message in body.messages:
        turn: dict[str, Any] = {"role": "system" if message.role == "developer" else message.role,
                                "content": message.content}
        if message.tool_calls:
            turn["tool_calls"] = [call.model_dump() for call in message.tool_calls]
        if message.tool_call_id is not None:
            turn["tool_call_id"] = message.tool_call_id
        chat.append(turn)
    return clean_value(chat)


def _prompt_ids(body: Any, engine: Any, tokenizer: Any) -> list[int]:
    prompt = body.prompt
    # OpenAI's batch forms, one item long: ["text"] or [[ids]]; a bare [id] is already a prompt.
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        _check_token_ids(prompt, engine.vocab_size)
        return list(prompt)
    if isinstance(prompt, str) and prompt:
        return list(tokenizer.encode(clean_text(prompt)))
    raise ApiError(400, "prompt must be a non-empty string or list of token ids", "invalid_prompt", param="prompt")


def parse(body: Any, kind: str, engine: Any) -> Request:
    """Validate an OpenAI request body and tokenize its prompt (blocking: run it on a thread)."""
    from inference import SamplingParams

    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object", "invalid_body")
    if body.get("model") != model_name():
        raise ApiError(404, f"The model `{body.get('model')}` does not exist.", "model_not_found", "NotFoundError")
    # Every field is checked before the prompt is encoded: a bad one is a 400, never a failure in the engine.
    request = schemas.validate(body, kind)
    n, best_of = _choices(request, engine)
    stream = bool(request.stream)
    include_usage = _stream_options(request, stream)
    _logprobs(request)
    tools = tool_calling(request) if isinstance(request, schemas.ChatRequest) else None
    constraint, constraint_param = _constraint(request, tools)
    # The chat uses the same tokenizer from other threads: one process-wide lock.
    with engine.tokenizer_held() as tokenizer:
        if isinstance(request, schemas.ChatRequest):
            rendered = clean_value(tools.rendered) if tools else None
            prompt_ids = encode_chat(tokenizer, _conversation(request), tools=rendered)
        else:
            prompt_ids = _prompt_ids(request, engine, tokenizer)
    room = engine.max_model_len - len(prompt_ids)
    if room < 1:
        raise ApiError(
            400,
            f"This model's maximum context length is {engine.max_model_len} tokens; "
            f"the prompt has {len(prompt_ids)}",
            "context_length_exceeded",
        )
    requested = getattr(request, "max_completion_tokens", None) or request.max_tokens
    cap = min(room, settings.API["max_tokens"])
    try:
        params = SamplingParams(
            max_tokens=cap if requested is None else min(requested, cap),
            temperature=1.0 if request.temperature is None else float(request.temperature),
            top_p=float(request.top_p or 1.0),
            presence_penalty=float(request.presence_penalty or 0.0),
            frequency_penalty=float(request.frequency_penalty or 0.0),
            seed=request.seed,
            stop=request.stop,
            n=n,
            best_of=best_of,
            structured_outputs=constraint,
        )
    except ValueError as exc:
        raise ApiError(400, str(exc), "invalid_parameter") from None
    if stream and best_of > n:
        # The best candidates are only known once all have finished (OpenAI: "results cannot be streamed").
        raise ApiError(400, "best_of greater than n cannot be streamed", "invalid_parameter", param="best_of")
    return Request(kind, prompt_ids, params, stream, include_usage, tools=tools, constraint_param=constraint_param)


def _check_token_ids(ids: list[int], vocab_size: int) -> None:
    """Refuse ids the model has no embedding for here, before the response starts: found later, in the engine,
    a stream has already sent its status line and a plain request ends in a 500."""
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        shown = ", ".join(str(t) for t in bad[:5])
        raise ApiError(400, f"prompt token ids must be in [0, {vocab_size}); got {shown}", "invalid_prompt",
                       param="prompt")


def _choices(body: schemas.GenerationRequest, engine: Any) -> tuple[int, int]:
    """``n`` and ``best_of`` (completions only, as on OpenAI): every candidate runs at once, so together
    they must fit the engine's ``max_num_seqs``."""
    n = body.n or 1
    if isinstance(body, schemas.ChatRequest) and body.best_of is not None:
        raise ApiError(400, "best_of is only supported by /v1/completions", "invalid_parameter", param="best_of")
    best_of = body.best_of or n
    if best_of < n:
        raise ApiError(400, f"best_of must be at least n ({n})", "invalid_parameter", param="best_of")
    limit = engine.max_num_seqs
    if best_of > limit:
        raise ApiError(400, f"n and best_of must be at most {limit}", "invalid_parameter", param="n")
    return n, best_of


def _finish(reason: str | None, calls: int = 0) -> str:
    if reason == "length":
        return "length"
    return "tool_calls" if calls else "stop"


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


async def open_deltas(engine: Any, request: Request, cache_salt: str) -> AsyncIterator[Any]:
    """Submit the request; its deltas, the final one observed for /metrics. A constrained request is accepted
    by the engine first: a constraint that does not compile raises its ``ApiError`` 400 here, not mid-stream."""
    stream = engine.stream(request.id, request.prompt_ids, request.params, cache_salt=cache_salt,
                           priority=engine_service.API_PRIORITY)
    first = None
    if request.params.structured_outputs is not None:
        try:
            first = await stream.__anext__()
        except ValueError as exc:  # inference.structured.StructuredOutputError, or the constraint's own
            raise ApiError(400, str(exc), "invalid_parameter", param=request.constraint_param) from None
        except Exception:
            await stream.aclose()
            logger.exception("API request %s failed in the engine", request.id)
            raise ApiError(500, "the request failed on the server", "internal_error", "server_error") from None
        except BaseException:  # cancelled: the client left
            await stream.aclose()
            raise
    return _deltas(stream, first, request)


async def _deltas(stream: Any, first: Any, request: Request) -> AsyncIterator[Any]:
    async with contextlib.aclosing(stream):  # a client that leaves aborts the request at once
        pending = [first] if first is not None else []
        while True:
            if pending:
                delta = pending.pop()
            else:
                try:
                    delta = await stream.__anext__()
                except StopAsyncIteration:
                    return
            if delta.usage is not None:
                metrics.observe_request(delta.metrics, delta.usage, delta.finish_reason)
            if delta.finish_reason == "error":
                # This request failed in the engine (the others went on): a server error, not an answer.
                logger.error("API request %s failed in the engine: %s", request.id, delta.error)
                raise ApiError(500, "the request failed on the server", "internal_error", "server_error")
            yield delta


def _message(events: list[Event]) -> dict[str, Any]:
    """A chat choice's message from its text (and calls): content null when it is only calls."""
    text = "".join(e.text for e in events if isinstance(e, Content))
    calls = [e.body() for e in events if isinstance(e, Call)]
    if not calls:
        return {"role": "assistant", "content": text}
    return {"role": "assistant", "content": text or None, "tool_calls": calls}


async def complete(request: Request, deltas: AsyncIterator[Any]) -> dict[str, Any]:
    n = request.params.n
    readers = [request.tools.reader() if request.tools else None for _ in range(n)]
    events: list[list[Event]] = [[] for _ in range(n)]
    finishes: list[str | None] = [None] * n
    usage = None
    async for delta in deltas:
        reader = readers[delta.index]
        events[delta.index] += reader.feed(delta.text) if reader else [Content(delta.text)]
        if delta.finish_reason and reader:
            events[delta.index] += reader.finish()
        finishes[delta.index] = delta.finish_reason or finishes[delta.index]
        usage = delta.usage or usage
    choices = []
    for index, (happened, finish) in enumerate(zip(events, finishes)):
        calls = sum(isinstance(e, Call) for e in happened)
        if request.kind == "chat":
            choices.append({"index": index, "message": _message(happened), "logprobs": None,
                            "finish_reason": _finish(finish, calls)})
        else:
            text = "".join(e.text for e in happened if isinstance(e, Content))
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


def _chat_pieces(events: list[Event], calls_before: int) -> list[dict[str, Any]]:
    """Chunk deltas for a choice's events. A call goes as two: its index, id and name (arguments empty), then
    its whole arguments (they are only known when its block closes)."""
    pieces: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, Content):
            pieces.append({"content": event.text})
            continue
        head = {"index": calls_before, "id": event.id, "type": "function",
                "function": {"name": event.name, "arguments": ""}}
        pieces += [{"tool_calls": [head]},
                   {"tool_calls": [{"index": calls_before, "function": {"arguments": event.arguments}}]}]
        calls_before += 1
    return pieces


async def stream_events(request: Request, deltas: AsyncIterator[Any]) -> AsyncIterator[str]:
    """Server-sent events: chunks, an optional usage chunk, then ``[DONE]``."""
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
    readers = {i: request.tools.reader() for i in range(request.params.n)} if request.tools else {}
    calls = [0] * request.params.n
    usage = None
    try:
        async for delta in deltas:
            if not chat:
                finish = _finish(delta.finish_reason) if delta.finish_reason else None
                if delta.text or finish:
                    yield event([{"index": delta.index, "text": delta.text, "logprobs": None, "finish_reason": finish}])
                usage = delta.usage or usage
                continue
            reader = readers.get(delta.index)
            happened = reader.feed(delta.text) if reader else ([Content(delta.text)] if delta.text else [])
            if delta.finish_reason and reader:
                happened += reader.finish()
            pieces = _chat_pieces(happened, calls[delta.index])
            calls[delta.index] += sum(isinstance(e, Call) for e in happened)
            if delta.finish_reason and not pieces:
                pieces = [{}]
            for i, piece in enumerate(pieces):  # the finish rides on the last piece
                last = i == len(pieces) - 1
                finish = _finish(delta.finish_reason, calls[delta.index]) if delta.finish_reason and last else None
                yield event([{"index": delta.index, "delta": piece, "logprobs": None, "finish_reason": finish}])
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
