"""Tool calls read out of the model's text, and what tool_choice makes of a request's tools (pure: no engine)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shop_assistant.api import schemas
from shop_assistant.api.errors import ApiError
from shop_assistant.api.tools import (
    Call,
    Content,
    Event,
    ForcedCalls,
    HermesCalls,
    auto_call_tag,
    forced_call_schema,
    tool_calling,
)

NAMES = frozenset({"get_weather", "add"})


def block(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def read(text: str, pieces: list[int] | None = None, names: frozenset[str] = NAMES) -> tuple[str, list[tuple]]:
    """The content and the (name, arguments) of the calls, feeding ``text`` cut at ``pieces``."""
    reader, events, start = HermesCalls(names), [], 0
    for cut in sorted(pieces or []) + [len(text)]:
        events += reader.feed(text[start:cut])
        start = cut
    events += reader.finish()
    content = "".join(e.text for e in events if isinstance(e, Content))
    return content, [(e.name, json.loads(e.arguments)) for e in events if isinstance(e, Call)]


def test_several_calls_with_text_around_them():
    text = ("Let me check. " + block("get_weather", {"city": "Paris"}) + "\n" + block("add", {"a": 1, "b": 2})
            + "\nBack soon.")
    content, calls = read(text)
    assert calls == [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})]
    assert content == "Let me check. Back soon."


def test_only_calls_leave_no_content_and_ids_are_openai_style():
    reader = HermesCalls(NAMES)
    events = reader.feed("\n" + block("add", {"a": 1}) + "\n\n") + reader.finish()
    assert [type(e) for e in events] == [Call]
    assert events[0].id.startswith("call_") and events[0].body()["type"] == "function"
    assert events[0].body()["function"] == {"name": "add", "arguments": '{"a": 1}'}


@pytest.mark.parametrize("bad", [
    "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}\n</tool_call>",  # malformed JSON
    "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>",  # no such tool
    "<tool_call>\n{\"name\": \"add\", \"arguments\": [1]}\n</tool_call>",  # arguments not an object
    "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}",  # never closed
])
def test_a_block_that_is_no_call_stays_content(bad):
    text = "Answer: " + bad
    assert read(text) == (text, [])
    # ... also next to a real call, with the space that preceded it
    content, calls = read(block("add", {"a": 2}) + " " + bad)
    assert calls == [("add", {"a": 2})] and content == bad


def test_a_fenced_json_call_is_read_and_other_fenced_json_stays_content():
    """Qwen2.5-Coder writes its call as fenced JSON rather than in tags."""
    call = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    other = '```json\n{"size": "M"}\n```'
    assert read("Here: " + call) == ("Here:", [("get_weather", {"city": "Paris"})])
    assert read("Example: " + other) == ("Example: " + other, [])


def test_plain_text_passes_unchanged_even_with_angle_brackets():
    text = "  Sizes <S, M, L> and a <tool_ note: 3 < 4 ``json <tool_cal\n"
    assert read(text) == (text, [])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_any_cutting_of_the_stream_reads_the_same(cuts):
    """Streamed in pieces of any size (a tag split anywhere), the same content and calls as read whole."""
    text = ("Sure. " + block("get_weather", {"city": "Köln"}) + " " + block("add", {"a": 1})
            + " then <tool_call>{oops</tool_call> end ```json\n{\"name\": \"add\", \"arguments\": {}}```"
            + " and `code` <tool_")
    cuts = [c for c in cuts if c <= len(text)]
    assert read(text, cuts) == read(text)


def forced(text: str, cuts: list[int] = ()) -> list[Event]:
    reader, events, start = ForcedCalls(NAMES), [], 0
    for cut in sorted(cuts) + [len(text)]:
        events += reader.feed(text[start:cut])
        start = cut
    return events + reader.finish()


def test_forced_calls_read_one_object_or_an_array():
    one = ForcedCalls(NAMES)
    assert one.feed('{"name": "add", "arguments": {"a": 1}}') == []  # an object is decided when the text ends
    assert [(c.name, c.arguments) for c in one.finish()] == [("add", '{"a": 1}')]
    many = ForcedCalls(NAMES)
    first = many.feed('[{"name": "add", "arguments": {}}, {"name": "get_weather", "argu')
    assert [c.name for c in first] == ["add"]  # an array's call goes on as soon as its object closes
    rest = many.feed('ments": {"city": "X"}} ]') + many.finish()
    assert [(c.name, json.loads(c.arguments)) for c in rest] == [("get_weather", {"city": "X"})]


def test_a_forced_answer_cut_short_keeps_its_closed_calls():
    events = forced('[{"name": "add", "arguments": {"a": 1}}, {"name": "get_weather", "arguments": {"ci')
    assert [(type(e), getattr(e, "name", None)) for e in events] == [(Call, "add")]
    assert forced('[{"name": "add", "argu') == [Content('[{"name": "add", "argu')]
    assert forced('{"name": "add", "arguments": {"a"') == [Content('{"name": "add", "arguments": {"a"')]
    assert forced('[{"name": "launch", "arguments": {}}]') == [Content('[{"name": "launch", "arguments": {}}]')]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=120), max_size=10))
def test_any_cutting_of_a_forced_answer_reads_the_same(cuts):
    text = ' [ {"name": "add", "arguments": {"s": "a,]}"}} ,\n{"name": "get_weather", "arguments": {"city": "Rome"}}]'
    cuts = [c for c in cuts if c <= len(text)]
    calls = [(e.name, e.arguments) for e in forced(text, cuts)]
    assert calls == [("add", '{"s": "a,]}"}'), ("get_weather", '{"city": "Rome"}')]


TOOLS = [{"type": "function", "function": {"name": "get_weather",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]}}},
         {"type": "function", "function": {"name": "add"}}]


def chat(**fields) -> schemas.ChatRequest:
    return schemas.validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}, "chat")


def test_forced_call_schemas():
    functions = [t["function"] for t in TOOLS]
    named = forced_call_schema(functions, "get_weather", parallel=True)
    assert named["properties"]["name"] == {"type": "string", "enum": ["get_weather"]}
    assert named["properties"]["arguments"] == TOOLS[0]["function"]["parameters"]
    assert named["required"] == ["name", "arguments"] and named["additionalProperties"] is False
    single = forced_call_schema(functions, None, parallel=False)
    assert [c["properties"]["name"]["enum"] for c in single["anyOf"]] == [["get_weather"], ["add"]]
    assert single["anyOf"][1]["properties"]["arguments"] == {"type": "object", "properties": {}}
    parallel = forced_call_schema(functions, None, parallel=True)
    assert parallel == {"type": "array", "items": single, "minItems": 1}


def test_tool_choice_plans():
    assert tool_calling(chat()) is None
    assert tool_calling(chat(tools=TOOLS, tool_choice="none")) is None
    auto = tool_calling(chat(tools=TOOLS))
    assert auto.schema is None and auto.names == {"get_weather", "add"} and isinstance(auto.reader(), HermesCalls)
    assert auto.rendered == TOOLS
    functions = [t["function"] for t in TOOLS]
    assert auto.constraint().structural_tag == auto_call_tag(functions, parallel=True)
    single = tool_calling(chat(tools=TOOLS, parallel_tool_calls=False))
    assert single.constraint().structural_tag == auto_call_tag(functions, parallel=False)
    required = tool_calling(chat(tools=TOOLS, tool_choice="required"))
    assert required.schema["type"] == "array" and isinstance(required.reader(), ForcedCalls)
    assert tool_calling(chat(tools=TOOLS, tool_choice="required", parallel_tool_calls=False)).schema["anyOf"]
    named = tool_calling(chat(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}}))
    assert named.schema["properties"]["name"]["enum"] == ["add"]


@pytest.mark.parametrize("fields, param, words", [
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}, "tools": TOOLS}, "tool_choice", "'nope'"),
    ({"tool_choice": "required"}, "tool_choice", "only allowed when tools"),
    ({"tools": [TOOLS[1], TOOLS[1]]}, "tools", "distinct"),
])
def test_tool_choice_refusals_name_the_field(fields, param, words):
    with pytest.raises(ApiError) as refused:
        tool_calling(chat(**fields))
    assert refused.value.status == 400 and refused.value.param == param and words in refused.value.message


# -- the constraint of an "auto" answer, compiled by the engine's compiler for the bundled tokenizer ------------

FUNCTIONS = [t["function"] for t in TOOLS]


@pytest.fixture(scope="module")
def auto_grammars():
    """The compiled ``auto`` tag, with and without parallel calls."""
    from inference.core.sampling_params import StructuredOutputsParams
    from inference.structured.compiler import GrammarCompiler
    from inference.worker.loader import load_tokenizer, resolve_model

    tokenizer = load_tokenizer(resolve_model(None))
    compiler = GrammarCompiler(tokenizer, len(tokenizer), [tokenizer.eos_token_id])
    return {parallel: compiler.compile(StructuredOutputsParams(structural_tag=auto_call_tag(FUNCTIONS, parallel)))
            for parallel in (True, False)}


def accepts(compiled, text: str) -> bool:
    """Whether the grammar takes ``text`` as a whole answer (it may end there)."""
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiled)
    # Ending needs the grammar to allow the stop token now: accept_string then the EOS token's acceptance.
    return matcher.accept_string(text) and matcher.accept_token(matcher.stop_token_ids[0])


WEATHER_CALL = block("get_weather", {"city": "Paris"})
ADD_CALL = block("add", {"a": 1})


@pytest.mark.parametrize("text", [
    WEATHER_CALL,
    WEATHER_CALL + "\n" + ADD_CALL,
    "Hello! How can I help you today?",
    "¿Qué tal? <b>bold</b> and {braces} later are fine",
    "Let me check.\n" + WEATHER_CALL,
], ids=["call", "two calls", "prose", "tags later", "prose then call"])
def test_an_auto_answer_is_calls_in_the_models_format_or_prose(auto_grammars, text: str) -> None:
    assert accepts(auto_grammars[True], text)
    content, calls = read(text)  # and the reader takes each block as a call
    assert len(calls) == text.count("<tool_call>")


@pytest.mark.parametrize("text", [
    '<tools>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tools>',
    '{{"name": "get_weather", "arguments": {"city": "Paris"}}}',
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    " Hello",
    "\n" + WEATHER_CALL,
    'Here it is:\n<tools>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tools>',
    'Here it is:\n<tools/>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
    block("get_time", {}),
    block("get_weather", {"town": "Paris"}),
    block("get_weather", {"city": 3}),
    "<tool_call>" + json.dumps({"arguments": {"city": "Paris"}, "name": "get_weather"}) + "\n</tool_call>",
    "",
], ids=["tools tag", "doubled braces", "bare JSON", "fenced", "leading space", "leading newline", "tools tag later",
        "empty tools tag later", "unknown tool",
        "unknown argument", "wrong type", "arguments first", "empty"])
def test_an_auto_answer_cannot_be_a_wrapped_call_or_an_invalid_one(auto_grammars, text: str) -> None:
    assert not accepts(auto_grammars[True], text)


@pytest.mark.parametrize("parallel", [True, False])
def test_an_auto_answer_of_calls_may_end_after_the_newline_that_follows_the_last(auto_grammars, parallel) -> None:
    """Qwen2.5 writes ``</tool_call>\\n`` then its end token: the newline must not oblige another call (the model,
    its end token masked, repeated its call until max_tokens)."""
    grammar = auto_grammars[parallel]
    assert accepts(grammar, WEATHER_CALL + "\n") and accepts(grammar, WEATHER_CALL)
    assert not accepts(grammar, WEATHER_CALL + "\n\n") and not accepts(grammar, WEATHER_CALL + "\nSure.")
    assert accepts(grammar, WEATHER_CALL + "\n" + ADD_CALL + "\n") is parallel
    content, calls = read(WEATHER_CALL + "\n")
    assert content == "" and len(calls) == 1


def test_without_parallel_calls_an_auto_answer_holds_at_most_one(auto_grammars) -> None:
    one = auto_grammars[False]
    assert accepts(one, WEATHER_CALL) and accepts(one, "Sure.\n" + WEATHER_CALL) and accepts(one, "Sure.")
    assert not accepts(one, WEATHER_CALL + "\n" + ADD_CALL)
    assert not accepts(one, "Sure.\n" + WEATHER_CALL + "\n" + ADD_CALL)
