"""Tool calling for /v1/chat/completions: the constraint a forced call generates under, and reading calls out of
the model's text.

Two ways a call comes out, by ``tool_choice``:

- ``"auto"``: text in which the model may write Hermes blocks (``<tool_call>{"name": ..., "arguments":
  {...}}</tool_call>``, the format ``inference.chat_template`` shows it) or the same object in a fenced
  ```` ```json ```` block; ``HermesCalls`` reads them as the text arrives. A block whose JSON does not parse,
  or that names no declared tool, stays in the content, as does an unclosed one. The answer is constrained
  (``auto_call_tag``) to either calls in that format or prose that starts with neither a tag nor a brace: a
  model about to wrap its call in some other way (``<tools>``, ``{{...}}``) is led into the real format.
- ``"required"`` or a named function: the output is constrained to JSON ``{"name", "arguments"}`` objects
  (``forced_call_schema``: one object, or with ``parallel_tool_calls`` an array of at least one);
  ``ForcedCalls`` reads an array's calls as each closes, a single one when the text ends.

Both are fed the same deltas streamed or not, so a streamed answer assembles to the non-streamed one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from inference.chat_template import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from inference.core.sampling_params import StructuredOutputsParams

from .errors import ApiError
from .schemas import ChatRequest


@dataclass(frozen=True)
class Content:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # JSON text, as OpenAI returns it
    id: str = ""

    def body(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


Event = Content | Call


class CallReader(Protocol):
    def feed(self, text: str) -> list[Event]: ...

    def finish(self) -> list[Event]: ...


def new_call(name: str, arguments: dict[str, Any]) -> Call:
    return Call(name, json.dumps(arguments, ensure_ascii=False), "call_" + uuid.uuid4().hex[:24])


def _call_of(value: Any, names: frozenset[str]) -> Call | None:
    """A call from a decoded ``{"name", "arguments"}`` object, or None when it is not one of a declared tool."""
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if not isinstance(arguments, dict):
        return None
    return new_call(value["name"], arguments)


# A call's blocks: Hermes tags, and the fenced JSON that Qwen2.5-Coder writes instead (llama.cpp's Hermes parser
# takes both too). Either holds one ``{"name", "arguments"}`` object.
BLOCKS = ((TOOL_CALL_OPEN, TOOL_CALL_CLOSE), ("```json", "```"))


class HermesCalls:
    """Reads ``<tool_call>`` blocks (or fenced JSON calls) out of streamed text (``tool_choice: "auto"``).

    Invariants: text that might still open a block (a proper prefix of ``<tool_call>``) is held back until it
    cannot; the whitespace around a run of call blocks is not content, except that text before and after the
    run stays separated by the whitespace that preceded it (an answer of calls alone has content null);
    everything else is passed on in order, exactly once.
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.buffer = ""  # text not yet decided
        self.block: tuple[str, str] | None = None  # the open block's tags
        self.pending_space = ""  # whitespace after content: content only if more content follows
        self.after_call = False  # drop the whitespace that separates a call from what follows it
        self.block_space = ""  # the whitespace before the open block: content again if it is no call
        self.gap = ""  # the whitespace before the last run of calls: it separates the text around that run
        self.emitted = False  # some content has been passed on
        self.calls = 0

    def feed(self, text: str) -> list[Event]:
        self.buffer += text
        events: list[Event] = []
        while True:
            if self.block is not None:
                opening, closing = self.block
                end = self.buffer.find(closing)
                if end < 0:
                    return events
                raw, self.buffer = self.buffer[:end], self.buffer[end + len(closing):]
                self.block = None
                events += self._block(opening, raw, closing)
                continue
            found = [(self.buffer.find(tags[0]), tags) for tags in BLOCKS if tags[0] in self.buffer]
            if found:
                start, self.block = min(found)
                events += self._content(self.buffer[:start])
                self.block_space, self.pending_space = self.pending_space, ""
                self.buffer = self.buffer[start + len(self.block[0]):]
                continue
            keep = _partial_tag(self.buffer)
            events += self._content(self.buffer[: len(self.buffer) - keep])
            self.buffer = self.buffer[len(self.buffer) - keep:]
            return events

    def finish(self) -> list[Event]:
        """The end of the text: an unclosed block (or a held prefix) is content after all."""
        rest = self.buffer
        if self.block is not None:
            rest, self.pending_space, self.after_call = self.block[0] + rest, self.block_space, False
        self.buffer, self.block = "", None
        events = self._content(rest)
        if self.pending_space and not self.calls:
            events.append(Content(self.pending_space))
        self.pending_space = ""
        return events

    def _block(self, opening: str, raw: str, closing: str) -> list[Event]:
        try:
            call = _call_of(json.loads(raw), self.names)
        except ValueError:
            call = None
        if call is None:  # not a call after all: the block's text is the model's answer
            self.after_call, self.pending_space = False, self.block_space
            return self._content(opening + raw + closing)
        if not self.after_call:
            self.gap = self.block_space if self.emitted else ""
        self.calls += 1
        self.after_call = True
        return [call]

    def _content(self, text: str) -> list[Event]:
        """Content; its trailing whitespace waits in ``pending_space`` (a call block may follow it)."""
        if self.after_call:
            text = text.lstrip()
            if not text:
                return []
            self.after_call, self.pending_space = False, self.gap
        if not text:
            return []
        body = text.rstrip()
        space = text[len(body):]
        if not body:
            self.pending_space += space
            return []
        events = [Content(self.pending_space + body)]
        self.pending_space, self.emitted = space, True
        return events


