"""Grounding for chat: the catalog facts, product cards and policy passages for one shopper message.

The chat consumer calls ``ground(store, text)`` on every turn and puts ``facts`` under "Catalog results" in
the model's input, and sends ``cards`` to the widget. Everything in both comes from database rows, never from
the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from . import asked, embeddings, passages, sales
from .models import Product, Store, Variant
from .search import MATCH_THRESHOLD, MIN_SEMANTIC, SearchHit, query_vector, search
from .text import split_sentences

MAX_DESCRIPTION_CHARS = 160
MAX_QUOTE_SENTENCES = 2  # per document: enough for the answer, short enough to read at a glance
RELATIVE_CUTOFF = 0.7  # hits scoring under 70% of the best one are noise next to it
NO_MATCH = (
    "No product in this store's catalog matches this message. If the shopper asked for a product, say that you "
    "could not find it in this store; do not guess, and do not suggest products that are not listed here."
)

# option name -> its values in the variants' order, each with whether a variant with it is in stock:
# (("Size", (("M", True), ("L", True))), ("Color", (("Forest", True), ("Charcoal", False))))
OptionValues = tuple[tuple[str, tuple[tuple[str, bool], ...]], ...]
# each variant's option values (option1..option3, empty ones left out) with whether it is in stock
VariantOptions = tuple[tuple[tuple[str, ...], bool], ...]

# A count of something else is no price: "up to 4 people", "hasta 4 personas", "unter 3 Tagen"
_NOT_A_PRICE = (
    r"(?![\d.]|\s*(?:people|persons?|personas?|personnes?|personen|adults?|kids?|nights?|days?|d[ií]as|noches|jours|"
    r"nuits|tagen?|n[aä]chten?|hours?|horas|heures|stunden|kg|kilos?|g\b|grams?|l\b|liters?|litres?|litros|cm|mm|m\b|"
    r"°|degrees?|grados|degr[eé]s|grad|years?|a[nñ]os|ans|jahren?|months?|meses|mois|monaten?|weeks?|semanas|"
    r"semaines|wochen|pieces?|piezas|pi[eè]ces|st[uü]ck))"
)
# English, Spanish, French and German (lowered): "under 150", "por menos de 150", "moins de 150 €", "unter 150"
_PRICE_BELOW = re.compile(
    r"\b(?:under|below|less than|cheaper than|at most|no more than|up to|max(?:imum)?|menos de|por debajo de|"
    r"no (?:pase|pasa|supere|supera|cueste m[aá]s) de|no m[aá]s de|pas plus de|ne d[eé]passant pas|nicht mehr als|"
    r"hasta|como m[aá]ximo|m[aá]ximo|moins de|en dessous de|au plus|au maximum|jusqu['’]à|unter|weniger als|"
    r"bis zu|bis|h[oö]chstens|maximal)\s*[$€£]?\s*(\d+(?:\.\d{1,2})?)" + _NOT_A_PRICE
)
_PRICE_ABOVE = re.compile(
    r"\b(?<!no )(?<!not )(?<!nicht )(?:over|above|more than|at least|min(?:imum)?|m[aá]s de|por encima de|al menos|plus de|au moins|"
    r"[uü]ber|mehr als|mindestens)\s*[$€£]?\s*(\d+(?:\.\d{1,2})?)" + _NOT_A_PRICE
)
_PRICE_BETWEEN = re.compile(r"\bbetween\s*[$€£]?\s*(\d+(?:\.\d{1,2})?)\s*(?:and|-|to)\s*[$€£]?\s*(\d+(?:\.\d{1,2})?)")


@dataclass(frozen=True)
class ProductFacts:
    """What the catalog says about one card's product: for the answer's opening sentences and for checking
    what the model writes about it. Every field comes from the product's and the variant's rows."""

    title: str  # the product's title, without the variant ("Ridgeline 2-Person Tent")
    variant: str  # the variant's option values ("Sage"), "" for a product without options
    price: Decimal
    currency: str
    compare_at_price: Decimal | None  # the price before a markdown, when higher than the price
    in_stock: bool  # this variant
    others_in_stock: bool  # another variant of the product is
    product_type: str
    vendor: str
    tags: tuple[str, ...]
    options: str  # "Color: Sage, Orange (sold out)"
    description: str  # plain text, whole
    option_values: OptionValues = ()  # the same as ``options``, structured
    variant_options: VariantOptions = ()  # which combinations exist ("L" and "Charcoal" may each be in stock alone)

    @property
    def buyable(self) -> bool:
        """This variant or another of the product is in stock."""
        return self.in_stock or self.others_in_stock

    @property
    def on_sale(self) -> bool:
        return self.compare_at_price is not None and self.compare_at_price > self.price

    def text(self) -> str:
        """Everything above as one text, to check sentences against."""
        parts = [self.title, self.variant, self.product_type, self.vendor, " ".join(self.tags), self.options,
                 self.description]  # fmt: skip
        return "\n".join(part for part in parts if part)


@dataclass
class Grounding:
    """What the assistant may say about the catalog for one message.

    facts: short lines for the prompt (products with price, stock, options and one line of description; the
        text of the store documents a policy question asks about), or a line saying nothing matches.
    cards: one dict per product hit, exactly {"sku", "title", "price", "currency", "url", "image", "in_stock"};
        price is a string with two decimals ("19.99"), url and image may be "".
    found: False when no product scored above the match threshold and no policy document applies.

    quotes: the sentences of the store's documents that answer a policy question, one dict per document,
        {"title", "text"}: shown to the shopper word for word, so the figure asked for is on screen.
    products: the catalog's facts about each card's product, in the cards' order.
    answers: the passages of the store's documents that answer the question, best first.
    """

    facts: str
    cards: list[dict] = field(default_factory=list)
    found: bool = False
    quotes: list[dict] = field(default_factory=list)
    products: list[ProductFacts] = field(default_factory=list)
    answers: list[passages.Match] = field(default_factory=list)


# Gift ideas are suggestions, not answers to "do you have X?": a product is kept on a weaker likeness to what the
# person likes (their words rarely name a product: "a colleague who hikes at weekends"). Calibrated on the demo
# catalog: the socks and the first-aid kit score 0.21-0.25 in meaning for that colleague; unrelated products
# (the sun hat, the mug) under 0.15. Keyword hits stand on their own ("camps" and the Titanium Camp Mug).
IDEA_MIN_SEMANTIC = 0.20
IDEA_MIN_KEYWORD = 0.5
IDEA_RELATIVE_CUTOFF = 0.5


def ideas(store: Store, text: str, k: int = 3, *, min_price: Decimal | None = None,
          max_price: Decimal | None = None, relative: float = IDEA_RELATIVE_CUTOFF) -> Grounding:
    """Products to suggest for what someone likes (``text``), in stock and within the price range, best first:
    ``ground``'s cards and facts with the weaker bar of a suggestion (``IDEA_MIN_SEMANTIC``), each scoring at
    least ``relative`` times the best."""
    found = search(text, k * 3, store=store, min_price=min_price, max_price=max_price, in_stock=True)
    if not any(h.keyword > 0 for h in found):
        # None of the person's words is the catalog's ("kayaking", "golf"): likeness alone would suggest trekking
        # poles to a kayaker (0.38 in meaning), so nothing is suggested.
        return Grounding(facts=NO_MATCH, cards=[], found=False)
    hits = [h for h in found if h.variant is not None and (h.semantic >= IDEA_MIN_SEMANTIC or h.keyword >= IDEA_MIN_KEYWORD)]
    if hits:
        hits = [h for h in hits if h.score >= relative * hits[0].score][:k]
    if not hits:
        return Grounding(facts=NO_MATCH, cards=[], found=False)
    return _listed("Products from the catalog that could suit:", hits)


def _listed(heading: str, hits: list[SearchHit]) -> Grounding:
    """A found grounding of ``hits``: the heading and a line per product, a card and the facts of each."""
    lines = [heading] + [_product_line(i, hit) for i, hit in enumerate(hits, 1)]
    return Grounding(facts="\n".join(lines), cards=[card(hit) for hit in hits], found=True,
                     products=[product_facts(hit) for hit in hits])


def priced(
    store: Store, k: int = 3, *, descending: bool = False, min_price: Decimal | None = None,
    max_price: Decimal | None = None, product_type: str | None = None,
) -> list[SearchHit]:
    """The store's ``k`` least (``descending``: most) expensive active products within the price range (of one
    product type when given), each at that variant's price: "what's the cheapest thing you sell?" asks of the whole
    catalog, not of a search's best matches."""
    variants = Variant.objects.filter(store=store, product__status=Product.Status.ACTIVE)
    if product_type is not None:
        variants = variants.filter(product__product_type=product_type)
    if min_price is not None:
        variants = variants.filter(price__gte=min_price)
    if max_price is not None:
        variants = variants.filter(price__lte=max_price)
    variants = variants.select_related("product", "product__store").order_by("-price" if descending else "price", "id")
    hits: list[SearchHit] = []
    seen: set[int] = set()
    for variant in variants.iterator():
        if variant.product_id not in seen:
            seen.add(variant.product_id)
            hits.append(SearchHit(product=variant.product, variant=variant, score=1.0))
        if len(hits) == k:
            break
    return hits


