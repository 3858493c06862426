"""Chat-template rendering of tools: the model's own tools branch, or the Hermes fallback for one without."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inference.chat_template import encode_chat, has_tools_branch, render_chat, tool_call_text

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                              "parameters": CITY}}
HISTORY = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "24 C"},
]

# The shape of Qwen2.5's template, reduced: tools as JSON in the system turn, calls with their arguments as
# objects (``tojson``), tool results in user turns.
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %}{{ t | tojson }}{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}{% if m.role == 'tool' %}<|im_start|>user\nRESULT {{ m.content }}<|im_end|>\n"
    "{% elif m.tool_calls %}<|im_start|>assistant\n{% for c in m.tool_calls %}CALL {{ c.function.name }} "
    "{{ c.function.arguments | tojson }}{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def fresh_tokenizer(model_path: Path) -> Any:
    from inference.worker.loader import load_tokenizer

    return load_tokenizer(model_path)


def test_smollm2_template_has_no_tools_branch(tokenizer: Any) -> None:
    assert not has_tools_branch(tokenizer)


def test_without_a_tools_branch_tools_join_the_system_prompt_and_calls_are_hermes_blocks(tokenizer: Any) -> None:
    conversation = [{"role": "system", "content": "You help shoppers."}, *HISTORY]
    text = render_chat(tokenizer, conversation, tools=[WEATHER])
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nYou help shoppers.\n\n# Tools")
    assert "<tools>\n" + json.dumps(WEATHER) + "\n</tools>" in system and "<tool_call>" in system
    # The past calls as the model is told to write them, their results in one user turn.
    calls = tool_call_text("get_weather", {"city": "Paris"}) + "\n" + tool_call_text("get_weather", {"city": "Rome"})
    assert f"<|im_start|>assistant\n{calls}<|im_end|>" in text
    assert ("<|im_start|>user\n<tool_response>\n18 C\n</tool_response>\n<tool_response>\n24 C\n</tool_response>"
            "<|im_end|>") in text
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>tool" not in text
    assert encode_chat(tokenizer, conversation, tools=[WEATHER]) == tokenizer.encode(text, add_special_tokens=False)


def test_without_tools_the_rendering_is_the_templates_own(tokenizer: Any) -> None:
    conversation = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    plain = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert render_chat(tokenizer, conversation) == plain  # the default system prompt included
    with_tools = render_chat(tokenizer, conversation, tools=[WEATHER])
    assert with_tools.startswith("<|im_start|>system\n# Tools") and "SmolLM" not in with_tools


def test_a_template_with_a_tools_branch_renders_them_itself(fresh_tokenizer: Any) -> None:
    fresh_tokenizer.chat_template = TOOLS_TEMPLATE
    assert has_tools_branch(fresh_tokenizer)
    text = render_chat(fresh_tokenizer, HISTORY, tools=[WEATHER])
    assert text.startswith("<|im_start|>system\nTOOLS:" + json.dumps(WEATHER))
    # The arguments reach the template as objects, not as OpenAI's JSON text.
    assert 'CALL get_weather {"city": "Paris"}CALL get_weather {"city": "Rome"}' in text
    assert "RESULT 18 C" in text and "RESULT 24 C" in text and "# Tools" not in text
    assert not render_chat(fresh_tokenizer, HISTORY[:1]).startswith("<|im_start|>system")


# The tools prompt of Qwen2.5's template, reduced: its call example sits in a Jinja string literal with doubled
# braces, which Jinja writes as they are (Qwen's tokenizer_config.json and its GGUF files alike).
GGUF_QWEN_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}"
    "{{- tool | tojson }}{%- endfor %}"
    '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within '
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{{\\"name\\": <function-name>, \\"arguments\\": '
    '<args-json-object>}}\\n</tool_call><|im_end|>\\n" }}{%- endif %}'
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_a_tools_prompt_is_the_templates_own_byte_for_byte(fresh_tokenizer: Any) -> None:
    """What vLLM and SGLang show the model: the template as transformers renders it, the call example's doubled
    braces included (the prompt the model was released with is not ours to rewrite)."""
    fresh_tokenizer.chat_template = GGUF_QWEN_TEMPLATE
    conversation = [{"role": "user", "content": "Weather in {{Paris}}?"}]
    text = render_chat(fresh_tokenizer, conversation, tools=[WEATHER])
    assert text == fresh_tokenizer.apply_chat_template(conversation, tools=[WEATHER], tokenize=False,
                                                        add_generation_prompt=True)
    assert '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>' in text
    assert encode_chat(fresh_tokenizer, conversation, tools=[WEATHER]) == fresh_tokenizer.encode(
        text, add_special_tokens=False)
    fresh_tokenizer.chat_template = TOOLS_TEMPLATE
    assert render_chat(fresh_tokenizer, HISTORY, tools=[WEATHER]) == fresh_tokenizer.apply_chat_template(
        [*HISTORY[:1], {**HISTORY[1], "tool_calls": [
            {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
            for c in HISTORY[1]["tool_calls"]]}, *HISTORY[2:]],
        tools=[WEATHER], tokenize=False, add_generation_prompt=True)
