"""The first sentences of an answer, composed from the store's data before the model runs.

A small model writes fluent sentences that are often false ("as a digital platform I cannot sell goods" above
the store's own cards). So every answer that is not a fixed reply opens with sentences built from what the
catalog and the store's documents say: the products that match, the sizes or colours asked about (from the
variants: which are listed, which are sold out), what tells them apart (price, markdown, stock, the description
sentence that has the shopper's words), or the policy sentence that answers, with a
plain "Yes." or "No." in front when the sentence settles the question. The model then continues from this
opening (``pipeline``), and only its sentences that pass ``checker`` are shown.

The lead sentences come from templates the store's owner can edit in the studio (``AnswerSettings.opening_templates``;
the defaults below fill any kind left empty). A question always gets the same wording, and different questions
get different ones: the template is picked by a hash of the question.

Every sentence written here is marked for translation (Django's gettext, ``shop_assistant/locale``): composed under
``translation.override(language)`` (the pipeline does), an answer opens in the shopper's language. The store's own
words stay as the store wrote them: its templates, product titles, descriptions, option values, policy sentences.
A sentence whose verb follows the product's name ("is" or "are", ``_is``) has one message for each, so a translation
can agree too. English is the message itself: its output does not change.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import get_language, gettext_noop, pgettext

from catalog.grounding import LETTER_SIZE, LETTER_SIZES, OptionValues, ProductFacts, is_size
from catalog.passages import Match, content_words
from catalog.text import NEGATIONS, any_word, split_sentences

from ..models import AnswerSettings

# kind -> templates; each names its placeholders (see PLACEHOLDERS). Marked for translation: a kind the store left
# empty opens in the shopper's language (``templates_for``).
DEFAULT_TEMPLATES: dict[str, list[str]] = {
    "product": [
        gettext_noop("We have the {product} for {price}."),
        gettext_noop("You could go for the {product}, at {price}."),
        gettext_noop("There's the {product}, at {price}."),
    ],
    "products": [
        gettext_noop("We have {products}."),
        gettext_noop("Here is what we have: {products}."),
        gettext_noop("These match what you asked for: {products}."),
    ],
    "policy": [
        gettext_noop("Our {document} policy says: {sentence}"),
        gettext_noop("From our {document} policy: {sentence}"),
        gettext_noop("Here is what our {document} policy says: {sentence}"),
    ],
    # The shopper's language is not the document's: the lead is theirs and the sentence is left to the quote box,
    # word for word as the store wrote it (a sentence half in one language and half in another reads as a bug).
    "policy_quoted": [
        gettext_noop("Here is what our policy says about this, quoted below as the store wrote it."),
        gettext_noop("Our policy answers this; you'll find it quoted below, word for word."),
    ],
    "faq": ["{answer}"],
    "greeting": [
        gettext_noop("Hi! I'm the shopping assistant of {store}. Ask me about our products ({types}), shipping or returns."),
        gettext_noop("Hello! I can help you find products at {store} ({types}) and answer questions about shipping and returns."),
    ],
    "thanks": [gettext_noop("You're welcome!"), gettext_noop("Happy to help!")],
    "other": [
        gettext_noop("I can help with {store}'s products ({types}) and with questions about shipping, returns and warranty."),
        gettext_noop("I'm here to help with products from {store} ({types}) and with shipping, returns and warranty questions."),
    ],
}
PLACEHOLDERS: dict[str, set[str]] = {
    "product": {"product", "price"},
    "products": {"products"},
    "policy": {"document", "sentence"},
    "policy_quoted": set(),
    "faq": {"answer"},
    "greeting": {"store", "types"},
    "thanks": set(),
    "other": {"store", "types"},
}
TEMPLATE_LABELS = {
    "product": "One product",
    "products": "Several products",
    "policy": "A policy sentence",
    "policy_quoted": "A policy in another language than the shopper's (the sentence is quoted below)",
    "faq": "An FAQ answer",
    "greeting": "A greeting",
    "thanks": "Thanks",
    "other": "Anything else",
}
# Longest description sentence quoted in an opening: longer ones are skipped, never cut (an opening never ends
# mid-sentence).
MAX_DESCRIPTION_SENTENCE = 200

_GREETING = re.compile(r"^\W*(?:hi|hello|hey|hiya|howdy|good (?:morning|afternoon|evening))\b", re.IGNORECASE)
_THANKS = any_word("thanks", "thank you", "thx", "cheers", "appreciate it")
# "Do you have ...?", "Is there ...?": a question the products' existence answers with a yes.
_HAVE = re.compile(
    r"\b(?:do|does|did|can|could) (?:you|they|u) (?:have|sell|carry|stock|offer|make)\b|\bhave you got\b"
    r"|^\W*(?:is|are) there\b|^\W*any\b",
    re.IGNORECASE,
)
_YES_NO = re.compile(
    r"^\W*(?:do|does|did|can|could|is|are|will|would|may|have|has)\b(?! you (?:tell|show|help|recommend|suggest))",
    re.IGNORECASE,
)
_NEGATION = any_word(*NEGATIONS)
_QUALIFIER = any_word(
    *"""if unless over under above below after before beyond past more less longer only except without provided
    outside instead""".split()
)
_SALE_WORDS = any_word("sale", "discounts?", "deals?", "offers?", "cheaper", "reduced", "markdown", "promotion")
_PRICE_WORDS = frozenset(
    "under below over above less more than cheaper between up most least dollar usd eur euro buck budget".split()
)
_STOCK_WORDS = re.compile(r"\b(?:stock|available|availability|left|sold out)\b", re.IGNORECASE)


# A question about a product's options: "what sizes ...", "does it come in ...", "colours", "available in".
# "how does it fit?" asks a size; "does it fit a laptop?" what goes in it
_OPTION_WORDS = re.compile(
    r"\b(?:sizes?|sizing|fit(?!\s+(?:a|an|in|into|inside|on|onto|under|my|the|your|two|three|\d+)\b)|colou?rs?|comes? in|"
    r"available in|options?)\b",
    re.IGNORECASE,
)
_COLOUR = re.compile(r"colou?r", re.IGNORECASE)
_SIZE_OR_COLOUR = re.compile(r"\b(?:sizes?|colou?rs?)\b", re.IGNORECASE)
# Colours a shopper names ("the beanie in black?"): one the product's colour option does not list is said so.
_COLOUR_WORDS = re.compile(
    r"\b(black|white|red|blue|green|grey|gray|navy|yellow|orange|pink|purple|brown|beige|tan|olive|khaki)\b",
    re.IGNORECASE,
)
# Longest first: "extra large" is XL, not L.
_SIZE_WORDS = {"extra extra large": "XXL", "extra large": "XL", "x-large": "XL", "extra small": "XS", "x-small": "XS",
               "large": "L", "medium": "M", "small": "S"}  # fmt: skip
_SIZE_WORD = re.compile(r"\b(?:" + "|".join(_SIZE_WORDS) + r")\b", re.IGNORECASE)
# "size 12", "size m", "size US 9" (the word after "size" counts only when it is a size: not "size of")
_SIZE_CODE = re.compile(r"\bsize\s+(?:(?:us|eu|uk)\s*)?(\d{1,2}(?:\.5)?|[a-z0-9]{1,4})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Opening:
    text: str
    kind: str  # the template kind used: product, products, policy, faq, greeting, thanks, other


def templates_for(store: Any) -> dict[str, list[str]]:
    """The store's templates, with the defaults for every kind it left empty. The defaults come in the active
    language (as many wordings as in English, so a question picks the same one); the store's own are its words."""
    own = AnswerSettings.of(store).opening_templates or {}
    return {
        kind: [t for t in own.get(kind, []) if t.strip()] or [_(t) for t in defaults]
        for kind, defaults in DEFAULT_TEMPLATES.items()
    }


