"""Hybrid product search: embedding similarity plus BM25 keyword matching, in one ranked list.

Each process keeps an in-memory index per store (a numpy matrix of the stored product vectors, unit length as
the model wrote them, BM25 postings and the variants' prices and stock). Before every search the catalog's stamp
(``freshness``: one query, read once per question) tells whether products or variants changed since the index
was built (in this process or any other: an import in a Celery worker, an edit in the admin); if so, or if the
index is older than ``INDEX_MAX_AGE``, it is rebuilt. Query vectors come from the model loaded once per process.

Score = SEMANTIC_WEIGHT * cosine + KEYWORD_WEIGHT * keyword, where keyword is the BM25 score divided by the
best score any document could get for the query's known terms, so both parts are on an absolute 0..1 scale
and a fixed threshold (``MATCH_THRESHOLD``) can tell "nothing in the catalog matches" from a weak match.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
from django.db.models import Prefetch

from . import embeddings, freshness
from .models import Product, ProductImage, Store, Variant
from .text import stem

logger = logging.getLogger(__name__)

SEMANTIC_WEIGHT = 0.6
KEYWORD_WEIGHT = 0.4
# Below this combined score a hit is not a match (calibrated on the Shopify samples and the demo catalog).
MATCH_THRESHOLD = 0.25
# A hit also needs this much meaning in common with the query: a word met deep in a description ("laptop
# sleeve" in a daypack's text) scores on keywords alone, yet the product is not what a "laptop" request means.
# Real matches in the evaluation questions score 0.32 or more, near misses 0.17 (see tests/catalog/test_search.py).
MIN_SEMANTIC = 0.25
QUERY_CACHE_SIZE = 512
# Changes made with QuerySet.update() do not move updated_at; rebuilding this often bounds how stale that gets.
INDEX_MAX_AGE = 60.0

_STOPWORDS = frozenset(
    """a about an and any anything are as at be buy can could do does for from get got have i i'm im in is it
    its looking me my need of on or please some something that the there this to under want we what which
    with would you your show find sell selling shop store""".split()
)
_TOKEN_RE = re.compile(r"[a-z0-9]+")


_POSSESSIVE = re.compile(r"['’]s\b")
# A letter size is also found by its word: "large" picks the L variant.
_SIZE_NAMES = {"xs": "extra small", "s": "small", "m": "medium", "l": "large", "xl": "extra large"}


def tokenize(text: str) -> list[str]:
    # "women's" is "women", not "women" and a size S
    return [stem(token) for token in _TOKEN_RE.findall(_POSSESSIVE.sub("", text.lower())) if token not in _STOPWORDS]


def _variant_tokens(option_values: list[str]) -> frozenset[str]:
    words = " ".join(option_values)
    named = [_SIZE_NAMES[value.lower()] for value in option_values if value.lower() in _SIZE_NAMES]
    return frozenset(tokenize(" ".join([words, *named])))


class _BM25:
    def __init__(self, documents: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.size = len(documents)
        self.lengths = np.array([len(doc) for doc in documents], dtype=np.float32)
        self.average = float(self.lengths.mean()) if self.size else 0.0
        postings: dict[str, list[tuple[int, int]]] = {}
        for index, doc in enumerate(documents):
            for term, count in Counter(doc).items():
                postings.setdefault(term, []).append((index, count))
        self.postings = {
            term: (np.array([i for i, _ in items]), np.array([c for _, c in items], dtype=np.float32))
            for term, items in postings.items()
        }
        self.idf = {
            term: math.log(1 + (self.size - len(items) + 0.5) / (len(items) + 0.5)) for term, items in postings.items()
        }

    def scores(self, terms: list[str]) -> np.ndarray:
        """BM25 per document divided by the most any document could score for these terms (0..1)."""
        result = np.zeros(self.size, dtype=np.float32)
        best = 0.0
        for term in dict.fromkeys(terms):
            if term not in self.postings:
                # A word no product has still counts against the match ("coffee beans" is not a "bag"),
                # weighted with BM25's idf for a document frequency of zero.
                best += math.log(1 + (self.size + 0.5) / 0.5) * (self.k1 + 1)
                continue
            docs, counts = self.postings[term]
            idf = self.idf[term]
            norm = self.k1 * (1 - self.b + self.b * self.lengths[docs] / self.average)
            result[docs] += idf * counts * (self.k1 + 1) / (counts + norm)
            best += idf * (self.k1 + 1)
        return result / best if best else result


@dataclass
class _VariantInfo:
    id: int
    price: Decimal
    in_stock: bool
    position: int
    tokens: frozenset[str]


@dataclass
class _Index:
    stamp: tuple
    product_ids: np.ndarray
    matrix: np.ndarray
    has_vector: np.ndarray
    bm25: _BM25
    variants: list[list[_VariantInfo]] = field(default_factory=list)
    # The catalog's words as written (lower case, letters only) -> occurrences: ``catalog.terms`` corrects the
    # shopper's typos towards them, from the rows this index was built from (rebuilt with it).
    vocabulary: dict[str, int] = field(default_factory=dict)
    built_at: float = field(default_factory=time.monotonic)

    def current(self, stamp: tuple) -> bool:
        return self.stamp == stamp and time.monotonic() - self.built_at < INDEX_MAX_AGE


@dataclass
class SearchHit:
    """One ranked product: the variant that best fits the query and filters, and the combined score."""

    product: Product
    variant: Variant | None
    score: float
    semantic: float = 0.0
    keyword: float = 0.0


_indexes: dict[int | None, _Index] = {}
_index_lock = threading.Lock()
_query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
_query_lock = threading.Lock()


def _scope(store: Store | None) -> dict:
    return {"store": store} if store is not None else {}


def _stamp(store: Store | None) -> tuple:
    stamp = freshness.read_stamp(store)
    return stamp.products + stamp.variants


def _document_tokens(product: Product, variants: list[Variant]) -> list[str]:
    # Repeating a field weights it: a word in the title says more than one deep in the description.
    options = " ".join(value for v in variants for value in v.option_values)
    return (
        tokenize(product.title) * 3
        + tokenize(product.product_type) * 2
        + tokenize(product.tags.replace(",", " ")) * 2
        + tokenize(product.vendor)
        + tokenize(options)
        + tokenize(product.description)
    )


_WORD_RE = re.compile(r"[^\W\d_]+")


def _catalog_words(product: Product, variants: list[Variant]) -> list[str]:
    # Weighted as _document_tokens weights the fields: a title word is the likelier meaning of a typo.
    def words(text: str) -> list[str]:
        return _WORD_RE.findall(text.lower())

    options = " ".join(value for v in variants for value in v.option_values)
    return (
        words(product.title) * 3
        + words(product.product_type) * 2
        + words(product.tags) * 2
        + words(product.vendor)
        + words(options)
        + words(product.description)
    )


def _build(store: Store | None, stamp: tuple) -> _Index:
    products = list(
        Product.objects.filter(status=Product.Status.ACTIVE, **_scope(store))
        .only("id", "title", "product_type", "tags", "vendor", "description", "embedding", "option_names")
        .prefetch_related(
            Prefetch(
                "variants",
                queryset=Variant.objects.only(
                    "id", "product_id", "price", "inventory_quantity", "inventory_policy", "position",
                    "option1", "option2", "option3",
                ),
            )
        )
        .order_by("id")
    )
    matrix = np.zeros((len(products), embeddings.DIMENSIONS), dtype=np.float32)
    has_vector = np.zeros(len(products), dtype=bool)
    documents, variant_infos, vocabulary = [], [], Counter()
    for row, product in enumerate(products):
        vector = embeddings.from_bytes(product.embedding)
        if vector is not None:
            matrix[row] = vector
            has_vector[row] = True
        variants = list(product.variants.all())
        documents.append(_document_tokens(product, variants))
        vocabulary.update(_catalog_words(product, variants))
        variant_infos.append(
            [
                _VariantInfo(v.id, v.price, v.in_stock, v.position, _variant_tokens(v.option_values))
                for v in variants
            ]
        )
    if products and not has_vector.all():
        logger.warning(
            "%d of %d products have no embedding yet (keyword matching only for them); run the embedding task",
            int((~has_vector).sum()), len(products),
        )
    return _Index(
        stamp=stamp,
        product_ids=np.array([p.id for p in products], dtype=np.int64),
        matrix=matrix,
        has_vector=has_vector,
        bm25=_BM25(documents),
        variants=variant_infos,
        vocabulary=dict(vocabulary),
    )


def get_index(store: Store | None = None) -> _Index:
    """The current index for ``store`` (None: all stores), rebuilt when the catalog changed."""
    key = store.pk if store is not None else None
    stamp = _stamp(store)
    index = _indexes.get(key)
    if index is not None and index.current(stamp):
        return index
    with _index_lock:
        index = _indexes.get(key)
        if index is None or not index.current(stamp):
            index = _indexes[key] = _build(store, stamp)
    return index


def clear_index() -> None:
    """Forget every in-process index and cached query vector (tests; a store deleted)."""
    with _index_lock:
        _indexes.clear()
    with _query_lock:
        _query_cache.clear()


class _QueryBatcher:
    """Encodes the query texts that arrive together in one model call, and each distinct text only once.

    Twenty shoppers asking at the same moment used to mean twenty one-row encodes, one after another on the
    cores the engine needs; a single 20-row encode costs little more than one. The first caller to find no
    encode running becomes the leader: it waits ``BATCH_WINDOW`` for company, encodes every pending text and
    hands the vectors out. A caller whose text is already pending or being encoded just waits for it.
    """

    BATCH_WINDOW = 0.003  # seconds; short next to one encode (~10-30 ms on a CPU)

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: list[str] = []
        self._waiting: dict[str, list] = {}  # text -> [vector or None, error or None]
        self._busy = False

    def vector(self, key: str) -> np.ndarray:
        with self._cond:
            slot = self._waiting.get(key)
            if slot is None:
                slot = self._waiting[key] = [None, None]
                self._pending.append(key)
            while slot[0] is None and slot[1] is None:
                if not self._busy:
                    self._busy = True
                    break
                self._cond.wait()
            else:
                return self._result(slot)
        self._lead()
        return self._result(slot)

    @staticmethod
    def _result(slot: list) -> np.ndarray:
        if slot[1] is not None:
            raise slot[1]
        return slot[0]

    def _lead(self) -> None:
        time.sleep(self.BATCH_WINDOW)
        while True:
            with self._cond:
                batch, self._pending = self._pending, []
                if not batch:
                    self._busy = False
                    self._cond.notify_all()
                    return
            try:
                vectors, error = embeddings.encode(batch), None
            except Exception as exc:  # every waiter of this batch gets the error, not a hang
                vectors, error = None, exc
            with self._cond:
                for index, key in enumerate(batch):
                    slot = self._waiting.pop(key)
                    if error is not None:
                        slot[1] = error
                    else:
                        vector = vectors[index].copy()
                        vector.setflags(write=False)
                        slot[0] = vector
                self._cond.notify_all()


_batcher = _QueryBatcher()


def query_vector(text: str) -> np.ndarray:
    """The query's embedding, cached (shoppers repeat themselves and chats retry) and batched with the
    queries of other sessions that arrive at the same time."""
    key = " ".join(text.lower().split())
    with _query_lock:
        vector = _query_cache.get(key)
        if vector is not None:
            _query_cache.move_to_end(key)
            return vector
    vector = _batcher.vector(key)
    with _query_lock:
        _query_cache[key] = vector
        while len(_query_cache) > QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector


def _variant_ok(
    info: _VariantInfo, min_price: Decimal | None, max_price: Decimal | None, in_stock: bool | None
) -> bool:
    if min_price is not None and info.price < min_price:
        return False
    if max_price is not None and info.price > max_price:
        return False
    if in_stock is not None and info.in_stock != in_stock:
        return False
    return True


def _to_decimal(value) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def search(
    query: str,
    k: int = 5,
    *,
    store: Store | None = None,
    min_price=None,
    max_price=None,
    in_stock: bool | None = None,
) -> list[SearchHit]:
    """The ``k`` best active products for ``query``, best first.

    ``min_price``/``max_price`` (numbers or Decimals, inclusive) and ``in_stock`` (True: available now,
    False: sold out) filter variants; a product is kept when one of its variants passes, and that variant
    (the one whose option values the query names, else an available one, else the first) is the hit's.
    Scores are comparable between queries; see ``MATCH_THRESHOLD``.
    """
    if k <= 0 or not query.strip():
        return []
    index = get_index(store)
    if not len(index.product_ids):
        return []
    low, high = _to_decimal(min_price), _to_decimal(max_price)
    terms = tokenize(query)
    keyword = index.bm25.scores(terms)
    if index.has_vector.any():
        semantic = index.matrix @ query_vector(query)
        semantic[~index.has_vector] = 0.0
    else:
        semantic = np.zeros(len(index.product_ids), dtype=np.float32)
    scores = SEMANTIC_WEIGHT * semantic + KEYWORD_WEIGHT * keyword

    query_terms = set(terms)
    chosen: list[tuple[int, int | None]] = []
    for row in np.argsort(-scores, kind="stable"):
        options = [v for v in index.variants[row] if _variant_ok(v, low, high, in_stock)]
        filtering = low is not None or high is not None or in_stock is not None
        if not options and (filtering or index.variants[row]):
            continue
        best = (
            max(options, key=lambda v: (len(v.tokens & query_terms), v.in_stock, -v.position)).id if options else None
        )
        chosen.append((int(row), best))
        if len(chosen) == k:
            break

    ids = [int(index.product_ids[row]) for row, _ in chosen]
    # Fresh rows for the cards (prices and stock as the database has them now). Unordered, and the variants by
    # position alone: the models' default orders sort by the product's store and title, joins that cost more than
    # the rows (within one product the order is the same).
    products = (
        Product.objects.select_related("store")
        .order_by()
        .prefetch_related(
            Prefetch("variants", queryset=Variant.objects.order_by("position", "id")),
            Prefetch("images", queryset=ProductImage.objects.order_by("position", "id")),
        )
    )
    by_id = {product.id: product for product in products.filter(id__in=ids)}
    hits = []
    for row, variant_id in chosen:
        product = by_id.get(int(index.product_ids[row]))
        if product is None:  # deleted since the index was built
            continue
        variant = next((v for v in product.variants.all() if v.id == variant_id), None)
        hits.append(
            SearchHit(
                product=product,
                variant=variant,
                score=float(scores[row]),
                semantic=float(semantic[row]),
                keyword=float(keyword[row]),
            )
        )
    return hits


def warm_up(store: Store | None = None) -> None:
    """Load the embedding model and build the index now, so the first shopper does not wait for them."""
    query_vector("warm up")
    get_index(store)
