"""The conversation set's expectations, and the wrong facts on screen, judged on one answer as the shopper saw it.

Every rule is a plain function of the answer (``TurnRecord``: its text, cards, quotes, whether a handoff was
recorded) and the store's catalog (``CatalogView``), so it is the same for every planner and every model.

Invariants:
- each expectation key of the set has exactly one rule (``RULES``); a key without one is an error, never skipped;
- a rule answers True or False, or None when it cannot be measured honestly here; None counts neither for nor
  against a turn;
- a wrong fact is only reported when the catalog contradicts it: a product the text names under a nickname is not
  recognised, which can hide a wrong fact but never invent one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from catalog.grounding import quoted_parts
from catalog.text import any_word, split_sentences

from .answers import handles_no_match
from .catalog_view import CatalogView, ProductRow, VariantRow


@dataclass
class TurnRecord:
    """One turn: what the shopper said, what was on screen after it, and how the answer was judged."""

    shopper: str
    expect: dict[str, Any]
    text: str = ""  # the answer as kept on screen (the `end` frame's text, or the tokens)
    reply: str = ""  # "no_match" / "handoff" / "compare" / ... for a fixed reply, "" for a model answer
    finish_reason: str = ""
    cards: list[dict[str, Any]] = field(default_factory=list)  # sku, title, price, in_stock
    quotes: list[dict[str, Any]] = field(default_factory=list)  # title, text
    handoff: bool = False  # the conversation waited for a person after this turn
    model_sentences: int = 0
    sentences: int = 0  # all the answer's sentences, the model's and the composed ones
    first_text_ms: float | None = None
    seconds: float = 0.0
    error: str = ""
    checks: dict[str, bool | None] = field(default_factory=dict)
    wrong_facts: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        """Every expectation that could be measured holds, and the answer came."""
        return not self.error and all(value is not False for value in self.checks.values())


# --- reading the text -----------------------------------------------------------------------------------------

# A figure as money: with a currency sign or code, or with two decimals ("887.00", "44,95 €"); never a percentage.
_MONEY = re.compile(
    r"(?P<sign>[$€£]\s?)?(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)"
    r"(?P<unit>\s?(?:%|percent\b|usd\b|eur\b|gbp\b|dollars?\b|euros?\b|bucks\b|€|\$))?",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?")


def number_value(number: str) -> Decimal:
    """ "1,299.00" and "1299" are 1299; "44,95" (a decimal comma, as French, German and Spanish write) is 44.95."""
    if re.fullmatch(r"\d+,\d{1,2}", number):
        return Decimal(number.replace(",", "."))
    return Decimal(number.replace(",", ""))


def money_figures(text: str) -> list[tuple[str, Decimal]]:
    """The money figures of ``text``, as written and as a value."""
    found = []
    for match in _MONEY.finditer(text):
        unit = (match.group("unit") or "").strip().lower()
        if unit in {"%", "percent"}:
            continue
        number = match.group("number")
        two_decimals = bool(re.search(r"[.,]\d{2}$", number)) and not re.fullmatch(r"\d{1,3}(?:,\d{3})+", number)
        if match.group("sign") or unit or two_decimals:
            found.append((match.group().strip(), number_value(number)))
    return found


def numbers_in(texts: Iterable[str]) -> set[Decimal]:
    return {number_value(n) for text in texts for n in _NUMBER.findall(text)}


# Stock claims, in English: a negative phrase wins over "in stock" inside it ("not in stock").
_OUT_OF_STOCK = any_word(
    "out of stock", "sold out", "unavailable", "no longer available", "not (?:currently |yet )?(?:in stock|available)",
    "(?:is|are)n['’]t (?:currently )?(?:in stock|available)",
)
_IN_STOCK = any_word("in stock")
_CLAUSE_BREAK = re.compile(r";|,?\s+\bbut\b|,?\s+\bwhile\b|,?\s+\bwhereas\b", re.IGNORECASE)


@dataclass(frozen=True)
class StockClaim:
    product: ProductRow
    variants: tuple[VariantRow, ...]  # the variants the clause is about (all of them unless it names options)
    in_stock: bool
    clause: str

    @property
    def wrong(self) -> bool:
        """The catalog contradicts it: "in stock" with none of its variants in stock, "out of stock" with all."""
        stocked = [variant.in_stock for variant in self.variants]
        return not any(stocked) if self.in_stock else all(stocked)


def _mentioned_variants(product: ProductRow, clause: str) -> tuple[VariantRow, ...]:
    """The product's variants whose option values the clause names ("navy", "size M"); all when it names none.
    A one- or two-letter value ("M", "L") must be written as such, in capitals; a longer one in any case."""
    wanted: dict[str, set[str]] = {}
    for variant in product.variants:
        for name, value in variant.options.items():
            flags = 0 if len(value) <= 2 else re.IGNORECASE
            if re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", clause, flags):
                wanted.setdefault(name, set()).add(value)
    chosen = tuple(v for v in product.variants if all(v.options.get(n) in values for n, values in wanted.items()))
    return chosen or product.variants


def stock_claims(text: str, catalog: CatalogView, about: list[ProductRow]) -> list[StockClaim]:
    """The "in stock" / "out of stock" claims of ``text``, clause by clause, each about the products the clause
    names or, when it names none, about ``about`` if that is a single product (the one the answer shows)."""
    claims = []
    for sentence in split_sentences(text):
        for clause in _CLAUSE_BREAK.split(sentence):
            if _OUT_OF_STOCK.search(clause):
                in_stock = False
            elif _IN_STOCK.search(clause):
                in_stock = True
            else:
                continue
            products = catalog.named_in(clause) or catalog.named_in(sentence) or (about if len(about) == 1 else [])
            claims += [StockClaim(p, _claimed_variants(p, clause, sentence), in_stock, clause.strip())
                       for p in products]  # fmt: skip
    return claims


_OTHERS = re.compile(r"\b(?:other|others|else)\b", re.IGNORECASE)


def _claimed_variants(product: ProductRow, clause: str, sentence: str) -> tuple[VariantRow, ...]:
    """The variants a clause is about: those it names; "other options are in stock" is about the variants the
    rest of its sentence does not name ("M / Navy is sold out, but other options are in stock")."""
    if not _OTHERS.search(clause):
        return _mentioned_variants(product, clause)
    named = {v.sku for v in _mentioned_variants(product, sentence.replace(clause, " "))}
    return tuple(v for v in product.variants if v.sku not in named) or product.variants


# --- the expectations -------------------------------------------------------------------------------------------


@dataclass
class Context:
    """What a rule may need besides the answer: the catalog, and the products earlier turns of the conversation
    expected ("do you have it in L?" is about the jacket the first turn showed)."""

    catalog: CatalogView
    earlier: list[str] = field(default_factory=list)  # handles, the latest first

    def card_handles(self, record: TurnRecord) -> list[str]:
        return [self.catalog.handle_of(card["sku"]) or "" for card in record.cards]

    def answer_products(self, record: TurnRecord) -> list[ProductRow]:
        """The products the answer names in its text or shows as cards, in that order, once each."""
        handles = [p.handle for p in self.catalog.named_in(record.text)] + self.card_handles(record)
        return [self.catalog.products[h] for h in dict.fromkeys(handles) if h in self.catalog.products]


def _cards_include(record: TurnRecord, value: list[str], ctx: Context) -> bool:
    return set(value) <= set(ctx.card_handles(record))


def _cards_exclude(record: TurnRecord, value: list[str], ctx: Context) -> bool:
    return not set(value) & set(ctx.card_handles(record))


def _cards_include_any(record: TurnRecord, value: list[str], ctx: Context) -> bool:
    return bool(set(value) & set(ctx.card_handles(record)))


def _cards_first(record: TurnRecord, value: str, ctx: Context) -> bool:
    return ctx.card_handles(record)[:1] == [value]


def _cards_max_price(record: TurnRecord, value: str, ctx: Context) -> bool:
    return all(Decimal(str(card["price"])) <= Decimal(value) for card in record.cards)


def _cards_min_count(record: TurnRecord, value: int, ctx: Context) -> bool:
    return len(record.cards) >= int(value)


def _figure_shown(record: TurnRecord, value: str, ctx: Context) -> bool:
    """``total`` and ``difference``: the figure is in the text as money ("887.00", "$887", "887 USD")."""
    return Decimal(value) in {amount for _, amount in money_figures(record.text)}


def _asked_product(record: TurnRecord, ctx: Context) -> str | None:
    expected = record.expect.get("cards_include") or []
    return expected[0] if expected else (ctx.earlier[0] if ctx.earlier else None)


def _in_stock(record: TurnRecord, value: bool, ctx: Context) -> bool:
    """The shopper is told the asked variant's stock (``sku_options`` picks it; without, the product's): a card
    of that variant saying so (the widget shows "In stock" / "Out of stock" on every card), or a claim in the
    text, and no claim in the text that says the opposite about it."""
    handle = _asked_product(record, ctx)
    if handle is None or handle not in ctx.catalog.products:
        return False
    product = ctx.catalog.products[handle]
    asked = {v.sku for v in product.variants if v.matches(record.expect.get("sku_options", {}))}
    card_says = any(card["sku"] in asked and bool(card["in_stock"]) == value for card in record.cards)
    about_it = [c for c in stock_claims(record.text, ctx.catalog, [product])
                if c.product.handle == handle and asked & {v.sku for v in c.variants}]  # fmt: skip
    text_says = any(claim.in_stock == value for claim in about_it)
    return (card_says or text_says) and not any(claim.in_stock != value for claim in about_it)


def _quote_from(record: TurnRecord, value: str, ctx: Context) -> bool:
    """A quote on screen is the store's document of that kind, verbatim in each of its parts."""
    body = " ".join(ctx.catalog.documents.get(value, "").split())
    return bool(body) and any(
        all(" ".join(part.split()) in body for part in quoted_parts(q["text"])) for q in record.quotes if q.get("text")
    )


