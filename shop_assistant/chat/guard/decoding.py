"""How an answer is decoded: sampling settings per store, and the filters that end an answer going wrong.

A 135M model left alone repeats itself ("I'm happy to help you find ..."), sometimes claims to be a person, and
makes up prices and discounts ("68.5% off"). The sampler's penalties make loops rarer; ``LoopDetector`` ends the
answer as soon as one starts; stop strings cut a human claim before it is streamed (the engine holds back text
that may still grow into a stop string); ``FigureFilter`` holds back a price, percentage or stock count until it
is complete and ends the answer before one that is not the catalog's, the store's or the shopper's own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import regex

from django.conf import settings

from catalog.models import Store
from catalog.text import SENTENCE_END

from ..models import AnswerSettings

# The answer budget next to a policy quote (see pipeline.answer_budget); measured on the evaluation set.
QUOTED_ANSWER_MAX_TOKENS = 48
FINISH_REPETITION = "repetition"
FINISH_UNSUPPORTED_FIGURE = "unsupported_figure"  # a price, percentage or stock count nobody gave the model
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
    # Continuations drawn per answer (one request, ``n`` samples sharing the prompt's blocks); the checked answer
    # shows the one with the most supported sentences.
    candidates: int = 1

    def sampling_params(self, max_tokens: int | None = None, n: int = 1) -> Any:
        from inference import SamplingParams

        return SamplingParams(
            n=n,
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
            repetition_penalty=self.repetition_penalty,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            seed=self.seed,
            stop=HUMAN_CLAIM_STOPS,
        )


def site_defaults() -> dict[str, Any]:
    """The site's decoding defaults: settings.CHAT, their one source (chosen by measurement on the evaluation
    question set; see docs/chat-protocol.md)."""
    chat = settings.CHAT
    names = ("temperature", "repetition_penalty", "frequency_penalty", "presence_penalty", "candidates")
    return {"answer_max_tokens": chat["max_tokens"], **{name: chat[name] for name in names}}


def decoding_for(store: Store, seed: int | None = None) -> Decoding:
    """The store's own settings where it has them (null: the site default)."""
    values = site_defaults()
    settings_of_store = AnswerSettings.of(store)
    for name in values:
        own = getattr(settings_of_store, name, None)  # "candidates" is the site's alone
        if own is not None:
            values[name] = own
    return Decoding(
        max_tokens=int(values["answer_max_tokens"]),
        temperature=float(values["temperature"]),
        repetition_penalty=float(values["repetition_penalty"]),
        frequency_penalty=float(values["frequency_penalty"]),
        presence_penalty=float(values["presence_penalty"]),
        seed=seed if seed is not None else getattr(settings, "CHAT", {}).get("seed"),
        candidates=max(1, int(values["candidates"])),
    )


class LoopDetector:
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


# --- figures ---------------------------------------------------------------------------------------------------

_NUMBER = r"\d+(?:[.,]\d+)*"
_CODES = r"usd|eur|gbp|cad|aud|chf|dollars?|euros?|pounds?|bucks"
# A figure the shopper could act on: money ("$89", "89.00 USD", "USD 89", "40 off"), a percentage ("20%",
# "20 percent") or a stock count ("in stock: 3", "only 3 left"). Each alternative names its number ``n``.
# Bare numbers ("2-person", "30 days", "22L") are not figures: the rule is about prices and stock.
FIGURE = regex.compile(
    rf"(?:[$€£]|\b(?:{_CODES})\b)\s?(?P<n>{_NUMBER})"
    rf"|(?P<n>{_NUMBER})\s?(?:[$€£%]|(?:{_CODES}|percent|per\s?cent|off)\b)"
    rf"|\b(?:in\s+stock|stock(?:\s+level)?(?:\s+(?:of|is))?)\s*:?\s*(?P<n>{_NUMBER})"
    rf"|(?P<n>{_NUMBER})\s+(?:(?:units?|items?|pieces?)\s+)?(?:left|in\s+stock|remaining)\b",
    regex.IGNORECASE,
)
_ANY_NUMBER = re.compile(_NUMBER)
_FIGURE_CORE = re.compile(r"[\d$€£]")  # where the part of a figure that is held back begins
_SKU = re.compile(r"\[SKU [^\]]*\]")
_LIST_NUMBER = re.compile(r"^\s*\d+\.\s", re.MULTILINE)  # "1. Stormshell ...": a position, not a figure
# What is left dangling when a cut falls inside a list: its marker ("1.", "-") or the line announcing it ("...:").
_DANGLING = re.compile(r"(?:^|\n)[ \t]*(?:\d+\.|[-*•])[ \t]*$|(?:^|(?<=[.!?…\n]))[^.!?…\n]*:\s*$")


