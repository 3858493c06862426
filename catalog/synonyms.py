"""Store search synonyms: a shopper's words in their language read as the store's own words.

Like Shopify's search synonyms or Algolia's, a synonym is store data (``SearchSynonym``: store, language, term ->
replacement): "es", "chaqueta impermeable" -> "rain jacket". The catalog's search index and its embedding model
read English (the store's words); a Spanish, French or German message is searched with its terms replaced by the
store's words. Applied once per message, after ``language.detect`` and before ``terms.correct`` (typos of the
store's English words), by ``terms.search_words``.

Matching, on both sides (the synonym's term and the message):

- folded: accents and case dropped (``unicodedata``'s NFKD, ``str.casefold``: "Randonnée" is "randonnee", "ß" is
  "ss"), hyphens and punctuation are word breaks;
- each word reduced to a light plural key for its language (``word_key``: "chaquetas"/"chaqueta",
  "lampes"/"lampe", "Stöcke"/"Stock", "Schuhe"/"Schuh"). No maintained stemmer is in the lock (snowballstemmer,
  nltk and PyStemmer are not installed), so these are the plural and case endings of Snowball's first step only;
- the longest term wins ("saco de dormir" before "saco"); multi-word terms match word for word;
- a German compound no term names is split into a head and a modifier that terms (or the catalog) name, both:
  "Daunenschlafsack" is "daunen" + "schlafsack", "Trekkingstöcke" is "trekking" + "stöcke" (a modifier nothing
  names is no reading: "Handschuhe" ends in "schuhe" and is no shoe);
- a long word one edit from a one-word term (two from nine letters on, the same first letter) is that term's
  typo ("Wanderschue"), with rapidfuzz as ``terms`` uses it.

What the search gets: for an English message, the message with its terms replaced. For a message in another
language in which a term matched, only what the catalog can read: the replacements, the words the catalog itself
uses ("merino", "trekking", a product's name) and the figures, in the message's order; the other words are in a
language the index and the embedding model do not read, and each one only lowers the match ("¿Tienen chaquetas
impermeables?" is searched as "rain jacket waterproof"); so is one in which no term matched but a catalog word
stands ("¿Cuánto cuesta la tienda Ridgeline?" is searched as "Ridgeline"). A message with neither is searched as
it is.

Only ``ACCEPTED`` rows are used: proposals of the translation generator wait for the owner (see
``propose``). A store's synonyms are read once per change (the count and the latest edit of its accepted rows,
read with the catalog's stamp, ``freshness``).
"""

from __future__ import annotations

import csv
import io
import json
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import transaction
from rapidfuzz import process
from rapidfuzz.distance import OSA

from . import freshness
from .models import Product, SearchSynonym, Store
from .text import stem

LANGUAGES = tuple(SearchSynonym.Language.values)
MAX_TERM = SearchSynonym._meta.get_field("term").max_length
MAX_REPLACEMENT = SearchSynonym._meta.get_field("replacement").max_length
MAX_CSV_ROWS = 5000
# A word this long or longer may be a typo of a one-word term (shorter words reach too many real words).
MIN_FUZZY_LENGTH = 7
MIN_COMPOUND_LENGTH = 7  # "Zeltboden"; shorter German words are rarely compounds of two known words
MIN_PART = 3  # the shortest modifier or head of a compound ("Eis", "Hut")
# A catalog word kept in a non-English query must be at least this long ("in", "a", "die" are function words).
MIN_KEPT_CATALOG_WORD = 4
# The words around the thing asked for in a request in Spanish or French, folded (``fold``): articles, pronouns,
# prepositions, question words, the verbs of asking ("¿Tienen ...?", "Je cherche ...") and "policy", which a policy
# question names before its kind ("la política de devoluciones": the returns). No maintained stop-word
# list is in the lock; these are the ones before a noun in a shop's requests. In both languages the noun comes
# before its modifiers ("bicicletas de montaña"), so the first other word is the thing asked for. German names it
# last, behind its modifiers and inside compounds (read by ``_compound``), so it is not judged this way.
HEAD_FIRST_FUNCTION_WORDS = {
    "es": frozenset(
        """tienen tiene tienes teneis busco buscamos buscaba necesito necesitamos necesitaria quiero queremos quisiera
        querria venden vende vendeis hay habra cuanto cuanta cuantos cuantas cuesta cuestan vale valen que cual cuales
        donde como se puede pueden puedo podria podrian un una unos unas el la los las lo del de al a para por con en
        y o u me mi mis te tu tus su sus nos es son esta estan hola favor gracias algo alguna alguno algun algunas
        algunos productos producto articulos articulo cosas cosa recomiendan recomienda recomiendas ver comprar
        ofrecen ofreces no si otro otra otros otras mas muy bien buen buena buenas buenos politica politicas
        muestrame muestrenme muestra mostrar ensename ensenenme dame""".split()
    ),
    "fr": frozenset(
        """avez auriez avons vous je j tu nous cherche cherchons cherchais voudrais voudrions veux voulez vendez vend
        il ils elle y a des de du d un une le la les l combien coute coutent quel quelle quels quelles est sont ce
        cet cette ces qui que qu quoi pour en avec et ou mon ma mes ton ta tes votre vos son sa ses bonjour merci svp
        plait s quelque chose produits produit articles article acheter besoin ai faut me recommandez proposez
        avoir autre autres plus tres bon bonne bons bonnes pas ne n politique politiques
        montrez montre montrer moi voir donnez""".split()
    ),
}

