"""Is a sentence the model wrote supported by what the shopper can see? Checked before it is shown.

The answer's opening is composed from the store's data; the model continues it, and each of its sentences is
shown only if every rule below passes. The first sentence that fails ends the answer (``pipeline``). The rules
prefer dropping a good sentence to showing a bad one:

- form: no markup, links, e-mail addresses, placeholders ("[address]") or speaker labels ("User:");
- language: the answer's (the opening is composed in the shopper's language; an English sentence after a Spanish
  opening reads as a different assistant), as ``catalog.language.detect`` reads it;
- voice: the store's assistant speaking to the shopper, not narrating ("the customer wants ..."), not disowning
  the store ("as a digital platform ..."), not apologising for nothing, not claiming a life of its own;
- figures: every number (digits or words) is one the shopper can see or was given;
- names: every capitalised word is in the store's data, the question or the conversation;
- claims: every content word is in the evidence, except the small talk of helping ("let me know if you need
  anything else"); a sentence about one product may only use that product's words; "we also have ..." and
  "other options" claim products nobody listed;
- policies: a sentence about returns, shipping, warranty or payment must agree in polarity with the store's
  sentence it overlaps most ("you can return worn boots" against "worn footwear ... cannot be returned");
- repeats: a sentence already shown, or nearly, is not shown again.

Measured on sentences of the bundled model labelled by hand (``evaluation/labelled_sentences.json``;
``python manage.py check_sentences`` prints precision and recall).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property

from catalog import language as languages
from catalog.grounding import LETTER_SIZE, ProductFacts, price_limits
from catalog.passages import content_words
from catalog.text import NEGATIONS, any_word, split_sentences

from .decoding import allowed_figures, amounts


@dataclass(frozen=True)
class Evidence:
    """What a model sentence may rest on: the question, the opening composed from data, the cards' products,
    the quotes, the store's documents, its name, and the conversation so far."""

    question: str
    opening: str = ""
    products: Sequence[ProductFacts] = ()
    quotes: Sequence[str] = ()
    documents: Sequence[str] = ()
    store_name: str = ""
    history: Sequence[str] = ()
    language: str = languages.DEFAULT  # the answer's: the shopper's, or the one the owner's prompt names

    @cached_property
    def texts(self) -> tuple[str, ...]:
        return (
            self.question,
            self.opening,
            *(p.text() for p in self.products),
            *(f"{p.price} {p.currency} {p.compare_at_price or ''}" for p in self.products),
            *self.quotes,
            *self.documents,
            self.store_name,
            *self.history,
        )

    @cached_property
    def words(self) -> frozenset[str]:
        words = {word for text in self.texts for word in content_words(text)}
        if price_limits(self.question) != (None, None):
            words |= content_words("budget")  # "under $150": the shopper gave a budget, and it may be named
        return frozenset(words)

    @cached_property
    def lowered(self) -> str:
        return "\n".join(self.texts).lower()

    @cached_property
    def figures(self) -> frozenset[Decimal]:
        return allowed_figures(*self.texts, *(" ".join(_NUMBER_WORDS.findall(t.lower())) for t in self.texts))

    @cached_property
    def policy_sentences(self) -> tuple[str, ...]:
        return tuple(s for text in (*self.quotes, *self.documents) for s in split_sentences(text))


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""  # why not, in a few words: "names 'Amazon'", "a figure nobody gave: 6"
    detail: dict = field(default_factory=dict)


SUPPORTED = Verdict(True)

