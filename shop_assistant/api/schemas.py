"""The /v1 request bodies as declared schemas (OpenAI's fields; vLLM's structured-output extras).

Strict types: a string is not a number, nor ``"true"`` a boolean, nor ``1.0`` an integer. Unknown top-level
fields are ignored, as vLLM's server does; inside ``stream_options`` one is refused. A body that does not fit is
an ``ApiError`` 400 whose ``param`` is the path of the field at fault, as OpenAI names it
(``messages[0].content``, ``tools[1].function.name``) and whose message starts with it. Cross-field rules that
need the engine (``n`` against ``max_num_seqs``, the context length) stay in ``service.parse``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from inference.core.sampling_params import SEED_MAX, SEED_MIN, StructuredOutputsParams

from .errors import ApiError

# OpenAI's limit on stop sequences.
MAX_STOP_SEQUENCES = 4
ROLES = ("system", "developer", "user", "assistant", "tool")


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True, frozen=True)


class StreamOptions(_Body):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool | None = None


class FunctionDef(_Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON schema; None: no arguments
    strict: bool | None = None


class Tool(_Body):
    type: Literal["function"]
    function: FunctionDef


class FunctionName(_Body):
    name: str


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: FunctionName


class JsonSchemaFormat(_Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise PydanticCustomError("invalid_parameter", "json_schema is required when type is json_schema")
        return self

    def constraint(self) -> StructuredOutputsParams | None:
        if self.type == "text":
            return None
        if self.type == "json_object" or self.json_schema.schema_ is None:  # type: ignore[union-attr]
            return StructuredOutputsParams(json_object=True)
        return StructuredOutputsParams(json=self.json_schema.schema_)  # type: ignore[union-attr]


class StructuredOutputs(_Body):
    """vLLM's ``structured_outputs`` field: exactly one constraint."""

    json_: dict[str, Any] | str | None = Field(None, alias="json")
    json_object: bool | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None

    def constraint(self) -> StructuredOutputsParams:
        return StructuredOutputsParams(json=self.json_, json_object=bool(self.json_object), regex=self.regex,
                                       choice=tuple(self.choice) if self.choice is not None else None,
                                       grammar=self.grammar)


class FunctionCall(_Body):
    name: str
    arguments: str  # JSON text, as OpenAI sends it back


class ToolCall(_Body):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | None = None  # text parts are joined by the validator
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text(cls, content: Any) -> str | None:
        """A string, or OpenAI's list of parts, every one a text part."""
        if content is None or isinstance(content, str):
            return content
        if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
        ):
            return "".join(p["text"] for p in content)
        raise PydanticCustomError("invalid_content", "message content must be a string or a list of text parts")

    @model_validator(mode="after")
    def _fits_role(self) -> Message:
        if self.tool_calls is not None and self.role != "assistant":
            raise PydanticCustomError("invalid_messages", "only assistant messages carry tool_calls")
        if self.role == "tool" and self.tool_call_id is None:
            raise PydanticCustomError("invalid_messages", "a tool message needs the tool_call_id it answers")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise PydanticCustomError("invalid_content", "message content must be a string or a list of text parts")
        return self


class GenerationRequest(_Body):
    """What both endpoints take."""

    model: Any = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX)  # signed 64-bit, as vLLM's server takes it
    stop: str | list[str] | None = None
    response_format: ResponseFormat | None = None
    # vLLM's extras.
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, stop: str | list[str] | None) -> list[str] | None:
        if stop is None:
            return None
        stops = [stop] if isinstance(stop, str) else stop
        if not all(stops):
            raise PydanticCustomError("invalid_parameter", "stop sequences must be non-empty strings")
        if len(stops) > MAX_STOP_SEQUENCES:
            raise PydanticCustomError("invalid_parameter", f"stop takes at most {MAX_STOP_SEQUENCES} sequences")
        return stops

    def constraints(self) -> list[tuple[str, StructuredOutputsParams]]:
        """Every structured-output constraint asked for, with the field that asked (``service`` allows one)."""
        found = []
        if self.response_format is not None and (c := self.response_format.constraint()) is not None:
            found.append(("response_format", c))
        if self.structured_outputs is not None:
            found.append(("structured_outputs", self.structured_outputs.constraint()))
        guided = {"guided_json": dict(json=self.guided_json), "guided_regex": dict(regex=self.guided_regex),
                  "guided_choice": dict(choice=self.guided_choice), "guided_grammar": dict(grammar=self.guided_grammar)}
        for name, kwargs in guided.items():
            if next(iter(kwargs.values())) is not None:
                found.append((name, StructuredOutputsParams(**kwargs)))
        return found


class ChatRequest(GenerationRequest):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    best_of: Any = None  # refused: completions only
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None


class CompletionRequest(GenerationRequest):
    prompt: Any = None  # a string or token ids, checked with the vocabulary in ``service``
    best_of: int | None = Field(None, ge=1)
    logprobs: int | None = Field(None, ge=0, le=5)


def validate(body: dict[str, Any], kind: str) -> ChatRequest | CompletionRequest:
    """The body as its endpoint's schema, or an ``ApiError`` 400 naming the field at fault."""
    schema = ChatRequest if kind == "chat" else CompletionRequest
    try:
        return schema.model_validate(body)
    except ValidationError as exc:
        raise _api_error(exc) from None


def _api_error(exc: ValidationError) -> ApiError:
    """The first field at fault. A union's members each report their error; the path they share is the field."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    top = first["loc"][:1]
    locs = [e["loc"] for e in errors if e["loc"][:1] == top]
    path = locs[0]
    for loc in locs[1:]:
        path = path[: next((i for i, (a, b) in enumerate(zip(path, loc)) if a != b), min(len(path), len(loc)))]
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        path, message = first["loc"][:-1], f"unknown field {first['loc'][-1]!r}"
    param = _dotted(path)
    if first["type"] in ("invalid_content", "invalid_messages"):
        code = first["type"]
    else:
        code = "invalid_messages" if top == ("messages",) else "invalid_parameter"
    return ApiError(400, f"{param}: {message}", code, param=param)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