_WORD = re.compile(r"[^\W_]+")
_VOWELS = {"es": "aeo", "fr": "e"}
_GERMAN_ENDINGS = ("ern", "en", "er", "es", "em", "e", "s", "n")
_LINKS = ("s", "n", "en", "es", "")  # German linking elements between a compound's parts ("Schlafsack-s-tasche")


def fold(text: str) -> str:
    """Lower case without accents: "Randonnée" -> "randonnee", "Größe" -> "grosse", "Ñ" -> "n"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def word_key(word: str, language: str) -> str:
    """A folded word's plural-free key in ``language`` (see the module's docstring). Both sides of a match go
    through it, so an over-short key only matters if two of one store's terms share it."""
    if word.isdigit():
        return word
    if language == "en":
        return stem(word)
    if language == "de":
        for ending in _GERMAN_ENDINGS:
            if word.endswith(ending) and len(word) - len(ending) >= 3:
                return word[: -len(ending)]
        return word
    if len(word) > 3 and word[-1] in ("sx" if language == "fr" else "s"):
        word = word[:-1]
    if len(word) > 3 and word[-1] in _VOWELS.get(language, "aeo"):
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """The folded words of ``text``: letters and digits, everything else a break."""
    return _WORD.findall(fold(text))


def phrase_key(text: str, language: str) -> tuple[str, ...]:
    return tuple(word_key(word, language) for word in words(text))


@dataclass(frozen=True)
class _Table:
    stamp: tuple
    # first word's key -> (the term's keys, replacement), longest first
    by_first: dict[str, list[tuple[tuple[str, ...], str]]]
    single: dict[str, str]  # one-word terms' keys -> replacement (compounds, typos)
    single_keys: tuple[str, ...] = field(default=())


_tables: dict[tuple[int, str], _Table] = {}
_lock = threading.Lock()


def _table(store: Store, language: str) -> _Table:
    # The catalog's stamp (one query a question, shared with the search: ``freshness.one_read``) covers the
    # store's synonyms: an edit in the studio or an upload is read by the next message, in any process.
    stamp = freshness.read_stamp(store).synonyms
    key = (store.pk, language)
    table = _tables.get(key)
    if table is not None and table.stamp == stamp:
        return table
    rows = SearchSynonym.objects.filter(
        store=store, language=language, status=SearchSynonym.Status.ACCEPTED
    ).values_list("term", "replacement")
    by_first: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    single: dict[str, str] = {}
    for term, replacement in rows:
        keys = phrase_key(term, language)
        if not keys or not replacement.strip():
            continue
        by_first.setdefault(keys[0], []).append((keys, replacement.strip()))
        if len(keys) == 1:
            single.setdefault(keys[0], replacement.strip())
    for options in by_first.values():
        options.sort(key=lambda option: -len(option[0]))
    table = _Table(stamp, by_first, single, tuple(sorted(single)))
    with _lock:
        _tables[key] = table
    return table


def clear() -> None:
    """Forget every cached table (tests)."""
    with _lock:
        _tables.clear()
        _folded_cache.clear()


# id of a catalog vocabulary -> (that vocabulary, its words folded): the search index's vocabulary is rebuilt with
# it, so a new one is a new object; the entry holds it, so its id is not reused while cached.
_folded_cache: dict[int, tuple[object, frozenset[str]]] = {}
MAX_FOLDED_CACHED = 32