_FORM = re.compile(
    r"^\W*[\[\*#>|(]|https?://|www\.|\S+@\S+|\[[a-z_ ]+\]|\bchat ?(?:history|log)\b|^\s*[A-Z][\w' ]{0,25}:\s",
    re.IGNORECASE,
)
_NARRATION = re.compile(
    r"\b(?:the|this|that|a|our|their) (?:customer|user|shopper|buyer|client|chatbot|bot|assistant|seller|"
    r"salesperson|agent)s?\b|\b(?:customers?|users?|shoppers?|chatbots?)\b|\b(?:he|she|they) (?:said|asked|replied|"
    r"wants?|wanted)\b|\bthe answer\b|\bquestion:|\banswer:",
    re.IGNORECASE,
)
_DISOWNING = re.compile(
    r"\bdigital (?:platform|assistant|shopping)|\bas an? (?:ai|bot|program|language model|virtual)|"
    r"\blanguage model\b|\breal[- ]world\b|\bphysical (?:store|catalog|goods|products)\b|\bamazon\b|\bebay\b|"
    r"\bi (?:don't|do not|cannot|can't|am not able to|am unable to) (?:have|access|provide|sell|help|see|track|"
    r"process|deliver)\b|\b(?:not able|unable) to (?:provide|sell|help|access|deliver|process)\b|"
    r"\b(?:my|our) (?:website|shelves|shelf|aisle|warehouse staff|local)\b|\blocal (?:store|shop|nursery|retailer)\b|"
    r"\b(?:sorry|apologi[sz]e|confusion|inconvenience|misunderstanding)\b|\bi'?m not sure\b|\bhuman\b|"
    r"\b(?:any|other|another) (?:stores?|shops?|retailers?|websites?|sellers?)\b",
    re.IGNORECASE,
)
# The assistant has no life of its own: no tastes, purchases, friends or phone calls.
_PERSONA = any_word(
    "(?:i|i've|i'd|i'll) (?:love|use|used|own|bought|tried|think|believe|had|have got|will call|will give|"
    "will send|will contact|personally)",
    "as (?:much as )?i do", "my (?:name|favou?rite|friend|job|phone|number|wife|husband)", "for (?:having|helping) me",
    "helping me", "my (?:order|behalf)",
)
# The assistant speaking as the shopper ("Can you tell me more about it?", "How about you?"), or asking for what a
# product question never needs: an order number, a phone number, card details.
_ROLE_REVERSAL = any_word(
    "(?:can|could|would) you (?:tell|show|recommend|help|give|send)", "how about you",
    "(?:do|does) (?:you|your store) (?:have|sell|carry|stock|offer)", "what do you (?:have|sell|think|recommend)",
    "you(?:'re|’re| are)? (?:selling|sell|carry|carrying|stock|stocking)",
)
_ASKS_FOR = any_word(
    "order number", "phone(?: number)?", "(?:home |shipping |e-?mail )?address", "e-?mail", "card (?:number|details)",
    "password", "personal (?:details|information)", "account number", "date of birth",
)
# Remarks about the shopper, and thanks for what the shopper did not do: "Thanks for asking" fits any answer,
# "Thank you for everything!" none.
_REMARKS = re.compile(
    r"\byou(?:'re|’re| are) (?:right|correct|looking good|welcome|amazing|awesome|the best|so kind)\b|\byou look\b|"
    # An echo of the shopper's search after it has been answered: "You're looking for a hammock?", "You're looking
    # again!"
    r"^\W*you(?:'re|’re| are) looking (?:again\b|for\b[^.!?]*[?!]\W*$)|"
    # Pressing the shopper to buy ("Please order it now!", "You should buy it!"): the cards say what is there.
    r"\b(?:order|buy|purchase) (?:it|them|one|yours|this|these)\b|"
    r"\byou(?:'ve|’ve| have)? (?:a |made a )?(?:great|good|nice|excellent|fine) (?:choice|taste|eye)\b|"
    r"^\W*thank(?:s| you)\b(?! (?:so much |very much |again )?for (?:asking|your question|reaching out|shopping|"
    r"visiting|your interest|stopping by|getting in touch)\b)",
    re.IGNORECASE,
)
# The assistant sees no orders and makes no promises it cannot keep in the same answer.
_PROMISES = any_word(
    "your (?:order|purchase|cart|account|package|parcel)", "(?:the|this) order (?:is|has|was|will)",
    "let me (?:tell|show|explain|give|check|get)",
    "i(?:'ll|’ll| will) (?:tell|show|explain|give|send|check|get|make sure|contact|call)",
    "(?:at|in|from) (?:our|the) (?:store|shop)", "in store",
    # Where to buy: here, in this chat and on this site; "at any of our stores" invents places.
    r"(?:purchase|buy|order|find|get|pick (?:it|them) up)\b[^.!?]{0,30}\b(?:at|from|in|through|on|via) "
    "(?:our|the|any|a|your|one of)",
    r"our (?:\w+ )?stores",
)
# Stock and sales are the cards' and the opening's to state, from the rows: the model's word on them is a guess.
_STOCK = any_word("sold", r"stock(?:ed)?", r"availab\w+", "left in", "runs? out", r"restock\w*", r"back ?order\w*")
# A question to the shopper is about what they need; anything else ("How'd it go?", "What was that?") is not the
# assistant's to ask.
_HELPFUL_QUESTION = any_word(
    *"help looking look need want like prefer interested specific size colou?r budget else more which know".split(),
    "questions?",
)
# Talk about the answer instead of answering ("Here is your answer.", "So now we're looking at both options.").
_META = re.compile(
    r"\bhere(?:'s|’s| is) (?:your|the|my) answer\b|\bthe answer (?:is|was)\b|"
    r"^\W*(?:so |and )?now (?:we|i)(?:'re|’re| are| am|'m)?\b|\bwe(?:'re|’re| are) (?:now )?looking at\b",
    re.IGNORECASE,
)
_THANKS_FOR_ASKING = any_word(r"thank(?:s| you)\b[^.!?]*\bfor (?:asking|your question)")
# Claims that products nobody listed exist.
_MORE_PRODUCTS = any_word(
    r"we (?:also |now )?(?:have|had|carry|carried|sell|sold|offer|stock|got|found|added)\b.*\b"
    "(?:also|other|another|more|new)",
    "we also",
    "(?:other|another|new|more) (?:options?|products?|items?|brands?|models?|styles?|versions?|pieces?|lines?|"
    "colou?rs|sizes|deals?|tables|tents|jackets|earrings|necklaces)",
    "discontinued", "sold out", "on sale", "discount", "deal", "offer",
)
# What the store lacks is the no-match reply's to say, from the catalog: a model sentence denying it is a guess
# even when every other word is plain helpfulness ("No suggestions on what we have, but ...").
_DENIES = any_word(
    "no (?:suggestions?|recommendations?|options?|products?|items?|matches|results?)",
    r"(?:nothing|none)\b[^.!?]*\bwe",
    "we (?:don't|do not|can't|cannot|no longer) (?:have|sell|carry|offer|stock|suggest|recommend)",
    "(?:isn't|aren't|not) (?:something|anything|one|a product) (?:we|that we)",
)
_NUMBER_WORDS = any_word(
    *"""one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand
    dozen half single double triple once twice""".split()
)
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z'’-]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_NEGATION = any_word(*NEGATIONS, "nothing", "none")
_POLICY = any_word(
    "returns?", "returned", "refunds?", "exchanges?", r"ship\w*", r"deliver\w*", r"warrant\w*", r"guarantee\w*",
    r"pay\w*", r"cancel\w*", r"track\w*", "fees?", "charges?", "free",
)
_PRONOUN_SUBJECT = re.compile(r"^\W*(?:it|its|it's|they|they're|this|these|that|those)\b", re.IGNORECASE)