def template_errors(kind: str, template: str) -> list[str]:
    """What is wrong with an owner's template (empty: it can be used)."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        return [f"{template!r}: {exc}"]
    errors = [f"{template!r}: unknown placeholder {{{name}}}" for name in sorted(names - PLACEHOLDERS[kind])]
    errors += [f"{template!r}: needs {{{name}}}" for name in sorted(PLACEHOLDERS[kind] - names)]
    return errors


def possessive(text: str, name: str) -> str:
    """"Demo Outfitters's" written as English writes it, "Demo Outfitters'"."""
    return text.replace(f"{name}'s", f"{name}'") if name.endswith("s") else text


def _pick(templates: Sequence[str], question: str) -> str:
    digest = hashlib.sha256(" ".join(question.lower().split()).encode()).digest()
    return templates[int.from_bytes(digest[:4], "big") % len(templates)]


def money(amount: Decimal, currency: str) -> str:
    """A catalog price as the store's answers write it: "189.00 USD"."""
    return f"{amount.quantize(Decimal('0.01'))} {currency}"


def listing(items: Sequence[str], conjunction: str = "and") -> str:
    """"a", "a and b", "a, b and c"; ``conjunction`` "and" or "or", in the active language."""
    if len(items) == 1:
        return items[0]
    word = pgettext("list", "or") if conjunction == "or" else pgettext("list", "and")
    return ", ".join(items[:-1]) + f" {word} {items[-1]}"


def _agreeing(title: str, singular: str, plural: str) -> str:
    """The one of two translated sentences whose verb agrees with the product's name: "is" or "are" (``_is``)."""
    return singular if be_for(title) == "is" else plural


