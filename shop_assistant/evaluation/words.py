"""The evaluation's judgement of the words a shopper reads, from the final on-screen text alone.

Written apart from the chat's sentence checker (``shop_assistant.chat.guard.checker``) and with rules of its own, so
the evaluation measures the checker instead of repeating it: a sentence it lets through that these rules call
unsupported, disowning or narrating is a failure of the checker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from catalog.text import NEGATIONS, any_word, split_sentences, stem

_ENDS = ('.', '!', '?', '"', ')', '”', '’', "'")
_DISOWNS = any_word(
    "as an? (?:ai|digital|virtual|language|computer)", "digital (?:platform|shopping)", "language model",
    "i (?:can(?:no|')t|do not|don't|am not able to) (?:sell|have access|access|provide|help)", "real[- ]world",
    "physical (?:goods|catalogs?)", "amazon", "ebay", "other (?:retailers|stores|websites|platforms)", "local store",
    "not (?:a|our) (?:store|shop)",
)
_NARRATES = any_word(
    "(?:the|this|that) (?:customer|user|shopper|chatbot|bot|client)s?", "chat ?history",
    "(?:customer|shopper|user) (?:wants|asked|is asking|said)",
)
# A speaker's label starting a line ("User:", "Customer Service:", "[Seller]:"): one to three capitalised words.
_SPEAKER = re.compile(r"^\s*[\[*]?((?:[A-Z][\w']*)(?: [A-Z][\w']*){0,2})[\]*]?:\s")
_NEGATIVE = any_word(*NEGATIONS, "only")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-z]+(?:[A-Z][a-z]+)*\b")
_TERM = re.compile(r"[a-z]{4,}")
# Words of any helpful reply: they need no evidence.
_PLAIN = frozenset(
    """that this with have your you'd would like know need help find anything else something here there what
    which please thanks thank asking glad happy hope enjoy welcome let more information specific looking
    question questions just also have from they them their these those when where will could should might
    great perfect sure today right about into only than then very much many some other options option each
    every what's that's there's here's you're we're it's least most expensive match matches asked want wants neither none described closest pick""".split()
)


sentences = split_sentences


@dataclass
class Judgement:
    unsupported: list[str] = field(default_factory=list)  # sentences with a figure, name or claim not in evidence
    disowning: list[str] = field(default_factory=list)
    narrating: list[str] = field(default_factory=list)
    contradicting: list[str] = field(default_factory=list)  # against a quote shown beside the answer
    cut: bool = False  # the text stops mid-sentence
    empty: bool = False


def unsupported_sentence(sentence: str, evidence: str) -> bool:
    """A number or a name that the evidence does not have, or a claim most of whose words it does not."""
    lowered = evidence.lower()
    if any(number not in evidence for number in _NUMBER.findall(sentence)):
        return True
    if any(name.lower() not in lowered for name in _NAME.findall(sentence)):
        return True
    terms = [stem(t, ing=True) for t in _TERM.findall(sentence.lower()) if t not in _PLAIN]
    if not terms:
        return False
    missing = [t for t in terms if t not in lowered]
    return len(missing) / len(terms) > 0.25


# Words that turn a policy around: "unused items" against "after wearing them", "within 30 days" against "after".
_OPPOSITES = [
    ({"unused", "new", "original"}, {"used", "worn", "wear", "wearing", "wore", "after wearing"}),
    ({"within", "before"}, {"after", "beyond", "past", "later than"}),
    ({"free"}, {"charge", "fee", "fees", "pay for"}),
    ({"only"}, {"also", "anywhere", "worldwide", "internationally"}),
]


def _has(text: str, words: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(word)}\b", text) for word in words)


def contradicts(sentence: str, quotes: Iterable[str]) -> bool:
    """The sentence shares words with a quoted sentence and says the opposite: one is negated and the other not,
    or one has a word the other turns around ("unused" against "after wearing")."""
    words = {stem(t, ing=True) for t in _TERM.findall(sentence.lower())} - _PLAIN
    lowered = sentence.lower()
    for quote in quotes:
        for quoted in sentences(quote):
            theirs = {stem(t, ing=True) for t in _TERM.findall(quoted.lower())} - _PLAIN
            shared = len(words & theirs)
            if shared >= 3 and bool(_NEGATIVE.search(sentence)) != bool(_NEGATIVE.search(quoted)):
                return True
            if shared >= 1 and any(
                (_has(quoted.lower(), ours) and _has(lowered, other)) or (_has(quoted.lower(), other) and _has(lowered, ours))
                for ours, other in _OPPOSITES
            ):
                return True
    return False


def narrates(sentence: str, titles: Iterable[str] = ()) -> bool:
    """Talks about the conversation instead of taking part in it, or stages one ("User: ..."). A product's name
    before a colon ("Boho Earrings: turquoise globes ...") is a label of the store's, not a speaker."""
    if _NARRATES.search(sentence):
        return True
    speaker = _SPEAKER.match(sentence)
    return speaker is not None and not any(speaker.group(1).lower() in title.lower() for title in titles)


def judge(
    text: str, evidence: str, quotes: Iterable[str] = (), fixed: bool = False, titles: Iterable[str] = ()
) -> Judgement:
    """The words of one answer. ``evidence``: everything the answer may rest on (question, cards, quotes,
    the carded products' catalog rows, the store's documents and prompt, what it sells, its name); ``titles``:
    the cards' product titles. A fixed reply is the store's own text: only emptiness and cuts are judged."""
    judgement = Judgement()
    stripped = text.strip()
    if not stripped:
        judgement.empty = True
        return judgement
    judgement.cut = not stripped.endswith(_ENDS)
    if fixed:
        return judgement
    quotes = list(quotes)
    quoted = [part.rstrip(".").lower() for quote in quotes for part in sentences(quote)]
    for sentence in sentences(stripped):
        if _DISOWNS.search(sentence):
            judgement.disowning.append(sentence)
        if narrates(sentence, titles):
            judgement.narrating.append(sentence)
        if unsupported_sentence(sentence, evidence):
            judgement.unsupported.append(sentence)
        # A sentence that restates a quoted one is the store's own words, not a claim against them.
        if not any(part and part in sentence.lower() for part in quoted) and contradicts(sentence, quotes):
            judgement.contradicting.append(sentence)
    return judgement
