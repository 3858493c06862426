"""Which sentence of the store's documents answers a shopper's question, across every policy and the FAQ.

Each store's documents are cut into passages (a sentence of a policy; a whole line of an FAQ, question and
answer together) and embedded once per process (rebuilt when a document or the catalog changes: the stamp read
from the database, so a publish on any node is seen by every node's next question). The documents are the only
source of what a shopper is quoted: the store's prompt is never searched, so a policy has one copy, and a
published version is what every shopper is quoted from their next question. A question is scored
against every passage:

    score = cosine(question, passage) + LEXICAL_WEIGHT * shared_words + KIND_BONUS (the question names the
    document's topic: "refund" for returns, "deliver" for shipping)

where ``shared_words`` is the share of the question's content words (stemmed, with a few shopping synonyms:
"money back" is a refund, "parcel" a package) that the passage has. An FAQ line is also scored on its own
question alone, which phrases things the way shoppers do. A passage answers when its score reaches
``ANSWER_THRESHOLD``; a question nothing reaches is not a policy question, whatever words it uses.

The weights and the threshold were set on the evaluation's policy questions and half of a set of questions
written before the documents were read; the other half is the check (tests/catalog/test_passages.py).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import embeddings, freshness
from .models import Product, Store, StoreDocument
from .text import split_sentences, stem

LEXICAL_WEIGHT = 0.3
KIND_BONUS = 0.08
ANSWER_THRESHOLD = 0.5
# Without a word in common a passage answers only on meaning this close: "Do you sell laptops?" is phrased
# like the FAQ's "Do you have a physical store?" (cosine 0.52) and asks something else entirely.
COSINE_ALONE = 0.6
# A second passage is quoted only when it answers nearly as well as the best one.
SECOND_MARGIN = 0.04
# Taken from a passage that names kinds of product (the store's own words) none of which the question names and
# speaks of no product in general: "worn footwear, used stoves ... cannot be returned" does not answer "can I
# return the rain jacket?", which the sentence on unused items does (0.51 against 0.44 by meaning and words).
OTHER_PRODUCTS = 0.1
# Words with which a passage speaks of every product ("unused items", "every product we sell").
_GENERAL = frozenset({"item", "product", "everything"})
# "how much is shipping to Canada?" asks what it costs, though it says no word for it.
_HOW_MUCH = re.compile(r"\bhow much (?:is|are|does|do|will|would|for)\b", re.IGNORECASE)

# Words that make a message a question about a store policy, per document kind.
KIND_PATTERNS = {
    StoreDocument.Kind.RETURNS: (
        r"\b(returns?|returning|refunds?|refunded|exchanges?|exchanging|send (?:it |them )?back|money back)\b"
    ),
    StoreDocument.Kind.SHIPPING: (
        r"\b(ship|ships|shipping|shipped|deliver(?:y|ies|ed)?|postage|courier|dispatch(?:ed)?|arriv(?:e|es|ed|ing)|"
        r"tracking|where is my (?:order|parcel|package))\b"
    ),
    StoreDocument.Kind.WARRANTY: (
        r"\b(warrant(?:y|ies)|guarantee[ds]?|defects?|defective|faulty|broken|breaks?|broke|repairs?|"
        r"(?:is|are) (?:that|this|it|they) covered|covered by)\b"
    ),
    StoreDocument.Kind.FAQ: (
        r"\b(faq|pay|payments?|paypal|gift ?cards?|discounts?|coupons?|promo(?:tion)? codes?|size guide|sizing|"
        r"contact|phone|e-?mail|opening hours|account|cancel(?:l?ed|ling)?|order status|track my order)\b"
    ),
}

_WORD = re.compile(r"[a-z0-9]+")
# Function words and the words every shopper's question has ("can I", "do you"): they say nothing about which
# passage answers.
_STOPWORDS = frozenset(
    """a about after all already am an and any anything are as at be been before being but by can could did do
    does doing for from get gets getting got had has have how i i'm if in into is it its me my myself no not
    of on once or our out please so some something than that the their them then there these they this those
    to too until up us was we what when where which while who whom why will with would you your yours
    possible able much many long sell selling sold buy offer carry stock want need like
    s t d m re ll ve""".split()
)
# Shoppers' words for what policies call otherwise. General shop vocabulary, not any one store's.
_SYNONYMS = {
    "money": "refund", "reimburse": "refund", "reimbursement": "refund", "refunded": "refund",
    "parcel": "package", "order": "order", "delivery": "ship", "deliver": "ship", "delivered": "ship",
    "shipping": "ship", "shipped": "ship", "ships": "ship", "postage": "ship", "dispatch": "ship",
    "arrive": "ship", "arrives": "ship", "arrival": "ship", "leave": "ship",  # "leave our warehouse"
    "wore": "wear", "worn": "wear", "wearing": "wear", "used": "use", "using": "use",
    "boot": "footwear", "shoe": "footwear", "sneaker": "footwear", "trainer": "footwear",
    "contact": "reach", "reaching": "reach", "phone": "reach", "call": "reach",
    "guarantee": "warranty", "broke": "fail", "broken": "fail", "breaks": "fail", "failed": "fail",
    "defect": "fail", "defective": "fail", "faulty": "fail", "damaged": "fail", "damage": "fail",
    "track": "tracking", "cost": "cost", "costs": "cost", "price": "cost", "fee": "cost",
    "cancel": "cancel", "cancelled": "cancel", "canceled": "cancel", "cancellation": "cancel",
    "exchange": "exchange", "swap": "exchange", "returned": "return", "returning": "return", "returns": "return",
    "internationally": "international", "abroad": "international", "overseas": "international",
    "shop": "store", "pay": "payment", "paying": "payment", "paid": "payment",
    "hydration": "water",  # a hydration bladder (or reservoir) is a water bladder
}


def content_words(text: str) -> set[str]:
    """The words of ``text`` that can tell passages apart, stemmed and mapped to a shared synonym."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        word = _SYNONYMS.get(word, word)
        stemmed = stem(word, ing=True)
        words.add(_SYNONYMS.get(stemmed, stemmed))
    return words