def over_the_limit(title: str, price: Decimal, limit: Decimal, currency: str) -> str:
    """"The Trailblazer Waterproof Hiking Boots are 159.00 USD, over your limit of 150.00 USD.": the best match
    of the shopper's words that their price limit left out, said rather than silently dropped."""
    sentence = _agreeing(title, _("The {title} is {price}, over your limit of {limit}."),
                         _("The {title} are {price}, over your limit of {limit}."))
    return sentence.format(title=title, price=money(price, currency), limit=money(limit, currency))


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lowered(sentence: str) -> str:
    """A sentence put after a lead-in: its first word lower-cased unless it is a name or an acronym."""
    first = sentence.split(" ", 1)[0]
    if first[:1].isupper() and first[1:2].islower() and first.lower() in _COMMON_FIRST_WORDS:
        return sentence[:1].lower() + sentence[1:]
    return sentence


_COMMON_FIRST_WORDS = frozenset(
    """a an the you your we our orders order standard express every each if all any items item refunds refund
    returns return exchanges exchange worn used unused unopened opened damaged defective faulty gas shipping
    delivery deliveries it they this these those there please start products product tents most some no yes
    free international domestic customers purchases payment payments prices sale sales online human agents
    support gift gifts after before within when only""".split()
)


def be_for(title: str) -> str:
    """The verb for a product's name: "The Trekking Poles are", "The Tent is" (a plural's last word ends in s)."""
    last = re.sub(r"\s*\(.*\)$", "", title).split()[-1].lower() if title.strip() else ""
    return "are" if last.endswith("s") and not last.endswith(("ss", "us", "is")) else "is"


def _description_sentences(product: ProductFacts) -> list[str]:
    sentences = split_sentences(product.description, starts_upper=True)
    return [s for s in sentences if len(s) <= MAX_DESCRIPTION_SENTENCE and s[-1] in ".!?"]


def _about(product: ProductFacts, sentence: str, first: bool) -> str:
    """A description sentence made to name its product. A description's first sentence usually says what the
    product is ("A freestanding tent ..."): it becomes "The X is a freestanding tent ..."; any other is quoted
    after the name, since its subject may be a part ("A draft collar and a hood ... hold the warmth in")."""
    article, _space, rest = sentence.partition(" ")
    if first and article in ("A", "An") and rest and be_for(product.title) == "is":
        # The description goes on in the store's words: "The X is a freestanding tent ..."
        return _("The {title} is {description}").format(title=product.title, description=f"{article.lower()} {rest}")
    return f"{product.title}: {sentence}"


def _asked_words(question: str, product: ProductFacts) -> set[str]:
    """The shopper's words that are not just the product's name or type ("waterproof", "warm", "two")."""
    return content_words(question) - content_words(f"{product.title} {product.product_type}")


def _detail_for(product: ProductFacts, question: str, describe: bool) -> str | None:
    """The description sentence with the most of the shopper's own words; the first one when ``describe``."""
    sentences = _description_sentences(product)
    if not sentences:
        return None
    asked = _asked_words(question, product)
    scored = sorted(((len(asked & content_words(s)), -i, s) for i, s in enumerate(sentences)), reverse=True)
    if scored[0][0] > 0:
        return _about(product, scored[0][2], first=scored[0][1] == 0)
    return _about(product, sentences[0], first=True) if describe else None


def _stock_sentence(product: ProductFacts) -> str | None:
    if product.in_stock:
        return None
    if product.others_in_stock and product.variant:
        return _agreeing(
            product.title,
            _("The {title} in {variant} is sold out, but other options are in stock."),
            _("The {title} in {variant} are sold out, but other options are in stock."),
        ).format(title=product.title, variant=product.variant)
    return _agreeing(
        product.title, _("The {title} is out of stock right now."), _("The {title} are out of stock right now.")
    ).format(title=product.title)


def _letter_sized(sizes: tuple[tuple[str, bool], ...]) -> bool:
    """Sizes written as letters ("S", "M", "L/XL"): then "large" means L."""
    return all(part in LETTER_SIZES for value, _ in sizes for part in value.upper().split("/"))


def _sizes_asked(question: str, letters: bool) -> list[str]:
    """The sizes a question names, as codes ("XL", "12"); size words only where the product's sizes are letters."""
    asked = [m.group(1).upper() for m in _SIZE_CODE.finditer(question)]
    asked = [code for code in asked if code.replace(".", "").isdigit() or code in LETTER_SIZES]
    asked += LETTER_SIZE.findall(question)
    if letters:
        asked += [_SIZE_WORDS[m.group(0).lower()] for m in _SIZE_WORD.finditer(question)]
    return list(dict.fromkeys(asked))