def within(store: Store, k: int = 3, *, min_price: Decimal | None = None, max_price: Decimal | None = None) -> Grounding:
    """The whole catalog within a price range, least expensive first: "Show me everything under 30 dollars"."""
    hits = priced(store, k, min_price=min_price, max_price=max_price)
    if not hits:
        return Grounding(facts=NO_MATCH + " (A price limit was applied.)", cards=[], found=False)
    return _listed("Products from the catalog in the price range, least expensive first:", hits)


def price_limits(text: str) -> tuple[Decimal | None, Decimal | None]:
    """Price bounds a shopper stated ("under $50", "between 20 and 40"); (None, None) when none."""
    lowered = text.lower()
    between = _PRICE_BETWEEN.search(lowered)
    if between:
        low, high = sorted((Decimal(between.group(1)), Decimal(between.group(2))))
        return low, high
    below, above = _PRICE_BELOW.search(lowered), _PRICE_ABOVE.search(lowered)
    return (Decimal(above.group(1)) if above else None, Decimal(below.group(1)) if below else None)


def _money(amount: Decimal) -> str:
    return f"{amount.quantize(Decimal('0.01'))}"


def _first_line(description: str) -> str:
    text = " ".join(description.split())
    if not text:
        return ""
    sentence = (split_sentences(text) or [""])[0]
    if len(sentence) > MAX_DESCRIPTION_CHARS:
        sentence = sentence[: MAX_DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return sentence


def option_values(product: Product, variants: list[Variant]) -> OptionValues:
    """The product's options with their values; a value is available when a variant with it is in stock."""
    names = list(product.option_names or [])
    found = []
    for i in range(3):
        values: dict[str, bool] = {}
        for variant in variants:
            value = getattr(variant, f"option{i + 1}")
            if value:
                values[value] = values.get(value, False) or variant.in_stock
        if values:
            name = names[i] if i < len(names) and names[i] else f"Option {i + 1}"
            found.append((name, tuple(values.items())))
    return tuple(found)


def options_text(values: OptionValues) -> str:
    """"Size: M, L; Color: Forest, Charcoal (sold out)"."""
    return "; ".join(
        f"{name}: " + ", ".join(value if available else f"{value} (sold out)" for value, available in shown)
        for name, shown in values
    )


def _options_line(product: Product, variants: list[Variant]) -> str:
    return options_text(option_values(product, variants))


# Sizes written as letters; in a shopper's or the model's words only in capitals and standing alone, never the
# "s" of "what's" or the "m" of "I'm".
LETTER_SIZES = frozenset("XXS XS S M L XL XXL XXXL 2XL 3XL 4XL".split())
LETTER_SIZE = re.compile(r"(?<![\w'’])(?:XXS|XS|S|M|L|XL|XXL|XXXL|[2-4]XL)(?![\w'’])")


def is_size(option_name: str) -> bool:
    """An option that is the product's size ("Size", "Shoe size")."""
    return "size" in option_name.lower()


def _variant_options(variants: list[Variant]) -> VariantOptions:
    return tuple((tuple(variant.option_values), variant.in_stock) for variant in variants)


def _product_line(number: int, hit: SearchHit) -> str:
    product, variant = hit.product, hit.variant
    variants = list(product.variants.all())
    price = f"{_money(variant.price)} {variant.currency}"
    if variant.compare_at_price and variant.compare_at_price > variant.price:
        price += f" (was {_money(variant.compare_at_price)})"
    prices = {v.price for v in variants}
    if len(prices) > 1:
        price += f"; options cost {_money(min(prices))} to {_money(max(prices))}"
    if variant.in_stock:
        stock = "in stock"
    elif any(v.in_stock for v in variants):
        stock = "this option sold out, others in stock"
    else:
        stock = "out of stock"
    line = f"{number}. {product.title}"
    if variant.option_values:
        line += f" ({variant.title})"
    line += f" - {price} - {stock}"
    options = _options_line(product, variants)
    if options:
        line += f" - {options}"
    description = _first_line(product.description)
    if description:
        line += f" - {description}"
    return line + f" [SKU {variant.sku}]"


def card(hit: SearchHit) -> dict:
    """The widget's product card, from the hit's database rows."""
    product, variant = hit.product, hit.variant
    images = list(product.images.all())
    title = f"{product.title} ({variant.title})" if variant.option_values else product.title
    return {
        "sku": variant.sku,
        "title": title,
        "price": _money(variant.price),
        "currency": variant.currency,
        "url": product.url,
        "image": variant.image_src or (images[0].src if images else ""),
        "in_stock": variant.in_stock,
    }


def product_facts(hit: SearchHit) -> ProductFacts:
    product, variant = hit.product, hit.variant
    variants = list(product.variants.all())
    values = option_values(product, variants)
    compare_at = variant.compare_at_price if variant.compare_at_price and variant.compare_at_price > variant.price else None
    return ProductFacts(
        title=product.title,
        variant=variant.title if variant.option_values else "",
        price=variant.price,
        currency=variant.currency,
        compare_at_price=compare_at,
        in_stock=variant.in_stock,
        others_in_stock=any(v.in_stock for v in variants if v.pk != variant.pk),
        product_type=product.product_type,
        vendor=product.vendor,
        tags=tuple(product.tag_list),
        options=options_text(values),
        description=" ".join(product.description.split()),
        option_values=values,
        variant_options=_variant_options(variants),
    )


# Between two quoted passages that are not next to each other in the document: the quote marks what it leaves out,
# so it never reads as one run of the store's text that the store did not write.
ELISION = " … "


def quotes_of(answers: list[passages.Match]) -> list[dict]:
    """One quote per document, its answering passages in the document's order: {"title", "text"}; passages that
    are not adjacent in the document are joined by ``ELISION``, so each part is the store's words verbatim."""
    by_document: dict[int, list[passages.Passage]] = {}
    for match in answers:
        by_document.setdefault(match.passage.document_id, []).append(match.passage)
    quotes = []
    for chosen in by_document.values():
        chosen.sort(key=lambda passage: passage.position)
        text = chosen[0].text
        for before, passage in zip(chosen, chosen[1:]):
            text += (" " if passage.position == before.position + 1 else ELISION) + passage.text
        quotes.append({"title": chosen[0].title, "text": text})
    return quotes


def quoted_parts(quote: str) -> list[str]:
    """The runs of the store's own text in a quote (``quotes_of``), each verbatim in its document."""
    return [part for part in quote.split(ELISION.strip()) if part.strip()]


def _means_it(hit: SearchHit) -> bool:
    """Not a near miss: the product's meaning is close enough (a product without a vector is judged on words)."""
    return hit.product.embedding is None or hit.semantic >= MIN_SEMANTIC


def product_types(store: Store, limit: int = 8) -> list[str]:
    """What the store sells, most common first: product types, or tags where the catalog has no types."""
    counts: dict[str, int] = {}
    rows = Product.objects.filter(store=store, status=Product.Status.ACTIVE).values_list("product_type", "tags")
    rows = list(rows)
    for product_type, _tags in rows:
        if product_type.strip():
            counts[product_type.strip().lower()] = counts.get(product_type.strip().lower(), 0) + 1
    if not counts:
        for _type, tags in rows:
            for tag in tags.split(","):
                if tag.strip():
                    counts[tag.strip().lower()] = counts.get(tag.strip().lower(), 0) + 1
    return [name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]]