def _folded(catalog_words: Iterable[str]) -> frozenset[str]:
    """The catalog's words folded, computed once per search index."""
    cached = _folded_cache.get(id(catalog_words))
    if cached is not None and cached[0] is catalog_words:
        return cached[1]
    folded = frozenset(fold(word) for word in catalog_words)
    with _lock:
        if len(_folded_cache) >= MAX_FOLDED_CACHED:
            _folded_cache.clear()
        _folded_cache[id(catalog_words)] = (catalog_words, folded)
    return folded


@dataclass(frozen=True)
class Applied:
    """What a message's synonyms made of it: ``query`` is what the search reads, ``matched`` the message's
    words (folded) -> the store's words they were read as."""

    query: str
    matched: dict[str, str]
    # the message's words (folded) neither a term nor the catalog reads, in order (not part of what a reading is)
    unread: tuple[str, ...] = field(default=(), compare=False)
    # A word that is no function word stands unread before the first word read, in a language that names the thing
    # first ("¿Venden bicicletas de montaña?": "montaña" read as hiking, "bicicletas" not): what is asked for was
    # not read, so what the read words find is no answer to it.
    head_unread: bool = field(default=False, compare=False)


def _typo_of(word: str, key: str, table: _Table) -> str | None:
    if len(word) < MIN_FUZZY_LENGTH or not table.single_keys:
        return None
    limit = 1 if len(word) < 9 else 2
    found = process.extract(key, table.single_keys, scorer=OSA.distance, score_cutoff=limit, limit=None)
    found = [hit for hit in found if hit[0][0] == key[0]]
    if not found:
        return None
    return table.single[min(found, key=lambda hit: (hit[1], hit[0]))[0]]


def _compound(word: str, language: str, table: _Table, catalog: frozenset[str]) -> list[str] | None:
    """A German compound as [modifier's words, head's words]: the longest head a term names, then a modifier a
    term or the catalog names (with or without a linking "s"/"n"/"en"/"es"); None when no split reads it."""
    if language != "de" or len(word) < MIN_COMPOUND_LENGTH:
        return None
    for cut in range(MIN_PART, len(word) - MIN_PART + 1):
        head = table.single.get(word_key(word[cut:], language))
        if head is None:
            continue
        modifier = word[:cut]
        for link in _LINKS:
            if link and not modifier.endswith(link):
                continue
            part = modifier[: len(modifier) - len(link)] if link else modifier
            if len(part) < MIN_PART:
                continue
            named = table.single.get(word_key(part, language))
            if named is not None:
                return [named, head]
            if part in catalog:
                return [part, head]
        # A modifier nothing names: no reading ("Handschuhe" ends in "schuhe" and is no shoe); a shorter head may do.
    return None


def apply(store: Store | None, text: str, language: str, catalog_words: Iterable[str] = ()) -> Applied:
    """``text`` as the store's search should read it (see the module's docstring). ``catalog_words``: the
    catalog's own words (lower case), kept in a non-English query."""
    if store is None or language not in LANGUAGES:
        return Applied(text, {})
    table = _table(store, language)
    if not table.by_first:
        return Applied(text, {})
    spans = [(match.start(), match.end(), match.group()) for match in _WORD.finditer(text)]
    folded = [fold(word) for _, _, word in spans]
    keys = [word_key(word, language) for word in folded]
    catalog = _folded(catalog_words)
    out: list[tuple[int, int, str | None]] = []  # (start, end, replacement or None: the word as written)
    matched: dict[str, str] = {}
    i = 0
    while i < len(spans):
        found = None
        for option, replacement in table.by_first.get(keys[i], ()):
            if tuple(keys[i : i + len(option)]) == option:
                found = (len(option), replacement)
                break
        if found is None and folded[i] not in catalog and not folded[i].isdigit():
            parts = _compound(folded[i], language, table, catalog)
            if parts is None:
                typo = _typo_of(folded[i], keys[i], table)
                parts = [typo] if typo else None
            if parts:
                found = (1, " ".join(parts))
        if found is None:
            out.append((spans[i][0], spans[i][1], None))
            i += 1
            continue
        length, replacement = found
        matched[" ".join(folded[i : i + length])] = replacement
        out.append((spans[i][0], spans[i + length - 1][1], replacement))
        i += length
    if not matched and language == "en":
        return Applied(text, {})
    if language == "en":  # the index reads English: the rest of the message stays as written
        pieces, last = [], 0
        for start, end, replacement in out:
            if replacement is not None:
                pieces += [text[last:start], replacement]
                last = end
        return Applied("".join(pieces) + text[last:], matched)
    kept, named, unread = [], False, []  # named: a word of the catalog's own stands in the message
    function_words = HEAD_FIRST_FUNCTION_WORDS.get(language)
    head_unread = seen = False  # seen: a word has been read (a term or the catalog's own)
    for start, end, replacement in out:
        word = fold(text[start:end])
        if replacement is not None:
            kept.append(replacement)
            seen = True
        elif word.isdigit() or (len(word) >= MIN_KEPT_CATALOG_WORD and word in catalog):
            kept.append(text[start:end])
            if not word.isdigit():
                named = seen = True
        else:
            unread.append(word)
            head_unread = head_unread or (function_words is not None and not seen and word not in function_words)
    if not matched and not named:
        return Applied(text, {}, tuple(unread))  # nothing the catalog reads: the message as it is
    return Applied(" ".join(kept), matched, tuple(unread), head_unread)


