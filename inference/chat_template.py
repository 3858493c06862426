"""Chat-template rendering: the one place that turns a conversation into prompt token ids."""

from __future__ import annotations

from typing import Any


def encode_chat(
    tokenizer: Any, conversation: list[dict[str, str]], add_generation_prompt: bool = True, assistant_prefix: str = ""
) -> list[int]:
    """Token ids of ``conversation`` in the model's chat template (with the assistant's generation prompt,
    unless told otherwise). ``assistant_prefix``: the start of the assistant's answer, for the model to continue
    (as vLLM's ``continue_final_message``); it is tokenized together with the template's text."""
    if assistant_prefix and not add_generation_prompt:
        raise ValueError("an assistant prefix continues the assistant's turn: it needs the generation prompt")
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=add_generation_prompt)
    text += assistant_prefix
    # The template already wrote every special token it wants.
    return list(tokenizer.encode(text, add_special_tokens=False))