def amounts(number: str) -> set[Decimal]:
    """Every value ``number`` can mean: "1,299.99" is 1299.99; "89,00" is 89; "1.299" may be either reading.

    Matching by value makes "$89", "89.00 USD" and "89" the same figure; where the separators are ambiguous
    every reading is kept (a figure is allowed when one of them is), so a store's own format is never refused.
    """
    values = set()
    for thousands, decimal in ((",", "."), (".", ",")):
        whole, _, fraction = number.partition(decimal)
        groups = whole.split(thousands)
        # A thousands separator only ever sits before three digits: "189.00" is never 18900.
        if decimal in fraction or thousands in fraction or any(len(group) != 3 for group in groups[1:]):
            continue
        values.add(Decimal("".join(groups) + ("." + fraction if fraction else "")))
    return values


def allowed_figures(*texts: str) -> frozenset[Decimal]:
    """Every number in ``texts`` (catalog facts, card prices, quotes, the store's prompt, the shopper's words).

    Any number, not only those written as prices: "orders over 50 USD ship free" allows "$50", and "under 150"
    allows "$150". SKUs and list numbers are left out (a code or a position is not a figure the answer may state).
    """
    values: set[Decimal] = set()
    for text in texts:
        for number in _ANY_NUMBER.findall(_LIST_NUMBER.sub(" ", _SKU.sub(" ", text or ""))):
            values |= amounts(number)
    return frozenset(values)


def figures_of(text: str) -> list[str]:
    """The figures written in a finished text ("$28.60", "68.5%")."""
    return [match.group() for match in FIGURE.finditer(text)]


class FigureFilter:
    """Shows the streamed text, holding back a figure until it is complete, and ends the answer at a made-up one.

    A figure is allowed when its value is among ``allowed`` (see ``allowed_figures``). Text is held back only
    from a digit or a currency sign that may belong to a figure until what follows settles it (usually the next
    token); words pass at once, also those that may lead into a figure ("in stock", "USD"): holding every "I"
    or "a" that might begin one would delay most answers' first token by a whole engine step. An unsupported
    figure ends the answer at the last sentence end before it: the number itself is never shown. The words of
    its sentence before it may already be on screen (they streamed before anything showed a figure was
    coming); ``kept`` is then shorter than ``shown`` and the client is told to replace the text with it
    (``end.text``, docs/chat-protocol.md).
    """

    def __init__(self, allowed: Iterable[Decimal]) -> None:
        self.allowed = frozenset(allowed)
        self._text = ""
        self._released = 0
        self._scan = 0  # no figure starts before this: everything before it has been checked
        self.kept: str | None = None  # the answer as it stands, once a figure was refused
        self.refused = ""  # that figure

    @property
    def tripped(self) -> bool:
        return self.kept is not None

    @property
    def shown(self) -> str:
        return self._text[: self._released]

    def feed(self, delta: str) -> str:
        """Add streamed text; return the part that may be shown now ("" while a figure is still forming)."""
        if self.tripped:
            return ""
        self._text += delta
        return self._advance(final=False)

    def finish(self) -> str:
        """The stream ended: nothing can grow any more, so the held tail is checked as it stands."""
        if self.tripped:
            return ""
        return self._advance(final=True)

    def is_allowed(self, figure_number: str) -> bool:
        return bool(amounts(figure_number) & self.allowed)

    def _advance(self, final: bool) -> str:
        text, position, hold = self._text, self._scan, len(self._text)
        while True:
            match = FIGURE.search(text, position, partial=not final)
            if match is None or match.start() == match.end():  # no figure can start before the end
                position = len(text)
                break
            # "$89" followed by "." or nothing may still become "$89.99": wait for the next character.
            still_growing = not final and text[match.end() :] in ("", ".", ",")
            if match.partial or still_growing:
                position = match.start()  # checked again, whole, once more text has come
                core = _FIGURE_CORE.search(text, match.start())
                hold = core.start() if core is not None else len(text)
                break
            if not self.is_allowed(match.group("n")):
                return self._refuse(match.start(), match.group())
            position = match.end()
        self._scan = position
        hold = max(hold, self._released)
        shown = text[self._released : hold]
        self._released = hold
        return shown

    def _refuse(self, start: int, figure: str) -> str:
        ends = [end.end() for end in SENTENCE_END.finditer(self._text, 0, start)]
        cut = ends[-1] if ends else 0
        kept = self._text[:cut].rstrip()
        while (dangling := _DANGLING.search(kept)) is not None:  # "Here is the list:\n\n1." is no sentence
            kept = kept[: dangling.start()].rstrip()
        self.refused = figure
        self.kept = kept
        shown = self._text[self._released : len(kept)] if len(kept) > self._released else ""
        self._released = max(self._released, len(kept))
        return shown