def _is_size_value(code: str, value: str) -> bool:
    """Size ``code`` is the catalog's ``value``: "L" is "L" and is in "L/XL"; "9" is "US 9"."""
    upper = value.upper()
    return code == upper or code in upper.split("/") or code == upper.split()[-1]


def _names(question: str, value: str) -> bool:
    """The question names an option value, as a whole word ("charcoal"); a one- or two-letter value ("M", "XL")
    only as written, in capitals."""
    if len(value) <= 2:
        return re.search(rf"(?<![\w'’]){re.escape(value)}(?![\w'’])", question) is not None
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", question, re.IGNORECASE) is not None


def _named(product: ProductFacts, question: str) -> tuple[list[tuple[int, str]], str | None]:
    """The option values the question names ((option index, value)), and a size it names that the product does
    not list."""
    named, missing = [], None
    for index, (name, values) in enumerate(product.option_values):
        asked = _sizes_asked(question, _letter_sized(values)) if is_size(name) else []
        named += [(index, v) for v, _ in values if _names(question, v) or any(_is_size_value(a, v) for a in asked)]
        unlisted = [a for a in asked if not any(_is_size_value(a, v) for v, _ in values)]
        # "in blue": the Glacier Blue bottle; "in black": no black beanie is listed ("forest green" names Forest)
        if _COLOUR.search(name) and not any(i == index for i, _ in named):
            for colour in (word.lower() for word in _COLOUR_WORDS.findall(question)):
                matching = [(index, v) for v, _ in values if colour in v.lower().split()]
                named += matching
                unlisted += [] if matching else [colour]
        if unlisted and missing is None:
            missing = unlisted[0] if not unlisted[0][:1].isdigit() else _size(unlisted[0])
    if missing is None and not any(_COLOUR.search(name) for name, _values in product.option_values):
        # "Does the down vest come in black?" of a vest sold in sizes only: no black is listed either (not when
        # its own text has the colour: "a red night mode")
        own = product.text().lower()
        colours = [word.lower() for word in _COLOUR_WORDS.findall(question) if not re.search(rf"\b{word.lower()}\b", own)]
        missing = colours[0] if colours else None
    return named, missing


def sold_out(value: str) -> str:
    """"M (sold out)": an option value, a size, that no variant in stock has."""
    return _("{value} (sold out)").format(value=value)


def _option_phrase(name: str, values: tuple[tuple[str, bool], ...]) -> str:
    listed = listing([value if available else sold_out(value) for value, available in values])
    if is_size(name):
        return (_("sizes {sizes}") if len(values) > 1 else _("size {sizes}")).format(sizes=listed)
    if _COLOUR.search(name) or name.startswith("Option "):
        return listed
    # "Regular and Long length (Long sold out)": not "Long (sold out) length"
    gone = [value for value, available in values if not available]
    plain = f"{listing([value for value, _available in values])} {name.lower()}"
    return plain + (" " + _("({values} sold out)").format(values=listing(gone)) if gone else "")


def _comes_in(product: ProductFacts, missing: str | None) -> str:
    phrases = pgettext("options", ", in ").join(_option_phrase(name, values) for name, values in product.option_values)
    if missing:
        sentence = _agreeing(
            product.title,
            _("The {title} comes in {options}; no {missing} is listed."),
            _("The {title} come in {options}; no {missing} is listed."),
        )
    else:
        sentence = _agreeing(product.title, _("The {title} comes in {options}."), _("The {title} come in {options}."))
    return sentence.format(title=product.title, options=phrases, missing=missing)


def _size(code: str) -> str:
    """"size 12", "size M"."""
    return _("size {size}").format(size=code)


def _value_phrase(values: OptionValues, index: int, value: str) -> str:
    name = values[index][0]
    if is_size(name):
        return _size(value)
    return value if _COLOUR.search(name) or name.startswith("Option ") else f"{value} {name.lower()}"


def _availability(product: ProductFacts, named: list[tuple[int, str]]) -> list[tuple[str, str]]:
    """(what was named, "in stock" / "sold out" / "not listed"): one value at a time, or the one combination
    named ("size L in Charcoal") when the catalog's variants say which combinations exist."""
    indexes = [index for index, _ in named]
    if len(set(indexes)) == len(indexes) > 1 and product.variant_options:
        wanted = {value for _, value in named}
        phrase = pgettext("options", " in ").join(_value_phrase(product.option_values, i, v) for i, v in named)
        found = [in_stock for values, in_stock in product.variant_options if wanted <= set(values)]
        return [(phrase, "in stock" if any(found) else "sold out" if found else "not listed")]
    available = {(i, v): ok for i, (_, values) in enumerate(product.option_values) for v, ok in values}
    return [(_value_phrase(product.option_values, i, v), "in stock" if available[i, v] else "sold out")
            for i, v in named]  # fmt: skip