def kinds_asked(text: str) -> list[str]:
    """The document kinds a message names, in a stable order."""
    lowered = text.lower()
    return [kind for kind, pattern in KIND_PATTERNS.items() if re.search(pattern, lowered)]


@dataclass(frozen=True)
class Passage:
    """One quotable unit of a store document: a policy sentence, or an FAQ line (its question and answer)."""

    document_id: int
    kind: str
    title: str
    text: str
    position: int  # in its document, for quoting passages in the document's order
    question: str = ""  # an FAQ line's own question ("Do you have a physical store?")
    answer: str = ""  # an FAQ line's answer ("Not yet: we are online only."); a policy sentence: the text

    @cached_property
    def words(self) -> frozenset[str]:
        # Kept with the passage (which lives in its store's index): every question compares against it.
        return frozenset(content_words(self.text))


@dataclass(frozen=True)
class Match:
    passage: Passage
    score: float


_FAQ_QUESTION = re.compile(r"^(.*?\?)\s+(.+)$")


def passages_of(document: StoreDocument) -> list[Passage]:
    """A document cut into passages: an FAQ's lines whole, a policy's sentences one by one."""
    body = document.body.strip()
    if document.kind == StoreDocument.Kind.FAQ:
        pieces = [line.strip() for line in body.splitlines() if line.strip()]
    else:
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        pieces = [part for line in lines for part in split_sentences(line)]
    passages = []
    for position, piece in enumerate(pieces):
        question, answer = "", piece
        split = _FAQ_QUESTION.match(piece) if document.kind == StoreDocument.Kind.FAQ else None
        if split is not None:
            question, answer = split.group(1).strip(), split.group(2).strip()
        passages.append(Passage(document.pk, document.kind, document.title, piece, position, question, answer))
    return passages


@dataclass
class _StoreIndex:
    stamp: tuple
    passages: list[Passage]
    vectors: np.ndarray  # one row per passage
    question_vectors: np.ndarray  # an FAQ line's question alone (zeros for policy sentences)
    # Words that name what the store sells ("tent", "sleeping bag"): they pick products, not passages, so a
    # warranty sentence that lists tents does not answer "any discounts on tents?".
    catalog_words: frozenset[str] = frozenset()
    # Every word the products are described with (titles, types, tags, descriptions): a property asked for that
    # is here but not in the products found is one those products lack (chat/answers/opening.py).
    described_words: frozenset[str] = frozenset()
    # The documents' bodies, in the store's order: what the model's sentences are checked against.
    documents: tuple[str, ...] = ()
    # Words of every document ("order": the returns, shipping and warranty policies and the FAQ all say it): a
    # sentence does not answer a question ("how do I order?") for sharing one.
    common_words: frozenset[str] = frozenset()


# store id -> index
_indexes: OrderedDict[int, _StoreIndex] = OrderedDict()
_lock = threading.Lock()
MAX_INDEXES = 64


def _stamp(store: Store) -> tuple:
    # Not the variants nor the vectors: a stock change must not cost re-embedding every passage.
    stamp = freshness.read_stamp(store)
    return stamp.documents + stamp.products[:2]


def _catalog_words(store: Store) -> tuple[frozenset[str], frozenset[str]]:
    """(the words naming what the store sells, every word its products are described with)."""
    rows = Product.objects.filter(store=store, status=Product.Status.ACTIVE).values_list(
        "title", "product_type", "tags", "description"
    )
    naming = frozenset(word for title, kind, _, _ in rows for word in content_words(f"{title} {kind}"))
    return naming, naming | frozenset(word for row in rows for word in content_words(" ".join(row[2:])))


def _build(store: Store, stamp: tuple) -> _StoreIndex:
    documents = list(StoreDocument.objects.filter(store=store))
    passages = [p for document in documents for p in passages_of(document)]
    vectors = embeddings.encode([p.text for p in passages])
    questions = [p.question for p in passages if p.question]
    question_vectors = np.zeros_like(vectors)
    if questions:
        encoded = iter(embeddings.encode(questions))
        for row, passage in enumerate(passages):
            if passage.question:
                question_vectors[row] = next(encoded)
    naming, described = _catalog_words(store)
    return _StoreIndex(
        stamp, passages, vectors, question_vectors, naming, described, tuple(document.body for document in documents),
        _common_words(passages),
    )


