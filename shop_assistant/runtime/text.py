"""Text every database and the tokenizer take: the boundary where what a client sent becomes storable text.

Used by the chat (a shopper's message, the chat log) and the API (prompts): a frame can carry characters no
database stores, and such a message must be stored and answered, not dropped.
"""

from __future__ import annotations

from typing import Any


def clean_text(text: str) -> str:
    """``text`` without NUL characters (PostgreSQL refuses them) and with lone surrogates (not Unicode; a JSON
    frame can carry ``"\\ud800"``) replaced by U+FFFD, so the message is stored and tokenized, never dropped."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def clean_value(value: Any) -> Any:
    """``clean_text`` applied to every string in a JSON-like value (dict keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value
