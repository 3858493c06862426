"""How an answer is decoded: sampling settings per store, and guards that end an answer going wrong.

A 135M model left alone repeats itself ("I'm happy to help you find ...") and sometimes claims to be a person.
The sampler's penalties make loops rarer; ``LoopGuard`` ends the answer as soon as one starts; stop strings
cut a human claim before it is streamed (the engine holds back text that may still grow into a stop string).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from catalog.models import Store

# Chosen by measurement on the evaluation question set (see the commit message and docs/chat-protocol.md).
DEFAULTS = {
    "answer_max_tokens": 120,
    "temperature": 0.2,
    "repetition_penalty": 1.15,
    "frequency_penalty": 0.3,
    "presence_penalty": 0.0,
}
FINISH_REPETITION = "repetition"
FINISH_FIXED = "fixed"  # a fixed reply (no match, handoff, identity): no model text

# Exact strings the engine stops at (it compares text, so every spelling the model uses is listed).
HUMAN_CLAIM_STOPS = [
    f"{subject} {article}{adjective}{noun}"
    for subject in ("I'm", "I am", "I’m", "i'm", "Im")
    for article in ("a ", "an ", "your ", "the ", "")
    for adjective in ("", "real ", "live ")
    for noun in ("human", "person")
    if not (article == "an " and adjective != "")
] + ["human agent here", "I am not a bot", "I'm not a bot", "I am not an AI", "I'm not an AI"]

_WORD = re.compile(r"[\w$€£'’.-]+")


def words_of(text: str) -> list[str]:
    """Lower-case words, punctuation around them dropped ("14.95" stays one word)."""
    return [word for word in (w.lower().strip(".,'’-") for w in _WORD.findall(text)) if word]


@dataclass(frozen=True)
class Decoding:
    max_tokens: int
    temperature: float
    repetition_penalty: float
    frequency_penalty: float
    presence_penalty: float
    seed: int | None = None

    def sampling_params(self, max_tokens: int | None = None) -> Any:
        from inference import SamplingParams

        return SamplingParams(
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
            repetition_penalty=self.repetition_penalty,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            seed=self.seed,
            stop=HUMAN_CLAIM_STOPS,
        )


def site_defaults() -> dict[str, Any]:
    """settings.CHAT's decoding values (an unset one falls back to ``DEFAULTS``)."""
    chat = getattr(settings, "CHAT", {})
    values = dict(DEFAULTS)
    if chat.get("max_tokens") is not None:
        values["answer_max_tokens"] = chat["max_tokens"]
    for name in ("answer_max_tokens", "temperature", "repetition_penalty", "frequency_penalty", "presence_penalty"):
        if chat.get(name) is not None:
            values[name] = chat[name]
    return values


def decoding_for(store: Store, seed: int | None = None) -> Decoding:
    """The store's own settings where it has them (null: the site default)."""
    values = site_defaults()
    for name in values:
        own = getattr(store, name, None)
        if own is not None:
            values[name] = own
    return Decoding(
        max_tokens=int(values["answer_max_tokens"]),
        temperature=float(values["temperature"]),
        repetition_penalty=float(values["repetition_penalty"]),
        frequency_penalty=float(values["frequency_penalty"]),
        presence_penalty=float(values["presence_penalty"]),
        seed=seed if seed is not None else getattr(settings, "CHAT", {}).get("seed"),
    )


class LoopGuard:
    """Watches the streamed text and says when the answer starts repeating itself.

    It trips on the second occurrence of any ``long``-word phrase, or the third of any ``short``-word one, so
    the shopper never sees a phrase of ``short + 1`` words three times (the evaluation's definition of a loop).
    Only complete words count: the word still being streamed may grow.
    """

    def __init__(self, short: int = 4, short_repeats: int = 3, long: int = 7) -> None:
        self.short, self.short_repeats, self.long = short, short_repeats, long
        self._text = ""
        self._words: list[str] = []
        self._counts: dict[int, Counter[tuple[str, ...]]] = {short: Counter(), long: Counter()}
        self.tripped = False

    def feed(self, delta: str) -> bool:
        """Add streamed text; True once the answer is looping."""
        if self.tripped:
            return True
        self._text += delta
        complete = self._text
        if complete and not complete[-1].isspace():  # the last word may not be complete yet
            parts = complete.rsplit(None, 1)
            complete = parts[0] if len(parts) == 2 else ""
        words = words_of(complete)
        for index in range(len(self._words), len(words)):
            self._words.append(words[index])
            for n, limit in ((self.short, self.short_repeats), (self.long, 2)):
                if len(self._words) >= n:
                    gram = tuple(self._words[-n:])
                    self._counts[n][gram] += 1
                    if self._counts[n][gram] >= limit:
                        self.tripped = True
                        return True
        return False
