"""What the assistant takes from the owner's prompt for the sentences it composes: the answer's language, products
to suggest alongside others, what to leave out, and the tone where it can be honoured without the model.

The prompt is the model's instructions too (it reads the whole text), but the answers a shopper reads are composed
from the store's data (``chat/answers/tools``) and the bundled 135M model's own sentences are almost never shown
(docs/answers.md §3). So an instruction the owner writes changed nothing on screen. ``read`` turns the prompt into
a declared structure (``Guidance``, pydantic) with plain rules, in microseconds and with any model; the chat
applies it in one place (``chat.answers.owner``), the studio shows it ("What the assistant understood") and the
score checks the answers against it (``evaluation.instructions``).

Read once per prompt text (``for_text``, cached by the text): a version's text never changes once published, and
a draft's changes with each save, so the cache is the "computed when saved" of every version, without a column.

Names in the guidance are the owner's words ("the cookset"); they are resolved against the catalog when an answer
is composed (``chat.answers.owner``), so a product renamed or removed since is reported, never invented.
"""

from __future__ import annotations

import functools
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from catalog.text import any_word

Language = Literal["en", "es", "fr", "de"]

# The languages the assistant composes in (shop_assistant/locale), by the names an owner writes.
LANGUAGE_NAMES: dict[str, Language] = {
    "english": "en", "spanish": "es", "español": "es", "espanol": "es", "castellano": "es",
    "french": "fr", "français": "fr", "francais": "fr", "german": "de", "deutsch": "de",
}  # fmt: skip
_OTHER_LANGUAGES = (
    "italian", "portuguese", "dutch", "polish", "swedish", "danish", "norwegian", "finnish", "russian", "chinese",
    "japanese", "korean", "arabic", "turkish", "greek", "hindi", "czech", "catalan",
)  # fmt: skip


class Suggestion(BaseModel):
    """"Suggest the cookset with any stove": an answer whose cards include a product matching ``trigger`` gets a
    card and a sentence for the product matching ``suggest``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    trigger: str = Field(description="the owner's words for the products that call for it: 'stove'")
    suggest: str = Field(description="the owner's words for the product to add: 'cookset'")
    source: str = Field(description="the owner's sentence")


class Avoid(BaseModel):
    """Something to leave out of the answers, of a kind the answer's cards and sentences can be checked for."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["out_of_stock", "competitors", "product"]
    words: str = Field("", description="for 'product': the owner's words for what to leave out")
    source: str