# --- the owner's file -------------------------------------------------------------------------------------------


@dataclass
class Imported:
    added: int = 0
    updated: int = 0
    errors: list[str] = field(default_factory=list)


def read_csv(text: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Rows ``language,term,replacement`` (a header row of those names is skipped, "#" starts a comment line)
    -> the valid rows and a message per refused one (with its line number)."""
    rows, errors = [], []
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    for number, row in enumerate(reader, start=1):
        cells = [cell.strip() for cell in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if [c.lower() for c in cells[:3]] == ["language", "term", "replacement"]:  # the header
            continue
        if len(rows) >= MAX_CSV_ROWS:
            errors.append(f"line {number}: more than {MAX_CSV_ROWS} rows; the rest was not read")
            break
        if len(cells) < 3:
            errors.append(f"line {number}: expected language,term,replacement")
            continue
        language, term, replacement = cells[0].lower(), cells[1], ",".join(cells[2:]).strip(" ,")
        problem = check(language, term, replacement)
        if problem:
            errors.append(f"line {number}: {problem}")
            continue
        rows.append((language, term, replacement))
    return rows, errors


def check(language: str, term: str, replacement: str) -> str:
    """Why a synonym cannot be saved, or "" when it can."""
    if language not in LANGUAGES:
        return f"language {language!r} is not one of {', '.join(LANGUAGES)}"
    if not words(term):
        return "the term has no word"
    if not words(replacement):
        return "the replacement has no word"
    if len(term) > MAX_TERM or len(replacement) > MAX_REPLACEMENT:
        return f"a term is at most {MAX_TERM} characters, a replacement {MAX_REPLACEMENT}"
    return ""


def save(
    store: Store, rows: Iterable[tuple[str, str, str]], source: str = SearchSynonym.Source.FILE,
    status: str = SearchSynonym.Status.ACCEPTED,
) -> Imported:
    """Add or update ``rows`` (language, term, replacement) for ``store``; a term already there (the same
    language and folded words) is updated, so a file can correct the store's synonyms."""
    result = Imported()
    with transaction.atomic():
        existing = {
            (row.language, " ".join(words(row.term))): row
            for row in SearchSynonym.objects.select_for_update().filter(store=store)
        }
        for language, term, replacement in rows:
            row = existing.get((language, " ".join(words(term))))
            if row is None:
                row = SearchSynonym.objects.create(
                    store=store, language=language, term=term.strip(), replacement=replacement.strip(),
                    status=status, source=source,
                )
                existing[(language, " ".join(words(term)))] = row
                result.added += 1
            elif (row.replacement, row.status) != (replacement.strip(), status):
                row.replacement, row.status, row.source = replacement.strip(), status, source
                row.save(update_fields=["replacement", "status", "source", "updated_at"])
                result.updated += 1
    return result


def import_csv(store: Store, text: str, source: str = SearchSynonym.Source.FILE) -> Imported:
    rows, errors = read_csv(text)
    result = save(store, rows, source=source)
    result.errors = errors
    return result


def export_csv(store: Store) -> str:
    from .csvsafe import row as safe_row

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["language", "term", "replacement"])
    for synonym in SearchSynonym.objects.filter(store=store, status=SearchSynonym.Status.ACCEPTED):
        writer.writerow(safe_row([synonym.language, synonym.term, synonym.replacement]))
    return out.getvalue()


# --- proposals: the store's vocabulary, translated by the planning model ------------------------------------------

LANGUAGE_NAMES = {"es": "Spanish", "fr": "French", "de": "German"}
MAX_TRANSLATIONS = 3
PROPOSAL_BATCH = 24
MAX_TERMS_PER_TRANSLATION = 2