# What the shopper wants to do, not a thing asked for: "I need to boil water on the trail" asks no water bottle.
# Not the verbs of shopping ("to buy a tent", "to see your jackets").
_TO_DO = re.compile(
    r"\bto\s+(?!(?:buy|get|find|see|order|try|have|pick|choose|look|compare|check)\b)[a-z]+\s+"
    r"(?:(?:some|the|my|our|a|an|your)\s+)?[a-z]+",
    re.IGNORECASE,
)


def _of_the_kind_asked(text: str, hits: list[SearchHit]) -> list[SearchHit]:
    """When the shopper names a kind of product that some hits are ("a waterproof jacket"), only those: boots
    that are waterproof too are no answer to a jacket, and "the least expensive is the boots" reads as nonsense.
    What they want to do ("to boil water") names no kind: the search's order stands."""
    asked = passages.content_words(_TO_DO.sub(" ", text))
    kinds = {id(hit): passages.content_words(hit.product.product_type) for hit in hits}
    named = {word for hit in hits for word in kinds[id(hit)] & asked}
    if not named:
        return hits
    return [hit for hit in hits if kinds[id(hit)] & named]


def of_the_kind_named(store: Store, text: str, hits: list[SearchHit]) -> list[SearchHit]:
    """Only the hits that are the kind of product the shopper names, when the store sells nothing called that
    ("the sun hoodie" is not the Wide-Brim Sun Hat; "a raincoat" is the rain jacket): see ``catalog.asked``."""
    named = asked.named_kind(text) if hits else None
    if named is None:
        return hits
    kinds = asked.kinds_of(passages.store_index(store).catalog_words, [hit.product.tags for hit in hits])
    if asked.sold_as(named, kinds):
        return hits
    vectors = [embeddings.from_bytes(hit.product.embedding) for hit in hits]
    return [hit for hit, means in zip(hits, asked.means(named, vectors, query_vector)) if means]


