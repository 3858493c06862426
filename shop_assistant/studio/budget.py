"""What a system prompt costs: tokens, KV blocks, and how much of the context it leaves for conversations."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from shop_assistant.runtime import engine_service

# A system prompt longer than this share of max_model_len leaves too little for catalog results, earlier turns
# and the answer: the chat then drops history early, and long questions are refused.
MAX_PROMPT_SHARE = 0.5


@dataclass(frozen=True)
class Budget:
    tokens: int
    block_size: int
    max_model_len: int

    @property
    def blocks(self) -> int:
        """KV blocks the prompt occupies (the last one may be partly filled)."""
        return -(-self.tokens // self.block_size)

    @property
    def full_blocks(self) -> int:
        """Blocks every conversation shares through the prefix cache (only full blocks are shared)."""
        return self.tokens // self.block_size

    @property
    def cached_tokens(self) -> int:
        return self.full_blocks * self.block_size

    @property
    def room(self) -> int:
        """Tokens left for catalog results, the conversation and the answer."""
        return max(self.max_model_len - self.tokens, 0)

    @property
    def percent(self) -> int:
        return round(100 * self.tokens / self.max_model_len) if self.max_model_len else 100

    @property
    def too_long(self) -> bool:
        return self.tokens > self.max_model_len * MAX_PROMPT_SHARE


def engine_limits(engine: Any | None) -> tuple[int, int]:
    """(block_size, max_model_len) of the running engine, else from settings.ENGINE."""
    if engine is not None:
        return engine.block_size, engine.max_model_len
    return int(settings.ENGINE.get("block_size") or 16), int(settings.ENGINE.get("max_model_len") or 2048)


def prompt_budget(system_text: str, engine: Any | None = None) -> Budget | None:
    """Token count of the system prefix as the chat renders it; None while the engine (tokenizer) is not loaded."""
    from .prewarm import system_prefix_ids

    engine = engine or engine_service.running_engine()
    if engine is None:
        return None
    block_size, max_model_len = engine_limits(engine)
    tokens = len(system_prefix_ids(engine, system_text))
    return Budget(tokens=tokens, block_size=block_size, max_model_len=max_model_len)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add" | "del" | "same" | "hunk"
    text: str


def line_diff(old: str, new: str, context: int = 3) -> list[DiffLine]:
    """A unified line diff of two prompt texts, for the template (which escapes it)."""
    lines: list[DiffLine] = []
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context)
    for line in diff:
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("add", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("del", line[1:]))
        else:
            lines.append(DiffLine("same", line[1:]))
    return lines
