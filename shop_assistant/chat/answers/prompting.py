"""Prompt assembly for one assistant answer.

Layout, chosen for the prefix cache:

1. the store's published system prompt, the same bytes for every session of the store (its KV blocks are
   shared by all of them; the store's cache_salt keeps them apart from other stores' blocks);
2. the conversation's earlier turns, replayed exactly as the model saw them the first time (a user turn keeps
   the catalog results that came with it), so a follow-up question reuses the whole previous prompt;
3. the latest user turn, with what retrieval found for it.

When the result does not fit the model's context, the oldest turns go first; the system prompt and the latest
turn are never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from inference.chat_template import encode_chat

NO_RESULTS = "(nothing in the catalog matched this message)"
# Fewest tokens worth generating: below this the answer would be cut off almost at once, so refuse instead.
MIN_ANSWER_TOKENS = 16


class PromptTooLongError(ValueError):
    """The system prompt and the latest turn alone leave no room for an answer."""

    def __init__(self, prompt_tokens: int, limit: int) -> None:
        super().__init__(
            f"this message and the store's instructions take {prompt_tokens} tokens; the model reads at most "
            f"{limit} (including the answer). Please send a shorter message."
        )
        self.prompt_tokens = prompt_tokens
        self.limit = limit


class ChatTokenizer(Protocol):
    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...


@dataclass(frozen=True)
class Turn:
    """One earlier message as the model sees it. Agent messages are replayed as assistant turns."""

    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True)
class AssembledPrompt:
    token_ids: list[int]
    max_tokens: int
    turns_used: int  # earlier turns kept after trimming
    turns_dropped: int


def user_turn_content(text: str, facts: str) -> str:
    """The latest user turn: catalog results first, the shopper's words last (small models attend to the end).

    No note telling the model not to write prices: measured on the evaluation set (CHAT_SEED=0), "the cards
    show prices and stock: do not write prices, discounts or stock counts" after the facts made product answers
    longer (median 76 words against 49) without fewer made-up figures (4 against 5 of 36). The figure filter
    (decoding.FigureFilter) is what keeps them off the screen.
    """
    facts = facts.strip() or NO_RESULTS
    return f"Catalog results for this message:\n{facts}\n\nShopper: {text.strip()}"


def chat_messages(system_prompt: str, turns: Sequence[Turn], latest_user: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system_prompt}]
    messages += [{"role": turn.role, "content": turn.content} for turn in turns]
    messages.append({"role": "user", "content": latest_user})
    return messages


def render(
    tokenizer: ChatTokenizer, messages: list[dict[str, str]], add_generation_prompt: bool = True, answer_prefix: str = ""
) -> list[int]:
    """Token ids of ``messages`` through the model's own chat template (then ``answer_prefix``, the start of the
    assistant's answer that the model continues)."""
    return encode_chat(tokenizer, messages, add_generation_prompt, answer_prefix)


def _drop_oldest(turns: Sequence[Turn]) -> Sequence[Turn]:
    """Drop the oldest exchange: one user turn and the replies after it, so no reply is left without its question."""
    index = 1
    while index < len(turns) and turns[index].role != "user":
        index += 1
    return turns[index:]


def assemble(
    tokenizer: ChatTokenizer,
    system_prompt: str,
    turns: Sequence[Turn],
    latest_user: str,
    *,
    max_model_len: int,
    max_tokens: int,
    answer_prefix: str = "",
) -> AssembledPrompt:
    """Fit the prompt and at least ``MIN_ANSWER_TOKENS`` of answer (up to ``max_tokens``) into ``max_model_len``.

    ``answer_prefix``: the answer's opening (composed from the store's data), which the model continues."""
    kept: Sequence[Turn] = list(turns)
    wanted = min(max_tokens, max_model_len)
    while True:
        ids = render(tokenizer, chat_messages(system_prompt, kept, latest_user), answer_prefix=answer_prefix)
        if len(ids) + wanted <= max_model_len or not kept:
            break
        kept = _drop_oldest(kept)
    room = max_model_len - len(ids)
    if room < min(MIN_ANSWER_TOKENS, wanted):
        raise PromptTooLongError(len(ids), max_model_len)
    return AssembledPrompt(
        token_ids=ids, max_tokens=min(wanted, room), turns_used=len(kept), turns_dropped=len(turns) - len(kept)
    )