def vocabulary(store: Store, english_words: frozenset[str] = frozenset()) -> list[str]:
    """The store's own words a shopper would name a product by: product types, tags, and the title words that
    are dictionary words (``english_words``: not a brand or model name), each once, lower case."""
    found: dict[str, None] = {}
    products = Product.objects.filter(store=store, status=Product.Status.ACTIVE).values_list(
        "product_type", "tags", "title", "vendor"
    )
    for product_type, tags, title, vendor in products:
        brand = set(words(vendor))
        for phrase in [product_type, *tags.split(",")]:
            phrase = " ".join(words(phrase))
            if phrase and not phrase.isdigit():
                found.setdefault(phrase, None)
        for word in words(title):
            if len(word) >= 3 and not word.isdigit() and word not in brand and (
                not english_words or word in english_words
            ):
                found.setdefault(word, None)
    return list(found)


def proposal_schema(terms: list[str]) -> dict:
    """JSON schema of the model's answer for one batch: every term -> 1..3 translations."""
    item = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 40},
            "minItems": 1, "maxItems": MAX_TRANSLATIONS}  # fmt: skip
    return {
        "type": "object",
        "properties": {term: item for term in terms},
        "required": terms,
        "additionalProperties": False,
    }


def proposal_prompt(store: Store, language: str, terms: list[str]) -> str:
    return (
        f"{store.name} is an online store. Translate each English shop word below "
        f"into the {LANGUAGE_NAMES[language]} words a shopper would type to ask for it (up to {MAX_TRANSLATIONS}, "
        f"most common first, lower case, singular). Answer with a JSON object: each English word -> a list of "
        f"{LANGUAGE_NAMES[language]} words.\n" + "\n".join(terms)
    )


def propose(
    store: Store, ask: Callable[[str, dict], str], languages: Iterable[str] = ("es", "fr", "de"),
    english_words: frozenset[str] = frozenset(),
) -> Imported:
    """Ask the planning model (``ask(prompt, schema) -> JSON text``, constrained to ``schema``) for translations
    of the store's vocabulary, and store them as ``PROPOSED`` synonyms (the foreign word -> the store's word):
    the search uses none until the owner accepts it. A term the store has already (accepted, proposed or
    deleted by hand: then it is simply absent, and proposed again) is left as it is."""
    terms = vocabulary(store, english_words)
    result = Imported()
    for language in languages:
        if language not in LANGUAGE_NAMES:
            continue
        existing = {
            " ".join(words(term))
            for term in SearchSynonym.objects.filter(store=store, language=language).values_list("term", flat=True)
        }
        rows = []
        for start in range(0, len(terms), PROPOSAL_BATCH):
            batch = terms[start : start + PROPOSAL_BATCH]
            try:
                answer = json.loads(ask(proposal_prompt(store, language, batch), proposal_schema(batch)))
            except (ValueError, TypeError) as exc:
                result.errors.append(f"{language}: {batch[0]}…: {exc}")
                continue
            answer = {k: v for k, v in answer.items() if k in batch and isinstance(v, list)} if isinstance(
                answer, dict) else {}
            # One word given for many terms is no translation of any ("cargadores de sueño" for "down", "winter"
            # and "poles": the 1.5B, greedy, 2026-12-06): a word may stand for a singular and its plural, no more.
            given = Counter(" ".join(words(str(t))) for values in answer.values() for t in dict.fromkeys(map(str, values)))
            for english, translations in answer.items():
                for translation in translations[:MAX_TRANSLATIONS]:
                    folded = " ".join(words(str(translation)))
                    if not folded or folded == english or folded in existing or check(language, translation, english):
                        continue
                    if given[folded] > MAX_TERMS_PER_TRANSLATION:
                        continue
                    existing.add(folded)
                    rows.append((language, str(translation).strip(), english))
        saved = save(store, rows, source=SearchSynonym.Source.GENERATED, status=SearchSynonym.Status.PROPOSED)
        result.added += saved.added
    return result


def accept(store: Store, ids: Iterable[int] | None = None) -> int:
    """Accept the store's proposals (``ids``, or all of them): the search uses them from the next message."""
    proposals = SearchSynonym.objects.filter(store=store, status=SearchSynonym.Status.PROPOSED)
    if ids is not None:
        proposals = proposals.filter(pk__in=list(ids))
    rows = list(proposals)
    for row in rows:
        row.status = SearchSynonym.Status.ACCEPTED
        row.save(update_fields=["status", "updated_at"])
    return len(rows)