def _partial_tag(text: str) -> int:
    """Length of the longest end of ``text`` that is a proper prefix of an opening tag."""
    for size in range(min(len(text), max(len(o) for o, _ in BLOCKS) - 1), 0, -1):
        if any(opening.startswith(text[-size:]) for opening, _ in BLOCKS):
            return size
    return 0


class ForcedCalls:
    """Reads a constrained answer (``tool_choice`` required or named): one call object, or an array of them.

    Invariants: an array's calls are passed on one by one as each object closes (the constraint makes every one
    a valid call); a single object when the text ends. An answer cut short (``length``) keeps the calls that
    closed before the cut and drops the unfinished one; with none closed, its text is the content.
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.text = ""
        self.read_to = 0  # the array's text up to here has been read (past ``[`` or a call and its ``,``)
        self.calls = 0
        self.broken = False  # not an array of calls after all: its text is the answer

    def feed(self, text: str) -> list[Event]:
        self.text += text
        events: list[Event] = []
        while not self.broken and (call := self._next_item()) is not None:
            events.append(call)
        return events

    def _next_item(self) -> Call | None:
        """The array's next call once its object has closed, or None while it is still open."""
        rest = self.text[self.read_to:].lstrip()
        if not rest:
            return None
        separator = "[" if self.read_to == 0 else ","
        if not rest.startswith(separator):
            self.broken = self.read_to == 0 or not rest.startswith("]")
            return None
        start = len(self.text) - len(rest) + 1
        try:
            value, end = _DECODER.raw_decode(self.text, _skip_space(self.text, start))
        except ValueError:
            return None  # not closed yet
        call = _call_of(value, self.names)
        if call is None:
            self.broken = True
            return None
        self.read_to, self.calls = end, self.calls + 1
        return call

    def finish(self) -> list[Event]:
        if self.calls:
            return []
        try:
            call = _call_of(json.loads(self.text), self.names)
        except ValueError:
            call = None
        if call is not None:
            return [call]
        return [Content(self.text)] if self.text else []


_DECODER = json.JSONDecoder()


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def forced_call_schema(tools: list[dict[str, Any]], name: str | None, parallel: bool) -> dict[str, Any]:
    """The JSON schema of a forced answer: a call of the named function (exactly one), or of any of ``tools``
    (``required``; with ``parallel`` an array of one or more calls). ``tools``: OpenAI function definitions."""
    chosen = [t for t in tools if name is None or t["name"] == name]
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [t["name"]]},
                "arguments": t.get("parameters") or {"type": "object", "properties": {}},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in chosen
    ]
    one = calls[0] if len(calls) == 1 else {"anyOf": calls}
    if name is not None or not parallel:
        return one
    return {"type": "array", "items": one, "minItems": 1}


# What prose may not start with under ``auto``: a tag or a brace opens a wrapper of some call (``<tools>``,
# ``{{"name": ...}}``, a bare JSON object or array, a fenced block), and leading whitespace only delays one.
PROSE_START = r"[^<{\[`\s]"
# Where prose turns into a call: any tag that starts like the call's ("<tools>", "<tools/>", "<tool>": the
# wrappers the model puts a call in after some words) can only go on as a <tool_call> block.
CALL_TRIGGER = "<tool"
# What may follow the last call before the answer ends: Qwen2.5 writes "</tool_call>\n" then its end token (in
# Qwen's template, as in our history, calls are separated by that newline). Without it the newline could only be
# the separator, and the model, its end token masked, repeated its call until max_tokens.
CALLS_END = r"\n?"
# Whitespace inside a call's JSON: one character at a time (", " and ": " as json.dumps writes them); a sampled
# model left free can spend its whole budget on newlines.
CALL_WHITESPACE = 1


