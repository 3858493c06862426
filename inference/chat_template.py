"""Chat-template rendering: the one place that turns a conversation into prompt token ids."""

from __future__ import annotations

from typing import Any


def encode_chat(tokenizer: Any, conversation: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
    """Token ids of ``conversation`` in the model's chat template (with the assistant's generation prompt,
    unless told otherwise)."""
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=add_generation_prompt)
    # The template already wrote every special token it wants.
    return list(tokenizer.encode(text, add_special_tokens=False))