def _stock_of(product: ProductFacts, phrase: str, state: str, alone: bool) -> str:
    if alone:
        said = {
            "in stock": _("{option} is in stock."),
            "sold out": _("{option} is sold out right now."),
            "not listed": _("{option} is not listed."),
        }[state]
        return capitalised(said.format(option=phrase))
    said = {
        "in stock": _("The {title} in {option} is in stock."),
        "sold out": _("The {title} in {option} is sold out right now."),
        "not listed": _("The {title} in {option} is not listed."),
    }[state]
    return said.format(title=product.title, option=phrase)


@dataclass(frozen=True)
class _OptionsAnswer:
    sentences: list[str]
    settled: bool  # everything the shopper named is listed and in stock: a "Yes!" may stand before it
    told_stock: bool  # it said whether something named is in stock


def _options_answer(products: Sequence[ProductFacts], question: str) -> _OptionsAnswer:
    """The answer to a question about the first products' sizes, colours or other options, from the catalog's
    variants."""
    asked = {id(p): _named(p, question) for p in products[:2] if p.option_values}
    asked = {key: (named, missing) for key, (named, missing) in asked.items()
             if named or missing or _OPTION_WORDS.search(question)}  # fmt: skip
    sentences, settled, told_stock = [], True, False
    for product in products[:2]:  # in the products' order
        if _one_version_asked(product, question):  # "the daypack in black?"
            one = _agreeing(product.title, _("The {title} comes in one version only."),
                            _("The {title} come in one version only."))  # fmt: skip
            sentences.append(one.format(title=product.title))
            settled = False
        if id(product) not in asked:
            continue
        named, missing = asked[id(product)]
        sentences.append(_comes_in(product, missing))
        for phrase, state in _availability(product, named):
            sentences.append(_stock_of(product, phrase, state, alone=len(asked) == 1))
            settled, told_stock = settled and state == "in stock", True
        settled = settled and missing is None
    return _OptionsAnswer(sentences, settled, told_stock)


def _one_version_asked(product: ProductFacts, question: str) -> bool:
    """A size or colour asked of a product sold in one version, one variant without options (not a colour its own
    text has: "a red night mode")."""
    if product.option_values or len(product.variant_options) != 1:
        return False
    own = product.text().lower()
    named = [word for word in _COLOUR_WORDS.findall(question) if not re.search(rf"\b{word.lower()}\b", own)]
    return bool(_SIZE_OR_COLOUR.search(question) or named)


def names_an_option(product: ProductFacts, question: str) -> bool:
    """The question names a size or colour of ``product``, listed or not ("socks in size M", "the vest in black")."""
    named, missing = _named(product, question) if product.option_values else ([], None)
    return bool(named) or missing is not None


def options_sentences(product: ProductFacts, question: str) -> list[str]:
    """What the catalog says about the sizes or colours ``question`` asks of ``product`` (empty: it asks none)."""
    return _options_answer([product], question).sentences


def stock_sentence(product: ProductFacts, question: str) -> str | None:
    """Whether ``product`` is in stock, when ``question`` asks."""
    if not _STOCK_WORDS.search(question):
        return None
    if not product.in_stock:
        return _stock_sentence(product)
    # Named: after "is the cheaper one in stock?" a bare "In stock now." does not say which one is.
    return _agreeing(product.title, _("The {title} is in stock now."), _("The {title} are in stock now.")).format(
        title=product.title
    )


def _all_described(products: Sequence[ProductFacts], question: str) -> bool:
    """Every word the shopper asked for ("waterproof", "two") is in some product's own data."""
    described = set().union(*(content_words(p.text()) for p in products))
    asked = {word for word in content_words(question) if not word.isdigit() and word not in _PRICE_WORDS}
    return asked <= described


# Properties shoppers filter on, general shop vocabulary rather than any one store's: a product either is
# described with one or it is not ("camping", "garden" or "enough" say what for, not what it is).
ATTRIBUTES = frozenset(
    """waterproof water-resistant windproof insulated breathable lightweight ultralight packable vegan organic
    leather wool merino cotton linen silk down synthetic fleece gold silver sterling stainless titanium bamboo
    wireless rechargeable cordless foldable folding adjustable washable handmade recycled reversible""".split()
)


def _lacking(products: Sequence[ProductFacts], question: str, catalog_words: frozenset[str]) -> list[str]:
    """The properties the shopper asked for that other products of the store are described with and none of
    these is: "waterproof" when the jackets under 150 USD are a fleece and a vest."""
    described = set().union(*(content_words(p.text()) for p in products))
    lacking = []
    for word in re.findall(r"[a-z][a-z'-]*", question.lower()):
        if word in ATTRIBUTES and content_words(word) <= catalog_words and not content_words(word) & described:
            lacking.append(word)
    return list(dict.fromkeys(lacking))