# How many more hits are searched when only one kind of product will be kept.
KIND_DEPTH = 5


# Where the shopper is: "cold nights in the tent", "what fits in my backpack". What they are in, they have.
_SETTING = re.compile(r"\b(?:in|inside|into)\s+(?:the|my|our|a|an|your)\s+([a-z][a-z-]*)", re.IGNORECASE)


def where_they_are(text: str) -> frozenset[str]:
    """The words of the things the shopper says they are in ("I can only buy one thing for cold nights in the tent":
    tent), named nowhere else in the message: a product of that type is what they have, not what they ask for."""
    named = [match.group(1).lower() for match in _SETTING.finditer(text)]
    elsewhere = _SETTING.sub(" ", text).lower()
    return frozenset(
        word for noun in named if not re.search(rf"\b{re.escape(noun)}", elsewhere) for word in passages.content_words(noun)
    )


def _is_where_they_are(hit: SearchHit, setting: frozenset[str]) -> bool:
    return bool(setting & passages.content_words(hit.product.product_type))


def _the_kind_alone(
    store: Store, text: str, k: int, low: Decimal | None, high: Decimal | None, in_stock: bool | None,
    setting: frozenset[str],
) -> list[SearchHit]:
    """When the whole message finds nothing, the kind of product it names, searched alone, if the store sells it:
    "Does the chair come in other colors?" is about the chair, whose match the question's other words diluted
    under the threshold. A kind the store does not sell stays unfound (its "we don't carry")."""
    named = asked.named_kind(text)
    if named is None or not named.noun or passages.content_words(named.noun) & setting:
        return []
    found = search(named.phrase, k, store=store, min_price=low, max_price=high, in_stock=in_stock)
    return [
        hit for hit in found
        if hit.variant is not None and hit.score >= MATCH_THRESHOLD and _means_it(hit)
        and asked.is_kind(named, hit.product.title, hit.product.product_type)
    ]  # fmt: skip


