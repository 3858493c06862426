"""Chat-template rendering: the one place that turns a conversation into prompt token ids.

Tools (OpenAI's ``tools``: ``{"type": "function", "function": {name, description, parameters}}``) go to the
model's own template when it has a tools branch (it reads ``tools``, as Qwen2.5's does): the template then also
renders assistant messages' ``tool_calls`` and ``tool`` messages its own way. A template without one (SmolLM2's)
gets the same conversation rewritten into the roles it knows, in the Hermes format Qwen2.5 was trained on:

- the tool signatures join the system prompt (a new system message when there is none): a ``# Tools`` section
  with one JSON signature a line inside ``<tools></tools>``, and how to call one: a
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block per call;
- an assistant message's ``tool_calls`` become such blocks after its text;
- ``tool`` messages become a user message of ``<tool_response>...</tool_response>`` blocks (consecutive results
  share one message).

So the calls a model writes and the calls it is shown in its history have one format, whichever template.

The template is the model's own, rendered as transformers' ``apply_chat_template`` renders it (so as vLLM and
SGLang do), byte for byte: Qwen2.5's shows its call example as ``{{"name": <function-name>, "arguments":
<args-json-object>}}``, the braces doubled inside a Jinja string literal, in Qwen's own tokenizer_config.json as in
its GGUF files. That is the prompt the model was released with; it is not ours to rewrite.
"""

from __future__ import annotations

import json
from typing import Any

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"


def encode_chat(
    tokenizer: Any,
    conversation: list[dict[str, Any]],
    add_generation_prompt: bool = True,
    assistant_prefix: str = "",
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """Token ids of ``conversation`` in the model's chat template (with the assistant's generation prompt,
    unless told otherwise). ``assistant_prefix``: the start of the assistant's answer, for the model to continue
    (as vLLM's ``continue_final_message``); it is tokenized together with the template's text. ``tools``: the
    functions the model may call (see the module's docstring)."""
    if assistant_prefix and not add_generation_prompt:
        raise ValueError("an assistant prefix continues the assistant's turn: it needs the generation prompt")
    text = render_chat(tokenizer, conversation, add_generation_prompt, tools)
    text += assistant_prefix
    # The template already wrote every special token it wants.
    return list(tokenizer.encode(text, add_special_tokens=False))


def render_chat(
    tokenizer: Any, conversation: list[dict[str, Any]], add_generation_prompt: bool = True,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The template's text for ``conversation`` (and ``tools``), before tokenization."""
    if has_tools_branch(tokenizer):
        kwargs = {"tools": tools} if tools else {}
        conversation = [_with_argument_objects(m) for m in conversation]
        return tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs,
        )
    conversation = _without_tool_roles(conversation, tools)
    return tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=add_generation_prompt)


def has_tools_branch(tokenizer: Any) -> bool:
    """Whether the model's template renders ``tools`` itself (the way transformers tells: it reads the name)."""
    template = getattr(tokenizer, "chat_template", None)
    return isinstance(template, str) and "tools" in template


def tools_system_text(tools: list[dict[str, Any]]) -> str:
    """The system prompt's section describing ``tools`` to a model whose template has no tools branch."""
    signatures = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\nYou can call functions to help with the user's request. Their signatures, one per line:\n"
        f"<tools>\n{signatures}\n</tools>\n\n"
        "To call one, answer with a JSON object holding its name and arguments inside tags, one block per call:\n"
        f'{TOOL_CALL_OPEN}\n{{"name": "<function name>", "arguments": {{<arguments as JSON>}}}}\n{TOOL_CALL_CLOSE}'
    )


def tool_call_text(name: str, arguments: Any) -> str:
    """One call in the Hermes format: what a model writes, and how a past call is shown to it."""
    call = json.dumps({"name": name, "arguments": _arguments_object(arguments)}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{call}\n{TOOL_CALL_CLOSE}"


def _arguments_object(arguments: Any) -> Any:
    """OpenAI sends a call's arguments as JSON text; templates (and the Hermes format) want the object."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _with_argument_objects(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    calls = [
        {**call, "function": {**call["function"], "arguments": _arguments_object(call["function"].get("arguments"))}}
        for call in calls
    ]
    return {**message, "tool_calls": calls}


def _without_tool_roles(
    conversation: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """The conversation in system/user/assistant messages of plain text (see the module's docstring)."""
    out: list[dict[str, Any]] = []
    for message in conversation:
        role, content = message["role"], message.get("content") or ""
        if role == "tool":
            block = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1].get("tool_results"):
                out[-1] = {**out[-1], "content": out[-1]["content"] + "\n" + block}
            else:
                out.append({"role": "user", "content": block, "tool_results": True})
            continue
        if role == "assistant" and message.get("tool_calls"):
            calls = [c["function"] for c in message["tool_calls"]]
            blocks = [tool_call_text(call["name"], call.get("arguments")) for call in calls]
            content = "\n".join(([content] if content else []) + blocks)
        out.append({"role": role, "content": content})
    out = [{"role": m["role"], "content": m["content"]} for m in out]
    if tools:
        section = tools_system_text(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{section}"}
        else:
            out.insert(0, {"role": "system", "content": section})
    return out