def _shown(record: TurnRecord) -> str:
    """What the shopper reads: the answer and the quote boxes under it (a policy's sentence is quoted there
    once, not repeated in the answer's text)."""
    return " ".join([record.text, *(q.get("text", "") for q in record.quotes)]).lower()


def _text_includes(record: TurnRecord, value: list[str], ctx: Context) -> bool:
    shown = _shown(record)
    return all(part.lower() in shown for part in value)


def _text_includes_any(record: TurnRecord, value: list[str], ctx: Context) -> bool:
    shown = _shown(record)
    return any(part.lower() in shown for part in value)


_YES = re.compile(r"\b(?:yes|yeah|yep|sure|definitely|absolutely|of course|it (?:does|will|can|has))\b", re.I)
_NO = re.compile(r"\b(?:no|not|never|cannot|only)\b|n['’]t\b", re.I)


def _answer(record: TurnRecord, value: str, ctx: Context) -> bool:
    """A yes/no question answered that way, in English: the text's first yes word ("yes", "it does") or no word
    ("no", "not", "only", "-n't") decides. An answer with neither (the facts alone) does not count as either."""
    yes, no = _YES.search(record.text), _NO.search(record.text)
    said = None if not (yes or no) else ("yes" if yes and (not no or yes.start() < no.start()) else "no")
    return said == value.lower()