def _lacking_sentence(products: Sequence[ProductFacts], lacking: list[str]) -> str:
    what = _either(lacking)
    if len(products) == 1:
        sentence = _agreeing(products[0].title, _("It is not described as {what}."), _("They are not described as {what}."))
    else:
        sentence = _("Neither is described as {what}.") if len(products) == 2 else _("None of them is described as {what}.")
    return sentence.format(what=what)


def _either(words: Sequence[str]) -> str:
    """"waterproof or insulated"."""
    return f" {pgettext('list', 'or')} ".join(words)


# "Which tent is best for backpacking?", "a good jacket for hiking?", "what would you recommend for camping?"
_BEST_FOR = re.compile(
    r"\b(?:best|better|good|right|ideal|suited|suitable|recommend\w*|should i (?:get|buy|pick|take))\b"
    r".*?\bfor ((?:an? |the |my |our )?[\w' -]+?)\s*[?.!]*$",
    re.IGNORECASE,
)


def _picked_for(products: Sequence[ProductFacts], question: str) -> tuple[str, ProductFacts] | None:
    """The purpose the shopper names ("backpacking") and the one product shown that the store labels with it
    and can sell now. Only the store's own labels count (title, tags, product type): a description may name a
    use to rule it out ("made for campground weekends rather than long hikes"). None when no product, or more
    than one, fits: the listing is then the answer."""
    asked = _BEST_FOR.search(question)
    if not asked or len(products) < 2:
        return None
    # Said back to the shopper: "for my trip" is "for your trip".
    purpose = re.sub(r"^(?:my|our) ", "your ", asked.group(1).strip().lower())
    words = content_words(purpose)
    if not words:
        return None
    fits = [p for p in products if words <= content_words(" ".join((p.title, *p.tags, p.product_type)))]
    if len(fits) != 1 or not fits[0].buyable:
        return None
    return purpose, fits[0]


def _named_and_sold(products: Sequence[ProductFacts], question: str) -> bool:
    """One product, in stock, that the shopper asked about by its name."""
    return len(products) == 1 and products[0].buyable and content_words(products[0].title) <= content_words(question)


def _lead(
    products: Sequence[ProductFacts], question: str, templates: dict[str, list[str]], lacking: list[str]
) -> str:
    """The first sentence: the products with their prices."""
    listed = listing([_("the {title} ({price})").format(title=p.title, price=money(p.price, p.currency)) for p in products])
    if len(products) == 1:
        product = products[0]
        price, verb = money(product.price, product.currency), be_for(product.title)
        if not product.buyable:
            # Not "You could go for the chair" before "the chair is out of stock": the lead says it.
            return _agreeing(
                product.title,
                _("The {title} costs {price} but is out of stock right now."),
                _("The {title} cost {price} but are out of stock right now."),
            ).format(title=product.title, price=price)
        if lacking:  # not "We have the ..." before "it is not described as waterproof"
            return _("The closest we have is the {title}, at {price}.").format(title=product.title, price=price)
        lead = _pick(templates["product"], question).format(product=product.title, price=price)
        # "There are the Trailblazer Hiking Boots", not "There's"
        return re.sub(r"^There(?:'s| is)\b", "There are", lead) if verb == "are" else lead
    if lacking:  # not "These match what you asked for" before "neither is described as waterproof"
        return _("The closest we have: {products}.").format(products=listed)
    return _pick(templates["products"], question).format(products=listed)


def _settled_about(products: Sequence[ProductFacts], question: str, details: Sequence[str | None]) -> str | None:
    """"Yes."/"No." when the shopper's yes/no question found one product and its description's sentence for
    the question settles it (``settles``: every word asked is in the sentence as quoted, the product's name
    included, so "will a 5 litre bladder fit?" gets no "Yes." from "Fits a 3-litre hydration bladder.")."""
    if len(products) != 1 or _HAVE.search(question):
        return None  # "do you have ...?" is answered by the lead ("Yes! There's ...")
    if settles(question, products[0].title) == "Yes.":
        return "Yes."  # the name says it: "Is the headlamp rechargeable?" of the Beam 400 Rechargeable Headlamp
    if not details or not details[0]:
        return None
    return settles(question, details[0])


def _in_english() -> bool:
    return (get_language() or "en").split("-")[0] == "en"