def call_tag(tool: dict[str, Any]) -> dict[str, Any]:
    """xgrammar's structural-tag ``tag`` for one call of ``tool`` (an OpenAI function definition) in the Hermes
    format: ``<tool_call>\n{"name": "<name>", "arguments": <its parameters' JSON>}\n</tool_call>``, the text
    ``inference.chat_template.tool_call_text`` writes."""
    name = json.dumps(tool["name"], ensure_ascii=False)
    return {
        "type": "tag",
        "begin": f'{TOOL_CALL_OPEN}\n{{"name": {name}, "arguments": ',
        "content": {"type": "json_schema", "json_schema": tool.get("parameters") or {"type": "object"},
                    "max_whitespace_cnt": CALL_WHITESPACE},
        "end": f"}}\n{TOOL_CALL_CLOSE}",
    }


def auto_call_tag(tools: list[dict[str, Any]], parallel: bool) -> dict[str, Any]:
    """The structural tag of an ``auto`` answer (``tools``: OpenAI function definitions): EITHER calls alone, one
    block or (``parallel``) several separated by newlines, maybe a newline after the last (``CALLS_END``), OR prose
    whose first character is no tag, brace, bracket, backquote or whitespace (``PROSE_START``), in which a tag
    starting ``<tool`` (``CALL_TRIGGER``) is again one of the calls (after the first, with ``parallel`` false, the
    answer ends).

    Invariant: every ``<tool_call>`` block of the answer names a declared tool and its arguments validate
    against that tool's parameters, so ``HermesCalls`` reads each as a call."""
    tags = [call_tag(tool) for tool in tools]
    one = not parallel
    calls = {"type": "sequence", "elements": [
        {"type": "tags_with_separator", "tags": tags, "separator": "\n", "at_least_one": True,
         "stop_after_first": one},
        {"type": "regex", "pattern": CALLS_END},
    ]}
    prose = {"type": "sequence", "elements": [
        {"type": "regex", "pattern": PROSE_START},
        {"type": "triggered_tags", "triggers": [CALL_TRIGGER], "tags": tags, "stop_after_first": one},
    ]}
    return {"type": "structural_tag", "format": {"type": "or", "elements": [calls, prose]}}


@dataclass(frozen=True)
class ToolCalling:
    """What ``tool_choice`` makes of a request's ``tools``."""

    rendered: list[dict[str, Any]]  # the tools the model is shown (OpenAI's shape)
    names: frozenset[str]  # the functions a call may name
    schema: dict[str, Any] | None  # a forced call's JSON schema; None: text read for calls ("auto")
    auto_tag: dict[str, Any] | None = None  # "auto": the structural tag its answer is constrained to

    def reader(self) -> CallReader:
        return ForcedCalls(self.names) if self.schema is not None else HermesCalls(self.names)

    def constraint(self) -> StructuredOutputsParams:
        """The engine's constraint of the answer: the forced call's schema, or the ``auto`` answer's tag."""
        if self.schema is not None:
            return StructuredOutputsParams(json=self.schema)
        assert self.auto_tag is not None
        return StructuredOutputsParams(structural_tag=self.auto_tag)


def tool_calling(body: ChatRequest) -> ToolCalling | None:
    """The request's tool calling; None when it has none (no tools, or ``tool_choice: "none"``, whose tools are
    neither shown to the model nor read from its answer)."""
    choice = body.tool_choice
    if not body.tools:
        if choice in (None, "none", "auto"):
            return None
        raise ApiError(400, "tool_choice is only allowed when tools are specified", "invalid_parameter",
                       param="tool_choice")
    names = [tool.function.name for tool in body.tools]
    if len(set(names)) < len(names):
        raise ApiError(400, "tools must have distinct function names", "invalid_parameter", param="tools")
    if choice == "none":
        return None
    rendered = [tool.model_dump(exclude_none=True) for tool in body.tools]
    functions = [tool.function.model_dump(exclude_none=True) for tool in body.tools]
    parallel = body.parallel_tool_calls is not False  # OpenAI's default: true
    if choice in (None, "auto"):
        return ToolCalling(rendered, frozenset(names), None, auto_call_tag(functions, parallel))
    name = None if choice == "required" else choice.function.name  # type: ignore[union-attr]
    if name is not None and name not in names:
        raise ApiError(400, f"tool_choice names a function that is not in tools: {name!r}", "invalid_parameter",
                       param="tool_choice")
    return ToolCalling(rendered, frozenset(names), forced_call_schema(functions, name, parallel))