# Asking the shopper to prove whose order it is, rather than answering about it.
_ASKS_IDENTITY = re.compile(
    r"\b(?:e-?mail|order (?:number|confirmation)|sign(?:ed)? in|log(?:ged)? in|verify|verification|"
    r"confirm your|your account|name on the order)\b",
    re.IGNORECASE,
)
# What only the order's record could say: where it is, when it comes.
_ORDER_FACT = re.compile(
    r"\b(?:has been|was|is being|were) (?:shipped|dispatched|sent|delivered|processed)|\bshipped on\b|"
    r"\b(?:is|are) (?:on (?:its|the) way|in transit|out for delivery)\b|\btracking number\b|"
    r"\bwill (?:arrive|be delivered)\b|\bexpected (?:delivery|to arrive)\b|\bdelivered on\b",
    re.IGNORECASE,
)


def _asks_identity(record: TurnRecord, value: bool, ctx: Context) -> bool:
    return bool(_ASKS_IDENTITY.search(record.text)) == bool(value)


def _no_order_facts(record: TurnRecord, value: bool, ctx: Context) -> bool:
    return (not _ORDER_FACT.search(record.text)) == bool(value)


def _no_match(record: TurnRecord, value: bool, ctx: Context) -> bool:
    return handles_no_match(record.reply, record.text, record.cards) == bool(value)


def _handoff(record: TurnRecord, value: bool, ctx: Context) -> bool:
    return record.handoff == bool(value)


def language_of(text: str) -> str | None:
    """The language ``text`` is written in (``catalog.language``: py3langid over en/es/fr/de), or None for an
    empty answer. The same detector the chat picks the answer's language with: the evaluation checks that the
    answer came out in the question's language, not the detector."""
    from catalog import language

    return language.detect(text) if text.strip() else None