# Words of helping and politeness, which claim nothing about the store or its products.
GENERIC_WORDS = frozenset(
    content_words(
        """let know need help helping helpful find finding looking look anything else something specific question
        questions ask asking assist assistance happy glad welcome thank thanks hope enjoy please provide share
        information details detail additional more great good nice perfect wonderful lovely option options choice
        pick choose try trying want wish would like might may could should today right now here there just really
        kind sort type prefer preference preferences recommendation recommendations suggest suggestion mind feel
        free hesitate reach request requests further else sure course absolutely certainly definitely time day
        needs way thing things best better make made give get got keep go going see
        seeing tell telling mean means idea interested interest interesting consider considering check checking
        decide decision soon ready care able everything well goes again issue issues resolve purchase other
        color colour size price range accurate based etc such yes come comes available cost costs
        suitable suit suits ideal because"""
    )
)
# A sentence may start with any of these without them being a name.
_COMMON_CAPITALISED = frozenset(
    """a an the i i'm i'd i'll i've it it's its this these that those they they're there here we we're we've
    you you're you'll you've your if is are was were do does did can could would should will may might please
    thanks thank yes no not also so and but or for with as at in on of to from by just let our my what which who
    how when where why each every all any some many more most both either neither one great perfect sure
    happy glad welcome hope absolutely certainly of course feel would like hi hello hey enjoy good nice""".split()
)