def products_opening(
    products: Sequence[ProductFacts],
    question: str,
    templates: dict[str, list[str]],
    catalog_words: frozenset[str] = frozenset(),
) -> Opening:
    """The lead naming the products with their prices, then what tells them apart, each a sentence."""
    asks_sale, asks_stock = bool(_SALE_WORDS.search(question)), bool(_STOCK_WORDS.search(question))
    lacking = _lacking(products, question, catalog_words)
    lead = _lead(products, question, templates, lacking)
    if lacking and _named_and_sold(products, question):
        # "Is the Featherlight Down Vest waterproof?" is answered first, not with "the closest we have".
        product, price = products[0], money(products[0].price, products[0].currency)
        lead = _agreeing(
            product.title,
            _("The {title} ({price}) is not described as {what}."),
            _("The {title} ({price}) are not described as {what}."),
        ).format(title=product.title, price=price, what=_either(lacking))
        lacking = []
    said_out = len(products) == 1 and not products[0].buyable
    # "Yes!" only answers "do you have ...?", and only when every word asked for is in the products' data: the
    # closest jackets under 150 USD are not a yes to "a waterproof jacket under $150".
    options = _options_answer(products, question)
    yes = _HAVE.search(question) and not (asks_sale or asks_stock) and _all_described(products, question)
    if yes and options.settled:
        lead = _("Yes! {sentence}").format(sentence=lead)
    sentences = [lead, *options.sentences]  # the sizes or colours asked about come first: they are the answer
    if lacking:  # what was asked for and these do not have, said at once
        sentences.append(_lacking_sentence(products, lacking))
    picked = _picked_for(products, question)
    if picked:  # "which is best for backpacking?" is answered before anything else about them
        purpose, pick = picked
        sentences.append(_agreeing(
            pick.title, _("For {purpose}, the {title} is the one to pick."), _("For {purpose}, the {title} are the one to pick.")
        ).format(purpose=purpose, title=pick.title))
        sentences += [detail for detail in [_detail_for(pick, question, describe=True)] if detail and _in_english()]
    stock = [None if said_out else _stock_sentence(p) for p in products]
    if asks_stock and not said_out:  # the answer to "is it in stock?" comes first
        filler = _("In stock now.") if len(products) == 1 else _("All of them are in stock now.")
        sentences += [s for s in stock if s] or ([] if options.told_stock else [filler])
    for product in products:
        if product.on_sale and (asks_sale or len(products) == 1):
            sentences.append(sale_sentence(product))
    if asks_sale and not any(p.on_sale for p in products):
        regular = _("These are at their regular prices right now.")
        if len(products) == 1:  # "is the family tent on sale?": one product, named
            regular = _agreeing(
                products[0].title, _("The {title} is at its regular price right now."),
                _("The {title} are at their regular price right now."),
            ).format(title=products[0].title)
        sentences.append(regular)
    prices = {p.price for p in products}
    if len(prices) > 1 and not asks_sale:
        cheapest = min(products, key=lambda p: p.price)
        sentences.append(_("The least expensive is the {title}.").format(title=cheapest.title))
    # The catalog's descriptions are in the store's language: quoted into an answer in another one, they made
    # it half English. The lead, prices, stock and options are the facts; the card carries the rest.
    details = [_detail_for(p, question, describe=len(products) == 1) for p in products] if _in_english() else []
    # Not for what the rows answer (stock, sale, a size or colour named) nor what the product lacks: said above.
    asks_the_rows = asks_sale or asks_stock or options.told_stock or not options.settled or lacking
    verdict = None if asks_the_rows else _settled_about(products, question, details)
    if verdict:  # "Will a 3 litre bladder fit in the Summit backpack?": the sentence that settles it comes first
        sentences.insert(0, f"{verdict} {details.pop(0)}")
    sentences += [detail for detail in details if detail][:2]
    if not asks_stock:
        sentences += [s for s in stock if s]
    return Opening(" ".join(dict.fromkeys(sentences)), "product" if len(products) == 1 else "products")


def sale_sentence(product: ProductFacts) -> str:
    """"The Ridgeline 2-Person Tent is on sale: down from 279.00 USD." (a product marked down: ``on_sale``)."""
    was = money(product.compare_at_price, product.currency)  # type: ignore[arg-type]
    return _agreeing(
        product.title, _("The {title} is on sale: down from {price}."), _("The {title} are on sale: down from {price}.")
    ).format(title=product.title, price=was)


def asks_yes_or_no(question: str) -> bool:
    """"Is it ...?", "Does the ... have ...?": a question a "Yes." or "No." answers."""
    return bool(_YES_NO.search(question))