def _common_words(passages: list[Passage]) -> frozenset[str]:
    """The words found in every one of the store's documents, when it has three or more (with fewer, a word of
    each may still be the one that tells them apart)."""
    documents: dict[str, set[int]] = {}
    for passage in passages:
        for word in passage.words:
            documents.setdefault(word, set()).add(passage.document_id)
    count = len({passage.document_id for passage in passages})
    return frozenset(word for word, ids in documents.items() if count >= 3 and len(ids) == count)


def store_index(store: Store) -> _StoreIndex:
    """The passages of the store's documents, rebuilt when a document (or the catalog) changed."""
    stamp, key = _stamp(store), store.pk
    with _lock:
        index = _indexes.get(key)
        if index is not None and index.stamp == stamp:
            _indexes.move_to_end(key)
            return index
    index = _build(store, stamp)
    with _lock:
        _indexes[key] = index
        while len(_indexes) > MAX_INDEXES:
            _indexes.popitem(last=False)
    return index


def clear() -> None:
    with _lock:
        _indexes.clear()


def score_passages(question: str, query: np.ndarray, index: _StoreIndex, keep_all: bool = False) -> list[Match]:
    """The passages of the index with their scores for ``question`` (``query``: the question's embedding), best
    first; without ``keep_all``, not those sharing no word with it and not close enough in meaning alone."""
    if not index.passages:
        return []
    cosine = np.maximum(index.vectors @ query, index.question_vectors @ query)
    asked = content_words(question) | ({"cost"} if _HOW_MUCH.search(question) else set())
    products_asked = asked & index.catalog_words
    # "how do I place an order?" shares "order" with a returns sentence: a word of every document tells none apart
    topical = asked - index.catalog_words - index.common_words
    kinds = set(kinds_asked(question))
    matches = []
    for row, passage in enumerate(index.passages):
        shared = len(topical & passage.words) / len(asked) if asked else 0.0
        if not shared and cosine[row] < COSINE_ALONE and not keep_all:
            continue
        bonus = KIND_BONUS if passage.kind in kinds else 0.0
        if _about_other_products(passage, products_asked, index.catalog_words):
            bonus -= OTHER_PRODUCTS
        matches.append(Match(passage, float(cosine[row]) + LEXICAL_WEIGHT * shared + bonus))
    return sorted(matches, key=lambda match: (-match.score, match.passage.document_id, match.passage.position))


def _about_other_products(passage: Passage, products_asked: set[str], catalog_words: frozenset[str]) -> bool:
    """Whether ``passage`` is about kinds of product other than those asked (and not about every product)."""
    named = passage.words & catalog_words
    return bool(products_asked and named and not named & products_asked and not passage.words & _GENERAL)


# A shopper who names one of these ("what is your refund policy?") gets its best passage even when no passage
# scores as an answer: a policy's sentences are all about its topic. Not the FAQ, whose lines are about anything.
NAMED_POLICIES = (StoreDocument.Kind.RETURNS, StoreDocument.Kind.SHIPPING, StoreDocument.Kind.WARRANTY)


def _best_of_kind(kind: str, scored: list[Match]) -> Match | None:
    return next((match for match in scored if match.passage.kind == kind), None)


def answering(store: Store, question: str, query: np.ndarray | None = None) -> list[Match]:
    """The passages that answer ``question``, best first, or [] when no passage reaches ``ANSWER_THRESHOLD``.

    The best passage, and a second one of its document within ``SECOND_MARGIN`` of it. A policy the question
    names (``NAMED_POLICIES``) gets its best passage even below the threshold when nothing else answers ("what is
    your refund policy?"), and so does each of several named ("can I return it, and how fast do you deliver?").
    """
    if not question.strip():
        return []
    index = store_index(store)
    if not index.passages:
        return []
    if query is None:
        from .search import query_vector

        query = query_vector(question)
    ranked = [match for match in score_passages(question, query, index) if match.score >= ANSWER_THRESHOLD]
    scored = score_passages(question, query, index, keep_all=True)
    named = [kind for kind in kinds_asked(question) if kind in NAMED_POLICIES]
    if ranked and len(kinds_asked(question)) < 2:
        named = []
    chosen: list[Match] = []
    if ranked:
        best = ranked[0]
        chosen.append(best)
        second = next((m for m in ranked[1:] if m.passage.document_id == best.passage.document_id), None)
        if second is not None and best.score - second.score <= SECOND_MARGIN:
            chosen.append(second)
    # A policy the shopper names gets its best passage when nothing else answers ("what is your refund policy?"),
    # and every one of several named does ("can I return it, and how fast do you deliver?").
    for kind in named:
        match = _best_of_kind(kind, scored)
        if match is not None and all(m.passage.document_id != match.passage.document_id for m in chosen):
            chosen.append(match)
    return chosen
