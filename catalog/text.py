"""Sentences and word stems: the one implementation the catalog, the chat and the evaluation share.

Here, not in the chat, because the catalog may import nothing of the web app (tests/test_architecture.py) and
cuts its documents into sentences too. Plain regular expressions: microseconds a call.
"""

from __future__ import annotations

import re

# Where a sentence ends in running (streamed) text: . ! ? or … with any closing quote, bracket or markdown mark
# after it, before whitespace (the next piece proves "14.95" is no end), or a line break.
SENTENCE_END = re.compile(r"[.!?…]+[\"'’”)\]*_]*(?=\s)|\n")
# Between the sentences of a whole text: whitespace after . ! or ?, or line breaks.
_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
# The same, where the next sentence must start as one does ("approx. 2 kg" stays one sentence); a list item of a
# description whose lines were joined ("... at night. - Packed weight 1.6 kg - Floor 215 x 130 cm") is one too.
_BREAK_BEFORE_START = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\s+-\s+(?=[A-Z0-9])|\n+")


def split_sentences(text: str, *, starts_upper: bool = False) -> list[str]:
    """The sentences of a whole text, stripped, blank ones left out. ``starts_upper``: a break after . ! ?
    counts only before a capital, a digit, a quote or a bracket (for prose such as product descriptions)."""
    breaks = _BREAK_BEFORE_START if starts_upper else _BREAK
    return [part.strip() for part in breaks.split(text) if part.strip()]


def stem(word: str, *, ing: bool = False) -> str:
    """A lower-case word folded so plurals meet their singulars ("earrings"/"earring", "boxes"/"box",
    "batteries"/"battery"); ``ing``: "-ing" forms too ("hiking"/"hik", "wearing"/"wear")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if ing and len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# Words that say "not": a sentence with one says the opposite of one without.
NEGATIONS = ("not", "no", "never", "cannot", "can't", "won't", "don't", "doesn't", "isn't", "aren't")


def any_word(*words: str) -> re.Pattern[str]:
    """Any of ``words`` (each a word, a phrase or a pattern of one) as a whole word, in any case."""
    return re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE)
