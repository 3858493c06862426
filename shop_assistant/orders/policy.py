"""The returns policy's rules, read from the store's own returns document: the window ("within 30 days of
delivery"), what cannot be returned ("Worn footwear, used stoves ... cannot be returned"), sale items ("Sale items
are final sale") and exchanges. Each rule keeps its sentence, which the chat quotes: the policy's words decide,
and the shopper reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from catalog.models import Store, StoreDocument
from catalog.text import split_sentences

_WINDOW = re.compile(r"\bwithin (\d{1,3}) days? of (delivery|receipt|receiving|purchase|the order|ordering)", re.I)
_CANNOT = re.compile(r"^(.*?)\b(?:cannot|can't|can not|are not|aren't) (?:be )?(?:returned|refunded|eligible)", re.I)
_SALE = re.compile(r"\b(?:sale|clearance|discounted|marked[- ]down) items?\b.*\b(?:final|cannot|can't|not)\b", re.I)
_EXCHANGE = re.compile(r"\bexchange", re.I)
# "worn footwear" -> a used state and a kind: the kind is matched against the item, the state against the message
_STATE = re.compile(r"\b(worn|used|opened|washed|damaged|assembled)\b", re.I)


@dataclass(frozen=True)
class Exclusion:
    state: str  # "worn"
    kind: str  # "footwear"
    sentence: str


@dataclass
class ReturnRules:
    window_days: int | None = None
    window_from: str = "delivery"
    window_sentence: str = ""
    exclusions: list[Exclusion] = field(default_factory=list)
    sale_sentence: str = ""
    exchange_sentence: str = ""
    title: str = ""


def return_rules(store: Store) -> ReturnRules:
    """The rules the store's returns document states (none when it has no such document)."""
    document = StoreDocument.objects.filter(store=store, kind=StoreDocument.Kind.RETURNS).order_by("pk").first()
    rules = ReturnRules()
    if document is None:
        return rules
    rules.title = document.title
    for sentence in split_sentences(document.body):
        window = _WINDOW.search(sentence)
        if window and rules.window_days is None:
            rules.window_days, rules.window_sentence = int(window.group(1)), sentence
            rules.window_from = "purchase" if window.group(2).lower() in ("purchase", "the order", "ordering") else "delivery"
        if _SALE.search(sentence):
            rules.sale_sentence = sentence
        elif (cannot := _CANNOT.search(sentence)):
            for phrase in re.split(r",|\band\b|\bor\b", cannot.group(1)):
                state = _STATE.search(phrase)
                kind = _STATE.sub(" ", phrase).strip().lower()
                if state and kind:
                    rules.exclusions.append(Exclusion(state.group(1).lower(), kind, sentence))
        if _EXCHANGE.search(sentence) and not rules.exchange_sentence:
            rules.exchange_sentence = sentence
    return rules