def _language(record: TurnRecord, value: str, ctx: Context) -> bool | None:
    # Product names stay as the store wrote them in every language ("Beam 400 Rechargeable Headlamp"): judged
    # without them, "Ahí está Beam 400 Rechargeable Headlamp, a 44.95 USD." is the Spanish sentence it is.
    text = record.text
    for card in record.cards:
        if card.get("title"):
            text = text.replace(str(card["title"]), " ")
    detected = language_of(text)
    return None if detected is None else detected == value


Rule = Callable[[TurnRecord, Any, Context], "bool | None"]
RULES: dict[str, Rule] = {
    "cards_include": _cards_include,
    "cards_exclude": _cards_exclude,
    "cards_include_any": _cards_include_any,
    "cards_first": _cards_first,
    "cards_max_price": _cards_max_price,
    "cards_min_count": _cards_min_count,
    "total": _figure_shown,
    "difference": _figure_shown,
    "in_stock": _in_stock,
    "quote_from": _quote_from,
    "text_includes": _text_includes,
    "text_includes_any": _text_includes_any,
    "answer": _answer,
    "asks_identity": _asks_identity,
    "no_order_facts": _no_order_facts,
    "no_match": _no_match,
    "handoff": _handoff,
    "language": _language,
}
PARAMETERS = frozenset({"sku_options"})  # read by another key's rule (``in_stock``), not judged alone


def score(record: TurnRecord, ctx: Context) -> dict[str, bool | None]:
    """Each expectation of the turn, held (True), not (False) or not measured (None)."""
    unknown = set(record.expect) - RULES.keys() - PARAMETERS
    if unknown:
        raise ValueError(f"no rule for the expectation(s) {sorted(unknown)}")
    if record.error:
        return {key: False for key in record.expect if key not in PARAMETERS}
    return {key: RULES[key](record, value, ctx) for key, value in record.expect.items() if key not in PARAMETERS}


# --- wrong facts ----------------------------------------------------------------------------------------------


def wrong_facts(record: TurnRecord, ctx: Context) -> list[str]:
    """The facts on screen the catalog contradicts: a card's price or stock, a price in the text that is none of
    the prices of the products its sentence names, nor a difference of two of them (the cards' products when it
    names none; a figure the store's documents, the quotes or the shopper gave is allowed, and in a total's turn
    the expected figure and a few of one item), a stock claim the variant's stock contradicts."""
    catalog = ctx.catalog
    found = []
    for card in record.cards:
        variant = catalog.variant(card["sku"])
        if variant is None:
            found.append(f"card {card['sku']}: not in the catalog")
            continue
        if Decimal(str(card["price"])) != variant.price:
            found.append(f"card {card['title']}: price {card['price']}, the catalog says {variant.price}")
        if bool(card["in_stock"]) != variant.in_stock:
            found.append(f"card {card['title']}: in_stock {card['in_stock']}, the catalog says {variant.in_stock}")
    expected = {Decimal(record.expect[key]) for key in ("total", "difference") if key in record.expect}
    given = numbers_in([record.shopper, *catalog.documents.values(), *(q.get("text", "") for q in record.quotes)])
    shown = ctx.answer_products(record)
    for sentence in split_sentences(record.text):
        figures = money_figures(sentence)
        if not figures:
            continue
        products = catalog.named_in(sentence) or shown or list(catalog.products.values())
        prices = {price for product in products for price in product.prices}
        allowed = prices | given | expected
        # "costs 230.00 USD more than": a difference of two of the named products' prices is the catalog's too
        allowed |= {abs(a - b) for a in prices for b in prices if a != b}
        if expected:  # "two of the regular down bags": a few of one item on the way to the total
            allowed |= {price * count for product in products for price in product.prices for count in range(2, 5)}
        for written, amount in figures:
            if amount in allowed:
                continue
            if expected:
                wanted = "/".join(map(str, sorted(expected)))
                found.append(f"figure {written} is neither a price nor the expected {wanted}: {sentence!r}")
            else:
                names = ", ".join(p.title for p in products[:3]) + ("…" if len(products) > 3 else "")
                found.append(f"price {written} is none of the prices of {names}: {sentence!r}")
    for claim in stock_claims(record.text, catalog, shown):
        if claim.wrong:
            state = "in stock" if claim.in_stock else "out of stock"
            found.append(f"stock: {claim.product.title} said {state}, the catalog disagrees: {claim.clause!r}")
    return found
