"""The kind of product a shopper names, and whether a search hit is one.

Search scores a hit on every word of the question, so a product the store does not sell can still find one
that shares a modifier: "Do you have the sun hoodie?" found the Wide-Brim Sun Hat on "sun" (the hoodie was a
row the import had rejected), and the shopper read "There's the Wide-Brim Sun Hat" as the answer. The noun a
request names ("hoodie": the last word of the first noun phrase) says what the shopper wants. When no product
is called that (not in a title or a product type, nor a typo of one), a hit stays only if it means that noun:
its meaning is close to the noun's alone ("raincoat" and the rain jacket, "lamp" and the Copper Light), or the
noun takes the question closer to it than its modifiers do ("sleeping mat" and the sleeping pad, but not "sun
hoodie" and the sun hat). What is left is the no-match reply ("Sorry, we don't carry sun hoodies.").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import passages

# A hit means the noun when its product's vector is this close to the noun's alone. Calibrated on the demo
# and sample catalogs: synonyms score 0.45-0.58 (raincoat/rain jacket 0.58, handbag/bag 0.53, shoe/high tops
# 0.52, lamp/light 0.46); other kinds 0.39 or less (hoodie/rain jacket 0.39, hoodie/sun hat 0.31).
MIN_NOUN_SIMILARITY = 0.40
# ...or when the noun moves the phrase this much closer to it than the modifiers alone: "sleeping mat" vs
# "sleeping" for the sleeping pad +0.25, "down jacket" and the down vest +0.30, "bedside lamp" +0.18; "sun
# hoodie" and the sun hat +0.11, "sleeping mat" and a sleeping bag +0.12, "hiking pants" and socks +0.13.
MIN_NOUN_GAIN = 0.15
# ...and only when the modifiers alone relate to the product: the phrase then builds on what drew the hit.
# "bike helmets" and the rain jacket (whose description mentions a helmet) gain +0.25 because "bike" alone is
# far from everything (0.09): it is no helmet. "sleeping" and the sleeping pad 0.22, "down" and the down vest 0.31;
# "bike" and the jacket, the sun hat and the first-aid kit 0.07-0.12.
MIN_MODIFIER_SIMILARITY = 0.20
# The most words a named kind has: a modifier and the noun ("sun hoodie", "2-person tent", "sleeping bag").
MAX_PHRASE_WORDS = 2
# How close a word must be to one of the store's to be taken for a typo of it ("hamock", "tnet").
TYPO_CUTOFF = 0.8

_WORD = re.compile(r"[a-z0-9][a-z0-9'’-]*|[?.!,;:()]")
# Words around the thing asked for: requests, questions, articles, pronouns, politeness.
_AROUND = frozenset(
    """a an the some any this that these those it its them they my our your his her their me us you u we i i'm im
    i'd id i'll
    do does did can could would will should may might is are was were be been am have has had got get getting
    want wanted wanna need needed like love looking look search searching find finding buy buying order
    ordering purchase sell selling carry carrying stock stocking offer offering show tell please pls hi hello
    hey there how much many what which where when who whats what's about also still just really actually
    maybe perhaps sure know wondering wonder if whether one kind sort bring take wear recommend suggest choose
    pick going planning heading""".split()  # "I'm going on a 3 day hike": no "going" is asked for
) | frozenset(
    # Judgements of a thing, not the thing: "what's good for a rainy hike?" names no kind, "the best tent" a tent.
    "good best great nice ideal suitable decent perfect better".split()
)
# Where the noun phrase ends: a preposition, a clause, a verb after the noun.
_BOUNDARY = frozenset(
    """for in with under below over above that which who whom to from on at by without and or but than like
    is are was were do does did can could would will cost costs come comes available left made fit fits
    near around as of if please so because since cheaper bigger smaller""".split()
)
# Verbs after the thing asked about: "will the cookset work with the stove?" names a cookset, not a "work". Only
# after it: "what would keep me warm ..." starts with no thing.
_VERBS_AFTER = frozenset("work works fold folds last lasts keep keeps weigh weighs go goes".split())
# What a question says of the thing after "is the ...": "is the hammock easy to set up?" names a hammock. Only
# words that name no product (not "light": "is the camp light bright?").
_PREDICATES = frozenset(
    """easy hard difficult simple waterproof washable warm cold comfortable comfy heavy durable sturdy
    breathable compatible big small wide narrow tall long short bright quiet noisy safe ok okay worth allowed
    permitted included rated suitable machine dishwasher microwave""".split()  # "machine washable", "dishwasher safe"
)
_COPULAS = frozenset("is are was were".split())
_DOES = frozenset("do does did".split())
_DETERMINERS = frozenset("the your this that these those".split())  # "is the ...", not "is there ..."
# Words that name no product: a question about one of these is not a request for a kind of product.
NOT_A_KIND = frozenset(
    """something anything everything nothing discount discounts deal deals sale sales price prices cost
    size sizes sizing colour colours color colors warranty stock gift gifts present presents type types
    option options ones brand brands thing things review reviews shipping delivery policy return returns
    refund refunds order orders item items product products stuff recommendation recommendations idea ideas
    help question questions information info way difference alternative alternatives replacement spare
    parts part accessory accessories model models version versions small medium large xl xs extra dollars
    dollar bucks euros usd eur gear equipment supplies essentials tip tips advice suggestion suggestions
    budget budgets people person persons""".split()
)
_SPANISH = re.compile(
    r"[¿¡ñáéíóú]|\b(?:tienen|tienes|hay|quiero|busco|necesito|para|una|unos|unas|los|las|el|la|del|con|por|"
    r"cuanto|cuánto|donde|dónde)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Named:
    """The noun phrase a request names: ``noun`` is its last word ("hoodie"), ``modifiers`` the words before
    it ("sun"), "" when none."""

    noun: str
    modifiers: str

    @property
    def phrase(self) -> str:
        return f"{self.modifiers} {self.noun}".strip()


def named_kind(text: str) -> Named | None:
    """The kind of product ``text`` names ("Do you have the sun hoodie?" -> sun hoodie), or None when it names
    none it can tell: a question about prices, gifts or policies, small talk, another language (the
    understanding of Spanish is not this module's).

    A message of several clauses names its request last ("OK, short one then: any socks?", "Thanks! Do you
    sell socks?"): the last clause that names anything decides, not a lead-in such as "OK" or "Thanks"."""
    if _SPANISH.search(text):
        return None
    words = _WORD.findall(text.lower().replace("’", "'"))
    clauses: list[list[str]] = [[]]
    for word in words:
        if word[0].isalnum():
            clauses[-1].append(word)
        elif clauses[-1]:
            clauses.append([])
    named: Named | None = None
    for clause in clauses:
        found = _named_in(clause)
        if found is not _NOTHING:
            named = found
    return named


_NOTHING = Named(noun="", modifiers="")  # a clause that names nothing (small talk, "do you have one")


def _named_in(clause: list[str]) -> Named | None:
    """The noun phrase one clause names; None when it asks about something that is no product (a price, a
    gift), ``_NOTHING`` when it names nothing."""
    phrase: list[str] = []
    previous = ""
    ended = False  # the phrase ran to the clause's end
    gap = False  # a word around the thing came inside the phrase ("does the tent have a footprint")
    for word in clause:
        # "how warm is the down bag?": the word after "how" is a degree asked about, never the kind
        degree, previous = previous == "how", word
        if not phrase:
            if word in _AROUND or word in _BOUNDARY or degree:
                continue
            if word in NOT_A_KIND:
                return None
            phrase.append(word)
            continue
        if word in ("and", "or") and phrase[-1] in _PREDICATES:
            continue  # "a warm and waterproof jacket": both said of the jacket, not a "warm" asked for
        if word in _BOUNDARY or word in _VERBS_AFTER:
            break
        if word not in _AROUND:
            phrase.append(word)
        else:
            gap = True
    else:
        ended = True
    if not phrase or (len(phrase) == 1 and phrase[0] in _PREDICATES and not ended):
        return _NOTHING  # "I'm cold at night ...": how the shopper is, not a kind of product asked for
    if clause[0] in _COPULAS and len(phrase) > 1:
        # "Is the beanie itchy?": a question "is the ..." that ends on its phrase ends on what it says of the thing
        # ("is the sun hoodie?" asks nothing), whatever the word; "is the hammock easy to set up?": a predicate
        # before the rest, or before "enough" ("is the tent big enough")
        if ended and clause[1:2] and clause[1] in _DETERMINERS:  # not "are there any rain jackets?"
            phrase = phrase[:-1]
        while len(phrase) > 1 and phrase[-1] in _PREDICATES:
            phrase = phrase[:-1]
    elif clause[0] in _DOES and clause[1:2] and clause[1] in _DETERMINERS and len(phrase) > 1 and ended and not gap:
        phrase = phrase[:-1]  # "does the beanie itch?": the verb said of the beanie
    words = [word for word in phrase if not word[0].isdigit()]  # "2-person": a modifier, never the noun
    # Longer runs are not one noun phrase but a clause read on ("the Ridgeline tent big enough", "the tent plus
    # two"): their last word is no kind of product, and taking it for one dropped every hit.
    if not words or words[-1] in NOT_A_KIND or len(phrase) > MAX_PHRASE_WORDS:
        return None
    noun = words[-1]
    return Named(noun=noun, modifiers=" ".join(word for word in phrase if word != noun))


def sold_as(named: Named, kinds: frozenset[str]) -> bool:
    """The store calls some product by the noun (``kinds``: the words of its titles, types and tags, as
    ``passages.content_words`` writes them), or the noun is a typo of such a word."""
    words = passages.content_words(named.noun)
    if not words or words <= kinds:
        return True
    return all(difflib.get_close_matches(word, kinds, n=1, cutoff=TYPO_CUTOFF) for word in words)


def is_called(phrase: str, title: str, product_type: str) -> bool:
    """The shopper's ``phrase`` calls the product by words of its title or type, typos allowed ("down vest", "hamock";
    not "tent" for the headlamp whose description has "tent mate")."""
    return sold_as(Named(noun=phrase, modifiers=""), frozenset(passages.content_words(f"{title} {product_type}")))


def is_kind(named: Named | None, title: str, product_type: str) -> bool:
    """The product is what ``named`` names: its noun is a word of the product's title or type ("tent" and the
    Ridgeline 2-Person Tent, "jackets" and the rain jacket; not "hike" and the Daytripper 22L Daypack)."""
    if named is None or not named.noun:
        return False
    return bool(passages.content_words(named.noun) & passages.content_words(f"{title} {product_type}"))


def means(named: Named, vectors: Sequence[np.ndarray | None], encode: Callable[[str], np.ndarray]) -> list[bool]:
    """For each product vector: does the product mean the named noun? (A product without a vector is judged on
    words alone: True.) ``encode``: the query encoder (``catalog.search.query_vector``, cached)."""
    if not any(vector is not None for vector in vectors):
        return [True] * len(vectors)
    noun = encode(named.noun)
    phrase = encode(named.phrase) if named.modifiers else None
    modifiers = encode(named.modifiers) if named.modifiers else None
    verdicts = []
    for vector in vectors:
        if vector is None:
            verdicts.append(True)
            continue
        close = float(vector @ noun) >= MIN_NOUN_SIMILARITY
        gains = (
            phrase is not None
            and float(vector @ modifiers) >= MIN_MODIFIER_SIMILARITY
            and float(vector @ phrase) - float(vector @ modifiers) >= MIN_NOUN_GAIN
        )
        verdicts.append(close or gains)
    return verdicts


def kinds_of(titles_and_types: frozenset[str], tags: Sequence[str]) -> frozenset[str]:
    """The words naming what the store sells: its titles' and types' (``passages``' catalog words) and the
    hits' tags ("beanie", "daypack")."""
    return titles_and_types | frozenset(word for tag in tags for word in passages.content_words(tag))