def settles(question: str, passage_text: str) -> str | None:
    """"Yes." or "No." when ``passage_text`` answers the yes/no ``question`` outright, else None.

    Only when the passage has every content word of the question (so "do you ship to Mexico?" gets no "yes"
    from "we ship within the United States and Canada only"), and its polarity is plain: a "not" makes it a
    no, anything else a yes. Never when either side carries a condition or a bound ("after 30 days", "free on
    orders over 50 USD", "Canada only"): a bare "Yes." would then say more than the sentence does."""
    if not asks_yes_or_no(question) or _QUALIFIER.search(question) or _QUALIFIER.search(passage_text):
        return None
    asked = content_words(question)
    if not asked or not asked <= content_words(passage_text):
        return None
    if not _NEGATION.search(passage_text):
        return "Yes."
    # "No." only when the "not" is said of a word asked about ("does not smell"); "a red night mode that does not
    # wake your tent mate" says nothing against a red light
    return "No." if _negated(passage_text) & asked else None


_NEGATED_SPAN = 3  # words after a "not" that it is said of


def _negated(text: str) -> set[str]:
    """The content words within a few words after each negation in ``text``."""
    words = re.findall(r"[\w'’-]+", text.lower())
    spans = [words[i + 1 : i + 1 + _NEGATED_SPAN] for i, word in enumerate(words) if _NEGATION.fullmatch(word)]
    return set().union(*(content_words(" ".join(span)) for span in spans)) if spans else set()


_WHICH = re.compile(r"^(?:which|what) (.+?) (?:do|does|can) (?:you|we|i) (\w+)\?$", re.IGNORECASE)


def _faq_answer(faq_question: str, answer: str) -> str:
    """An FAQ answer that reads on its own: "Visa, Mastercard and PayPal." after "Which payment methods do you
    accept?" becomes "The payment methods we accept: Visa, Mastercard and PayPal." """
    which = _WHICH.match(faq_question.strip())
    if which is None or re.match(r"^\W*(?:yes|no|not)\b", answer, re.IGNORECASE):
        return answer
    return f"The {which.group(1)} we {which.group(2)}: {answer}"


def policy_opening(answers: Sequence[Match], question: str, templates: dict[str, list[str]]) -> Opening:
    """The answering passages in plain words: an FAQ line's answer, a policy sentence after a lead-in. When the
    answer is in another language than the store's document, only the lead is written: the sentence is shown in
    the answer's quote box as the store wrote it."""
    if _another_language(answers[0].passage.text):
        text = _pick(templates["policy_quoted"], question)
        verdict = settles(question, answers[0].passage.text)
        if verdict is not None:
            text = f"{_('Yes.') if verdict == 'Yes.' else _('No.')} {text}"
        return Opening(text, "policy_quoted")
    sentences = []
    kind = "policy"
    for index, match in enumerate(answers):
        passage = match.passage
        if passage.question:  # an FAQ line: its own answer is the plain words
            kind = "faq" if index == 0 else kind
            text = _pick(templates["faq"], question).format(answer=_faq_answer(passage.question, passage.answer))
        elif index == 0 or answers[index - 1].passage.document_id != passage.document_id:
            document = passage.title.lower()
            text = _pick(templates["policy"], question).format(document=document, sentence=_lowered(passage.text))
        else:  # a second sentence of the same policy follows the first without another lead-in
            text = passage.text
        sentences.append(text)
    verdict = settles(question, answers[0].passage.text)
    if verdict is not None and not re.match(r"^\W*(?:yes|no)\b", sentences[0], re.IGNORECASE):
        said = _("Yes.") if verdict == "Yes." else _("No.")
        sentences[0] = f"{said} {sentences[0]}"
    return Opening(" ".join(sentences), kind)


def _another_language(document_text: str) -> bool:
    """The active (answer) language is not the one ``document_text`` is written in."""
    from catalog.language import detect

    active = (get_language() or "en").split("-")[0]
    return detect(document_text) != active


def small_talk_opening(store: Any, question: str, types: Sequence[str], templates: dict[str, list[str]]) -> Opening:
    listing = ", ".join(types[:3]) if types else _("everything we sell")
    if _THANKS.search(question):
        kind = "thanks"
    elif _GREETING.search(question):
        kind = "greeting"
    else:
        kind = "other"
    text = _pick(templates[kind], question).format(store=store.name, types=listing)
    return Opening(possessive(text, store.name), kind)


def opening_for(
    store: Any,
    question: str,
    products: Sequence[ProductFacts],
    answers: Sequence[Match],
    types: Sequence[str] = (),
    catalog_words: frozenset[str] = frozenset(),
) -> Opening:
    """The opening of a model answer: the policy answer when the question is about a policy, the products
    when the catalog matched, else a word about what the assistant can help with. ``catalog_words``: the words
    the store's products are described with (``catalog.passages.store_index(...).described_words``)."""
    templates = templates_for(store)
    if answers:
        return policy_opening(answers, question, templates)
    if products:
        return products_opening(products, question, templates, catalog_words)
    return small_talk_opening(store, question, types, templates)
