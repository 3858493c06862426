"""Cutting streamed model text into whole sentences, so each can be checked before a shopper reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from catalog.text import SENTENCE_END

_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|approx|incl|no|mr|mrs|ms|dr|st)|\b[A-Z](?:\.[A-Z])*)\.$", re.IGNORECASE)
# "1." or "-" at the start of a line: a list item's marker, not a sentence.
_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*$")
_WORDS = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Sentence:
    text: str
    separator: str  # what goes before it on screen: " " or "\n" (the model started a new line or a list item)


class SentenceSplitter:
    """Feed streamed text; get back the sentences completed so far. ``finish`` settles the rest.

    A sentence is complete at its end mark followed by whitespace (the next piece proves it is not "14.95"),
    or at a line break. Abbreviations ("e.g.") and a list's markers ("1.") never end one.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._separator = ""

    def feed(self, delta: str) -> list[Sentence]:
        self._buffer += delta
        sentences = []
        position = 0
        for end in SENTENCE_END.finditer(self._buffer):
            candidate = self._buffer[position : end.end()]
            if end.group() != "\n" and _ABBREVIATION.search(candidate.rstrip()):
                continue
            if _MARKER.match(candidate.rstrip("\n")):
                continue
            sentence = self._take(candidate)
            if sentence is not None:
                sentences.append(sentence)
            position = end.end()
        self._buffer = self._buffer[position:]
        return sentences

    def finish(self, ended_by_model: bool) -> tuple[Sentence | None, str]:
        """(the last sentence, the fragment left out). The model's own end (EOS) makes a last unpunctuated
        sentence of three words or more complete ("Let me know if you need anything else"); a stop for the
        length budget never does: that text is cut, and is left out."""
        rest = self._buffer
        self._buffer = ""
        text = rest.strip()
        if not text:
            return None, ""
        if text[-1] in ".!?…" or (ended_by_model and len(_WORDS.findall(text)) >= 3):
            if text[-1] not in ".!?…\"'’”)":
                text += "."
            return self._take(text), ""
        return None, text

    def _take(self, raw: str) -> Sentence | None:
        separator = "\n" if "\n" in (self._separator + raw[: len(raw) - len(raw.lstrip())]) else " "
        text = raw.strip()
        if not text:
            self._separator += raw  # blank lines: remembered as a line break before the next sentence
            return None
        self._separator = raw[len(raw.rstrip()) :]
        return Sentence(text, separator)