def kind_sold(store: Store, text: str) -> str:
    """The product type of the kind of product ``text`` names, when the store sells it: the best product for the
    named phrase alone is called that ("any jackets under 50?": a rain jacket, type Jackets; "hiking boots": the
    Trailblazer boots, Footwear). "" for words that name an activity or no product ("a day hike": the daypack is
    no hike; "cooking gear"), nothing at all, or a product without a type. The phrase alone, not the message:
    "under 50" would find the sun hat's "UPF 50"."""
    named = asked.named_kind(text)
    if named is None or not named.noun:
        return ""
    best = search(named.phrase, 1, store=store)
    if not best or not asked.is_kind(named, best[0].product.title, best[0].product.product_type):
        return ""
    return best[0].product.product_type


def ground(
    store: Store,
    text: str,
    k: int = 3,
    *,
    min_price: Decimal | None = None,
    max_price: Decimal | None = None,
    in_stock: bool | None = None,
) -> Grounding:
    """Catalog facts and product cards for one shopper message.

    Searches ``store``'s active products (hybrid embedding + keyword search, see ``catalog.search``) and keeps
    at most ``k`` hits scoring at least ``MATCH_THRESHOLD`` (and 70% of the best hit); a stated price range
    ("under $50") filters the variants. The passages of the store's documents that answer the message
    (``catalog.passages``: every policy and the FAQ are searched; the documents are the only source of a quote)
    are added word for word. ``found`` is False, with ``facts``
    saying the catalog has no match, when neither a product nor a document applies: the assistant must then
    say so instead of guessing. Cards are one per product hit, from its best-matching variant.

    ``min_price``/``max_price``/``in_stock``: filters a planner read from the message; without a price bound, the
    bounds are read from ``text`` ("under $50").

    Synchronous and uses the database: from async code call it through ``asgiref.sync.sync_to_async``. The
    first call in a process loads the embedding model (seconds); ``catalog.search.warm_up()`` does that early.
    """
    text = text or ""
    low, high = (min_price, max_price) if min_price is not None or max_price is not None else price_limits(text)
    hits: list[SearchHit] = []
    answers: list[passages.Match] = []
    if text.strip():
        # With a price range, a kind of product named ("a tent under 100") keeps the hits of its type (the store's
        # own category), searched deeper for them: the headlamp that "tent mate" finds under 100 is no tent, the
        # camp chair with its carry bag no sleeping bag; the trail shoes under 150 are footwear like the boots
        # asked for. Words that name no product ("a day hike", "gear") keep every hit.
        # And a kind named as where the shopper is ("cold nights in the tent") is dropped: the tent is theirs.
        kind = kind_sold(store, text) if low is not None or high is not None else ""
        setting = where_they_are(text)
        depth = k * KIND_DEPTH if kind or setting else k
        found = search(text, depth, store=store, min_price=low, max_price=high, in_stock=in_stock)
        hits = [
            hit for hit in found
            if hit.variant is not None and (not kind or hit.product.product_type == kind)
            and not _is_where_they_are(hit, setting)
        ][:k]  # fmt: skip
        floor = max(MATCH_THRESHOLD, RELATIVE_CUTOFF * hits[0].score) if hits else MATCH_THRESHOLD
        hits = _of_the_kind_asked(text, [hit for hit in hits if hit.score >= floor and _means_it(hit)])
        hits = of_the_kind_named(store, text, hits)
        if not hits:
            hits = _the_kind_alone(store, text, k, low, high, in_stock, setting)
        answers = passages.answering(store, text, query_vector(text))
        if not hits and not answers and sales.asks_about_sales(text):
            hits = sales.on_sale(store, k)

    lines: list[str] = []
    if hits:
        heading = "Products from the catalog"
        if low is not None or high is not None:
            bounds = ([f"from {_money(low)}"] if low is not None else []) + (
                [f"up to {_money(high)}"] if high is not None else []
            )
            heading += f" priced {' '.join(bounds)} {store.currency}"
        lines.append(heading + ":")
        lines.extend(_product_line(i, hit) for i, hit in enumerate(hits, 1))
    elif not answers:
        if low is not None or high is not None:
            return Grounding(facts=NO_MATCH + " (A price limit was applied.)", cards=[], found=False)
        return Grounding(facts=NO_MATCH, cards=[], found=False)
    quotes = quotes_of(answers)
    # The answering sentences, not the whole policy: a small model repeats what it is given, so the less it is
    # given the more likely it repeats the figure that matters.
    lines.extend(f'Store document "{quote["title"]}": {quote["text"]}' for quote in quotes)
    return Grounding(
        facts="\n".join(lines),
        cards=[card(hit) for hit in hits],
        found=True,
        quotes=quotes,
        products=[product_facts(hit) for hit in hits],
        answers=answers,
    )
