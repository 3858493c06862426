"""The 1.5B's tools prompt (Qwen2.5-Coder-1.5B-Instruct, ``qwen2.5-1.5b``) is its official template's, byte for byte.

The reference is the chat template stored in the model's GGUF, rendered by plain jinja2 the way transformers'
``apply_chat_template`` renders it (so as vLLM and SGLang do): a sandboxed environment with ``trim_blocks`` and
``lstrip_blocks``, ``tojson`` as ``json.dumps(ensure_ascii=False)`` without sorted keys. Ours is the API's path:
the body validated, its tools taken by ``tool_calling``, the conversation rendered by ``encode_chat``.
Heavy: the packaged model is joined (and its tokenizer converted) on a cold cache.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference.chat_template import encode_chat, render_chat

CITY = {"type": "object", "properties": {"city": {"type": "string", "description": "A city, e.g. 'Zürich'"}},
        "required": ["city"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": CITY}},
    {"type": "function", "function": {"name": "get_time", "description": "The time now"}},
]
SYSTEM = {"role": "system", "content": "You help travellers. Answer briefly."}
ASK = {"role": "user", "content": "Weather in Paris and in Zürich? {{not a template}}"}
CALLS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}},
]}
RESULTS = [{"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
           {"role": "tool", "tool_call_id": "call_2", "content": "24 C"}]


@pytest.fixture(scope="module")
def qwen() -> tuple[Any, str]:
    """The 1.5B's tokenizer, and the chat template stored in its GGUF."""
    import gguf

    from inference.worker.loader import load_tokenizer, resolve_model, source_gguf

    template = gguf.GGUFReader(source_gguf("qwen2.5-1.5b")).fields["tokenizer.chat_template"].contents()
    return load_tokenizer(resolve_model("qwen2.5-1.5b")), template


def official(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """``template`` rendered by plain jinja2 with transformers' settings; a call's arguments as the object that
    transformers' docs and vLLM pass."""
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    messages = [
        {**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                             for c in m["tool_calls"]]} if m.get("tool_calls") else m
        for m in messages
    ]
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=True)


def ours(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """The API's rendering of a /v1/chat/completions body with these messages and tools (``auto``)."""
    from shop_assistant.api import schemas
    from shop_assistant.api.service import _conversation
    from shop_assistant.api.tools import tool_calling

    body = schemas.validate({"model": "m", "messages": messages, "tools": tools, "tool_choice": "auto"}, "chat")
    calling = tool_calling(body)
    assert calling is not None
    conversation = _conversation(body)
    return (render_chat(tokenizer, conversation, tools=calling.rendered),
            encode_chat(tokenizer, conversation, tools=calling.rendered))


@pytest.mark.heavy
@pytest.mark.untimed
@pytest.mark.parametrize("messages", [[SYSTEM, ASK], [ASK], [SYSTEM, ASK, CALLS, *RESULTS]],
                         ids=["system and user", "no system prompt", "calls and their results"])
def test_the_tools_prompt_is_the_gguf_templates_own(qwen: tuple[Any, str], messages: list[dict[str, Any]]) -> None:
    tokenizer, template = qwen
    assert tokenizer.chat_template == template  # the converted folder keeps the GGUF's template
    want = official(template, messages, TOOLS)
    text, ids = ours(tokenizer, messages, TOOLS)
    assert text == want
    assert ids == tokenizer.encode(want, add_special_tokens=False)
    # What the model is shown: the system prompt, then the tools one JSON a line, then the call example as the
    # template writes it (its doubled braces included).
    assert '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>' in text
    assert "\n" + json.dumps(TOOLS[0], ensure_ascii=False) + "\n" in text