class Tone(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    greeting: str = Field("", description="words every answer starts with, as the owner wrote them")
    sign_off: str = Field("", description="words every answer ends with, as the owner wrote them")
    brief: bool = Field(False, description="'be brief': fewer composed sentences and a shorter model budget")


class Note(BaseModel):
    """An instruction the reader saw and could not apply, and why (the studio shows it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str
    reason: str


class Guidance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    language: Language | None = Field(None, description="answer in this language; None: the shopper's language")
    language_source: str = ""
    suggestions: list[Suggestion] = []
    avoid: list[Avoid] = []
    tone: Tone = Tone()
    not_applied: list[Note] = []

    @property
    def changes_answers(self) -> bool:
        return bool(self.language or self.suggestions or self.avoid or self.tone != Tone())


LEFT_TO_MODEL = "an instruction to the model, which reads the prompt; it changes no sentence composed from the store's data"

_ANSWERING = r"(?:answer|reply|respond|write|speak|talk|chat)(?:s|ing)?"
_LANGUAGE = any_word(rf"{_ANSWERING}\b[^.!?\n]*?\b(?:in|en|auf)\s+(?P<name>[a-zçñé]+)")
_SHOPPERS_LANGUAGE = re.compile(
    r"\b(?:in|using)\s+(?:the\s+)?(?:same\s+language\s+as|language\s+of)\s+the\s+(?:customer|shopper|user|visitor|client)"
    r"|\b(?:customer|shopper|user|visitor|client)(?:'s|’s|s')\s+(?:own\s+)?language\b"
    r"|\bin\s+(?:whatever|the)\s+language\s+(?:they|the\s+(?:customer|shopper|user))\s+(?:write|use|speak|ask)",
    re.IGNORECASE,
)
_SUGGEST = r"(?:suggest|recommend|offer|propose|mention|show|upsell|cross-sell)"
_ARTICLE = r"(?:(?:the|our|a|an|some|any|every|each|all)\s+)?"
_PHRASE = r"[a-z0-9][\w'-]*(?:\s+[a-z0-9][\w'-]*){0,4}?"
# "suggest the cookset with any stove", "recommend merino socks alongside hiking boots"
_SUGGEST_WITH = re.compile(
    rf"\b{_SUGGEST}\s+{_ARTICLE}(?P<suggest>{_PHRASE})\s+(?:with|alongside|along\s+with|together\s+with|next\s+to|"
    rf"whenever\s+(?:someone|a\s+(?:customer|shopper))\s+(?:asks\s+(?:about|for)|buys|looks\s+at)|"
    rf"for\s+anyone\s+(?:buying|looking\s+at))\s+{_ARTICLE}(?P<trigger>{_PHRASE})\s*(?:[.!;\n]|$)",
    re.IGNORECASE,
)
# "when someone asks about a tent, also recommend the sleeping pad"
_WHEN_SUGGEST = re.compile(
    rf"\b(?:when(?:ever)?|if)\s+[^,]*?\b(?:asks?\s+(?:about|for)|buys?|looks?\s+(?:at|for)|wants?|views?|orders?)\s+"
    rf"{_ARTICLE}(?P<trigger>{_PHRASE})\s*,\s*(?:then\s+)?(?:also\s+|always\s+)?{_SUGGEST}\s+(?:also\s+)?{_ARTICLE}"
    rf"(?P<suggest>{_PHRASE})\s*(?:[.!;\n]|$)",
    re.IGNORECASE,
)
_NEGATION = r"(?:never|don't|don’t|do\s+not|avoid|no|not)"
_OUT_OF_STOCK = any_word(
    rf"{_NEGATION}\b[^.!?\n]*\b(?:{_SUGGEST}|list|sell|push|show)\w*\b[^.!?\n]*"
    r"\b(?:out[- ]of[- ]stock|sold[- ]out|unavailable|not\s+in\s+stock|no\s+stock)"
)
_COMPETITORS = any_word(
    rf"{_NEGATION}\b[^.!?\n]*\b(?:{_SUGGEST}|name|talk\s+about|refer\s+to|compare\s+with)\w*\b[^.!?\n]*"
    r"\b(?:competitors?|competition|other\s+(?:stores|shops|retailers|websites|brands))"
)
_AVOID_PRODUCT = re.compile(
    rf"\b(?:never|don't|don’t|do\s+not)\s+(?:{_SUGGEST}|sell|push)\s+{_ARTICLE}(?P<words>{_PHRASE})\s*(?:[.!;\n]|$)",
    re.IGNORECASE,
)
_QUOTED = r"[\"“'‘](?P<words>[^\"”’\n]{1,80}?)[\"”'’]"
# "every answer", "your replies", "each message" (or nothing): what a greeting or a sign-off is asked for on
_EVERY_ANSWER = r"(?:every|each|all|your)?\s*(?:answers?|repl(?:y|ies)|messages?|responses?)?\s*"
_GREETING = re.compile(
    rf"\b(?:start|begin|open)\s+{_EVERY_ANSWER}(?:with|by\s+saying)\s+{_QUOTED}", re.IGNORECASE,
)
_SIGN_OFF = re.compile(
    rf"\b(?:end|finish|close|sign\s+off)\s+{_EVERY_ANSWER}(?:with|as|by\s+saying)\s+{_QUOTED}", re.IGNORECASE,
)
_BRIEF = any_word(
    r"be\s+(?:brief|concise|short|succinct)",
    r"keep\s+(?:it|them|(?:your\s+)?(?:answers|replies|responses|messages))\s+(?:short|brief|concise)",
    r"(?:short|brief|concise)\s+(?:answers|replies|responses)\s+only",
)
# A line that tells the assistant to do something (the rest of a prompt describes the store).
_IMPERATIVE = re.compile(
    r"^(?:always|never|don't|don’t|do\s+not|avoid|please|be|keep|use|answer|reply|respond|write|say|tell|"
    r"suggest|recommend|mention|offer|start|end|sign|copy|state|ask|for\s|when|if\s|only)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+[\"”'’]?|$)")


def _sentences(text: str) -> list[str]:
    """The prompt's instructions: its lines, each cut into sentences, bullets and numbering removed."""
    found = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        # Not cut at a period inside quotes ('End with "Thanks. Bye!"' is one instruction).
        parts = [line] if re.search(r"[\"“].*[.!?].*[\"”]", line) else [s.strip() for s in _SENTENCE.findall(line)]
        found += [part for part in parts if part]
    return found


def _phrase(words: str) -> str:
    return re.sub(r"\s+", " ", words.strip().lower())


def read(text: str) -> Guidance:
    """The guidance in ``text`` (the owner's prompt), by plain rules: see the module's docstring."""
    language: Language | None = None
    language_source = ""
    suggestions: list[Suggestion] = []
    avoid: list[Avoid] = []
    greeting = sign_off = ""
    brief = False
    notes: list[Note] = []
    for sentence in _sentences(text):
        used = False
        if _SHOPPERS_LANGUAGE.search(sentence):
            used = True  # the default: composed in the shopper's language
        elif match := _LANGUAGE.search(sentence):
            name = match.group("name").lower()
            if name in LANGUAGE_NAMES:
                language, language_source, used = LANGUAGE_NAMES[name], sentence, True
            elif name in _OTHER_LANGUAGES:
                notes.append(Note(text=sentence, reason=f"{name.title()}: the assistant's sentences exist in English, "
                                                        "Spanish, French and German"))
                continue
        if match := (_SUGGEST_WITH.search(sentence) or _WHEN_SUGGEST.search(sentence)):
            suggestions.append(Suggestion(trigger=_phrase(match.group("trigger")),
                                          suggest=_phrase(match.group("suggest")), source=sentence))
            used = True
        if _OUT_OF_STOCK.search(sentence):
            avoid.append(Avoid(kind="out_of_stock", source=sentence))
            used = True
        elif _COMPETITORS.search(sentence):
            avoid.append(Avoid(kind="competitors", source=sentence))
            used = True
        elif (match := _AVOID_PRODUCT.search(sentence)) and not used:
            words = _phrase(match.group("words"))
            if not re.search(r"\b(?:products?|items?|anything|things?)\b", words):  # a kind of thing, not a name
                avoid.append(Avoid(kind="product", words=words, source=sentence))
                used = True
        if match := _GREETING.search(sentence):
            greeting, used = match.group("words").strip(), True
        if match := _SIGN_OFF.search(sentence):
            sign_off, used = match.group("words").strip(), True
        if _BRIEF.search(sentence):
            brief, used = True, True
        if not used and _IMPERATIVE.match(sentence):
            notes.append(Note(text=sentence, reason=LEFT_TO_MODEL))
    return Guidance(
        language=language, language_source=language_source, suggestions=suggestions, avoid=avoid,
        tone=Tone(greeting=greeting, sign_off=sign_off, brief=brief), not_applied=notes,
    )  # fmt: skip


@functools.lru_cache(maxsize=256)
def for_text(text: str) -> Guidance:
    """``read(text)``, once per text in this process (a version's text is fixed once published; a draft's saves
    are new texts). Guidance is immutable (frozen models), so sharing it across threads is safe."""
    return read(text)


def for_version(version) -> Guidance:  # noqa: ANN001 - a PromptVersion (imported lazily by callers)
    """The guidance of a prompt version's text as shoppers' chats would get it (``full_text``)."""
    return for_text(version.full_text())