def check(sentence: str, evidence: Evidence, shown: Sequence[str] = ()) -> Verdict:
    """Whether ``sentence`` may be shown after ``shown`` (the opening and the sentences already kept)."""
    for rule in (_form, _language, _voice, _repeats, _figures, _names, _claims, _policy):
        verdict = rule(sentence, evidence, shown)
        if not verdict.ok:
            return verdict
    return SUPPORTED


def _form(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    if len(_WORD.findall(sentence)) < 2:
        return Verdict(False, "not a sentence")
    if sentence.rstrip().endswith(("...", "…")):
        return Verdict(False, "trails off")
    if sentence.rstrip().endswith("?") and not _HELPFUL_QUESTION.search(sentence):
        return Verdict(False, "a question that is not about what the shopper needs")
    if _FORM.search(sentence):
        return Verdict(False, "markup, a link, a placeholder or a speaker label")
    return SUPPORTED


def _language(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    # A sentence too short or too mixed to tell reads as the default language: after an opening in another one it
    # is dropped, which costs a sentence, never a shopper reading two languages in one answer.
    written = languages.detect(sentence)
    if written != evidence.language:
        return Verdict(False, f"not in the answer's language ({written}, not {evidence.language})")
    return SUPPORTED


def _voice(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    rules = (
        (_NARRATION, "narrates"),
        (_DISOWNING, "disowns the store"),
        (_PERSONA, "a persona"),
        (_ROLE_REVERSAL, "speaks as the shopper"),
        (_ASKS_FOR, "asks for personal details"),
        (_REMARKS, "a remark that does not fit"),
        (_PROMISES, "a promise or an order it cannot see"),
        (_STOCK, "a word on stock that only the catalog may give"),
        (_META, "talks about the answer"),
    )
    if "?" not in evidence.question and _THANKS_FOR_ASKING.search(sentence):
        return Verdict(False, "thanks for a question nobody asked")
    for pattern, reason in rules:
        match = pattern.search(sentence)
        if match is not None and match.group().lower() not in evidence.question.lower():
            return Verdict(False, f"{reason}: {match.group()!r}")
    return SUPPORTED


def _figures(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    for number in _DIGITS.findall(sentence):
        if not amounts(number) & evidence.figures:
            return Verdict(False, f"a figure nobody gave: {number}")
    for word in _NUMBER_WORDS.findall(sentence):
        if not re.search(rf"\b{word.lower()}\b", evidence.lowered):
            return Verdict(False, f"a figure nobody gave: {word}")
    return SUPPORTED


def _names(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    for index, match in enumerate(_CAPITALISED.finditer(sentence)):
        word = match.group().strip("'’-")
        lowered = word.lower()
        starts = match.start() == len(sentence) - len(sentence.lstrip(" \"'(*")) or sentence[: match.start()].rstrip().endswith(
            (".", "!", "?", ":")
        )
        if lowered in _COMMON_CAPITALISED or (starts and (lowered in GENERIC_WORDS or not content_words(lowered))):
            continue
        if lowered not in evidence.lowered:
            return Verdict(False, f"names {word!r}")
    return SUPPORTED


def _claims(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    match = _MORE_PRODUCTS.search(sentence)
    asks = sentence.rstrip().endswith("?")  # "Would you like other options?" offers; it claims nothing
    if match is not None and not asks and match.group().lower() not in evidence.question.lower():
        return Verdict(False, f"claims products or deals nobody listed: {match.group()!r}")
    # A size written as letters: the opening says which sizes the catalog lists, and the model may only repeat
    # those ("no XL is listed" followed by "Both are in XL" is the contradiction shoppers read).
    sizes = LETTER_SIZE.findall(sentence)
    if sizes:
        listed = {value for product in evidence.products for value in re.findall(r"[\w/]+", product.options)}
        unlisted = [size for size in sizes if size not in listed]
        if unlisted:
            return Verdict(False, f"a size no product on screen lists: {unlisted[0]}")
    denial = _DENIES.search(sentence)
    if denial is not None and denial.group().lower() not in evidence.question.lower():
        return Verdict(False, f"says the store lacks something: {denial.group()!r}")
    words = content_words(sentence) - GENERIC_WORDS
    unknown = sorted(words - evidence.words)
    if unknown:
        return Verdict(False, f"not in the store's data: {', '.join(unknown[:4])}")
    # The data says what a product is, never what it is not: "it is not waterproof" cannot be checked. (Policies
    # do say what is not allowed; ``_policy`` compares those.)
    if words and _NEGATION.search(sentence) and not _POLICY.search(sentence):
        return Verdict(False, "a negative claim the data cannot confirm")
    # About one product: only that product's own words (and the shopper's) may describe it.
    subject = _subject(sentence, evidence)
    if subject is not None:
        price = f"{subject.price} {subject.currency} {subject.compare_at_price or ''}"
        own = content_words(f"{subject.text()} {price} {evidence.question}") | GENERIC_WORDS
        foreign = sorted(words - own)
        if foreign:
            return Verdict(False, f"not said of the {subject.title}: {', '.join(foreign[:4])}")
    elif _PRONOUN_SUBJECT.search(sentence) and len(evidence.products) > 1 and words:
        return Verdict(False, "says something of 'it' with several products on screen")
    return SUPPORTED


def _subject(sentence: str, evidence: Evidence) -> ProductFacts | None:
    """The product a sentence is about: the one it names, or with a pronoun the only product on screen."""
    lowered = sentence.lower()
    named = [p for p in evidence.products if p.title.lower() in lowered]
    if len(named) == 1:
        return named[0]
    if not named and len(evidence.products) == 1 and _PRONOUN_SUBJECT.search(sentence):
        return evidence.products[0]
    return None


def _policy(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    if not _POLICY.search(sentence):
        return SUPPORTED
    words = content_words(sentence) - GENERIC_WORDS
    if not words:
        return SUPPORTED
    closest = max(evidence.policy_sentences, key=lambda s: len(words & content_words(s)), default="")
    if not closest or not words & content_words(closest):
        return Verdict(False, "a policy claim no store document makes")
    if bool(_NEGATION.search(sentence)) != bool(_NEGATION.search(closest)):
        return Verdict(False, f"contradicts the store's policy: {closest!r}")
    return SUPPORTED


def _repeats(sentence: str, evidence: Evidence, shown: Sequence[str]) -> Verdict:
    words = content_words(sentence)
    for earlier in shown:
        for part in split_sentences(earlier):
            other = content_words(part)
            if words and other and len(words & other) / len(words | other) >= 0.8:
                return Verdict(False, "repeats what was already said")
    return SUPPORTED
