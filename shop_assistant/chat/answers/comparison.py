"""Follow-ups about the products already shown: "which of those is lighter?", "is either of them waterproof?".

Searching the catalog again with such a message finds nothing (or something else): the shopper means the cards of
the previous answer. This module recognises that kind of message, reads those products again from the catalog and
orders them by what was asked (price from the variants; weight, warmth and waterproofing from the product's own
text; sizes from its options), so the right product comes first and its card is shown again. The sentence is composed
from catalog facts only: a figure in it is one the catalog row holds, word for word; when the catalog does not
say, the reply says so instead of guessing. Blocking (database): a worker thread. The sentences are translated
(composed under the shopper's language); titles, prices and the catalog's weights go in unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from catalog.grounding import ProductFacts, card, is_size, product_facts
from catalog.models import Product, Store, Variant
from catalog.search import SearchHit
from catalog.text import split_sentences

from .opening import capitalised, listing, money, sold_out

PRICE, WEIGHT, WARMTH, WATERPROOF, SIZE, VOLUME = "price", "weight", "warmth", "waterproof", "size", "volume"

# The message points back at what was shown ("those", "which one", "either of them"). Not "ones": "do you have
# cheaper ones?" asks for other products, which the search answers (composition's follow-ups).
_REFERS = re.compile(
    r"\b(?:those|these|them|they|which|either|neither|both|first|second|third|last|the (?:two|three))\b",
    re.IGNORECASE,
)
# (attribute, ascending) for each way of asking.
_ASKS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"\b(?:cheap(?:er|est)?|less expensive|least expensive|lower price|lowest price|affordable|budget)\b", re.I), PRICE, True),
    (re.compile(r"\b(?:pricier|priciest|more expensive|most expensive|higher price|highest price|premium)\b", re.I), PRICE, False),
    (re.compile(r"\b(?:light(?:er|est)|weighs? less|less weight|lowest weight)\b", re.I), WEIGHT, True),
    (re.compile(r"\b(?:heav(?:ier|iest)|weighs? more|more weight)\b", re.I), WEIGHT, False),
    (re.compile(r"\b(?:warm(?:er|est)|more warmth|colder (?:nights?|weather|temperatures?)|for (?:the )?cold)\b", re.I), WARMTH, True),
    (re.compile(r"\b(?:water ?proof|water-?resistant|rain ?proof|keeps? (?:me |you )?dry|for (?:the )?rain)\b", re.I), WATERPROOF, True),
    (re.compile(r"\b(?:my size|in (?:a |an )?size|sizes?\b|fits? me)", re.I), SIZE, True),
    # after the sizes: "a smaller size" is a size asked for
    (re.compile(r"\b(?:bigg(?:er|est)|larg(?:er|est)|roomi(?:er|est)|holds? more|more (?:room|space|volume))\b", re.I), VOLUME, False),
    (re.compile(r"\b(?:small(?:er|est)|holds? less|less (?:room|space|volume))\b", re.I), VOLUME, True),
)
_MAX_WORDS = 14

# "Packed weight 1.6 kg", "Weighs 240 g", "A 70 g titanium mug": a mass in the product's text is its weight,
# except in a sentence about what it carries ("holds up to 120 kg" is a load, not what the chair weighs).
_WEIGHT_SENTENCE = re.compile(r"\bweigh", re.IGNORECASE)
_LOAD_SENTENCE = re.compile(r"\b(?:holds?|up to|capacity|load|supports?|carr(?:y|ies)|max(?:imum)?|limit)\b", re.I)
_WEIGHT = re.compile(r"(\d+(?:[.,]\d+)?)\s*(kg|kilograms?|g|grams?|lbs?|pounds?|oz|ounces?)\b", re.IGNORECASE)
_GRAMS = {"kg": 1000.0, "kilogram": 1000.0, "g": 1.0, "gram": 1.0, "lb": 453.592, "pound": 453.592,
          "oz": 28.3495, "ounce": 28.3495}  # fmt: skip
# "keeps you comfortable to -7 °C", "Comfort rating 5 °F": a temperature in a sentence about comfort or a rating is
# the product's comfort temperature (a lower one is warmer); other temperatures (a stove's canister) are not.
_RATING_SENTENCE = re.compile(r"\b(?:comfort\w*|rated|rating|limit)\b", re.IGNORECASE)
_TEMPERATURE = re.compile(r"(?<![\w.])([-−]?\s?\d+(?:[.,]\d+)?)\s*°\s*([CF])\b")
# "Summit 40L Backpack", "A light 22-litre daypack", "Water Bottle 750 ml": a volume in the name or the description,
# not in a sentence about what it handles ("filters up to 400,000 litres").
_VOLUME = re.compile(r"(?<![\d,.])(\d+(?:[.,]\d+)?)\s?-?\s?(l|litres?|liters?|ml)\b", re.IGNORECASE)
_THROUGHPUT_SENTENCE = re.compile(r"\b(?:up to|filters?|purifies|per)\b", re.IGNORECASE)
_NOT_WATERPROOF = re.compile(r"\bnot (?:fully )?water ?proof\b", re.IGNORECASE)
_WATERPROOF = re.compile(r"\bwater ?proof\b", re.IGNORECASE)
_RESISTANT = re.compile(r"\bwater[- ](?:resistant|repellent)\b", re.IGNORECASE)
_ASKED_SIZE = re.compile(r"\bsize\s+([A-Za-z0-9.]{1,4})\b|\bin (?:an? )?(XXS|XS|S|M|L|XL|XXL|\d{1,2}(?:\.5)?)\b(?!\s*\w)")


@dataclass(frozen=True)
class Compared:
    """The products of the previous answer, in the order that answers the follow-up, and the sentence saying so."""

    attribute: str
    reply: str
    cards: list[dict[str, Any]]
    products: list[ProductFacts]


def asked_attribute(text: str) -> tuple[str, bool] | None:
    """(attribute, ascending) when ``text`` is a short follow-up comparing the products already shown."""
    if len(text.split()) > _MAX_WORDS or not _REFERS.search(text):
        return None
    return attribute_of(text)


def attribute_of(text: str) -> tuple[str, bool] | None:
    """(attribute, ascending) that ``text`` compares on ("lighter": weight, lightest first), or None."""
    for pattern, attribute, ascending in _ASKS:
        if pattern.search(text):
            return attribute, ascending
    return None


def shown_products(store: Store, cards: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], ProductFacts, Variant]]:
    """The cards' variants read again from the catalog (prices and stock as they are now), in the cards' order;
    a product no longer sold is left out."""
    skus = [str(item.get("sku") or "") for item in cards if item.get("sku")]
    variants = {
        variant.sku: variant
        for variant in Variant.objects.filter(store=store, sku__in=skus, product__status=Product.Status.ACTIVE)
        .select_related("product")
        .prefetch_related("product__images", "product__variants")
    }
    shown = []
    for sku in dict.fromkeys(skus):
        variant = variants.get(sku)
        if variant is not None:
            hit = SearchHit(product=variant.product, variant=variant, score=1.0)
            shown.append((card(hit), product_facts(hit), variant))
    return shown


def _name(facts: ProductFacts) -> str:
    """"the Stormshell Rain Jacket" ("The North Tent" keeps its own article), in the active language."""
    return _("the {title}").format(title=facts.title) if not facts.title.lower().startswith("the ") else facts.title


def weight_of(facts: ProductFacts) -> tuple[float, str] | None:
    """(grams, the weight as the catalog writes it), from a sentence of the product's text about its weight."""
    for source in (facts.description, facts.options, " ".join(facts.tags)):
        for sentence in re.split(r"(?<=[.!?;])\s+|\n", source):
            if _LOAD_SENTENCE.search(sentence) and not _WEIGHT_SENTENCE.search(sentence):
                continue
            match = _WEIGHT.search(sentence)
            if match:
                unit = match.group(2).lower().rstrip("s") if match.group(2).lower() not in {"lbs"} else "lb"
                grams = float(match.group(1).replace(",", ".")) * _GRAMS.get(unit, 1.0)
                return grams, match.group(0)
    return None


def comfort_temperature(facts: ProductFacts) -> tuple[float, str] | None:
    """(degrees Celsius, the temperature as the catalog writes it) of a sleeping bag's or a garment's comfort
    rating, from a sentence of the product's text about comfort or a rating; None when the catalog does not say."""
    for sentence in re.split(r"(?<=[.!?;])\s+|\n", f"{facts.description}\n{facts.options}"):
        match = _TEMPERATURE.search(sentence) if _RATING_SENTENCE.search(sentence) else None
        if match:
            degrees = float(match.group(1).replace("−", "-").replace(" ", "").replace(",", "."))
            celsius = degrees if match.group(2).upper() == "C" else (degrees - 32) * 5 / 9
            return celsius, match.group(0).strip()
    return None


def volume_of(facts: ProductFacts) -> tuple[float, str] | None:
    """(litres, the volume as the catalog writes it), from the product's name, else a sentence of its description."""
    for sentence in (facts.title, *re.split(r"(?<=[.!?;])\s+|\n", facts.description)):
        if _THROUGHPUT_SENTENCE.search(sentence):
            continue
        match = _VOLUME.search(sentence)
        if match:
            litres = float(match.group(1).replace(",", "."))
            return (litres / 1000 if match.group(2).lower() == "ml" else litres), match.group(0)
    return None


# The attributes read as numbers from a product's own text: what a ranking on them needs.
MEASURES = {WEIGHT: weight_of, WARMTH: comfort_temperature, VOLUME: volume_of}


def proofing_word(kind: str) -> str:
    """``waterproofing``'s answer in the active language (the answer itself is a key, never translated)."""
    return _("waterproof") if kind == "waterproof" else _("water-resistant")


def waterproofing(facts: ProductFacts) -> str:
    """"waterproof", "water-resistant" or "" (the catalog does not say), from the product's own text and tags."""
    text = facts.text()
    if _NOT_WATERPROOF.search(text):
        return ""
    if _WATERPROOF.search(text):
        return "waterproof"
    if _RESISTANT.search(text):
        return "water-resistant"
    return ""


def _by_price(shown: list[tuple[dict[str, Any], ProductFacts, Variant]], ascending: bool) -> tuple[list[int], str]:
    order = sorted(range(len(shown)), key=lambda i: shown[i][1].price, reverse=not ascending)
    prices = [shown[i][1] for i in order]
    if len({facts.price for facts in prices}) == 1:
        first = prices[0]
        return order, _("They cost the same: {price} each.").format(price=money(first.price, first.currency))
    best = prices[0]
    if ascending:
        sentence = _("{name} is the least expensive at {price}, then {rest}.")
    else:
        sentence = _("{name} is the most expensive at {price}, then {rest}.")
    rest = [f"{_name(facts)} ({money(facts.price, facts.currency)})" for facts in prices[1:]]
    return order, capitalised(
        sentence.format(name=_name(best), price=money(best.price, best.currency), rest=listing(rest))
    )


def _by_measure(
    shown: list[tuple[dict[str, Any], ProductFacts, Variant]], attribute: str, ascending: bool
) -> tuple[list[int], str]:
    """``shown`` ordered on a measured attribute (``MEASURES``: (the number compared, the catalog's words), or None
    where the catalog does not say; for warmth the lowest temperature, the warmest, comes first when ascending),
    and the sentence saying so, from ``_SAID``'s untranslated sentences: "best" (the first, then the rest), "one"
    (one known), "none" (none known), "unknown" (the ones the catalog does not say)."""
    values = [MEASURES[attribute](facts) for _, facts, _ in shown]
    said = _SAID[attribute][ascending] | _SAID[attribute][None]
    known = sorted((i for i, value in enumerate(values) if value is not None),
                   key=lambda i: values[i][0], reverse=not ascending)  # type: ignore[index]
    unknown = [i for i, value in enumerate(values) if value is None]
    if not known:
        names = listing([_name(shown[i][1]) for i in unknown], "or")
        check = _("A member of our team can check: ask for a person.")
        # "warmest jacket?" with no rating: no ranking, but what each description says of warmth ("a soft, warm
        # mid layer"), the products that say it first
        # (in English only: the descriptions are the store's English, and half-English answers read wrong)
        english = (get_language() or "en").startswith("en")
        spoken = [(i, _spoken_of(shown[i][1], attribute) if english else "") for i in range(len(shown))]
        order = [i for i, sentence in spoken if sentence] + [i for i, sentence in spoken if not sentence]
        quoted = [_("The {title}: {sentence}").format(title=shown[i][1].title, sentence=sentence) for i, sentence in spoken if sentence]
        return order, " ".join([_(said["none"]).format(names=names), *quoted, check])
    first, value = _name(shown[known[0]][1]), values[known[0]][1]  # type: ignore[index]
    if len(known) > 1:
        rest = [f"{_name(shown[i][1])} ({values[i][1]})" for i in known[1:]]  # type: ignore[index]
        sentence = capitalised(_(said["best"]).format(name=first, value=value, rest=listing(rest)))
    else:
        sentence = capitalised(_(said["one"]).format(name=first, value=value))
    if unknown:
        names = listing([_name(shown[i][1]) for i in unknown], "or")
        sentence += " " + _(said["unknown"]).format(names=names)
    return known + unknown, sentence


# The words in which a description speaks of an attribute it gives no figure for.
_SPOKEN = {
    WARMTH: re.compile(r"\b(?:warm(?:er|est|th)?|insulat\w*|cold)\b", re.IGNORECASE),
    WEIGHT: re.compile(r"\b(?:weigh\w*|light(?:weight|er|est)?|heav(?:y|ier|iest))\b", re.IGNORECASE),
    VOLUME: re.compile(r"\b(?:roomy|spacious|room for|space for|capacity|fits)\b", re.IGNORECASE),
}


def _spoken_of(facts: ProductFacts, attribute: str) -> str:
    """The first sentence of the product's description that speaks of ``attribute`` ("warm"), or ""."""
    words = _SPOKEN.get(attribute)
    sentences = split_sentences(facts.description, starts_upper=True) if words else []
    sentence = next((sentence for sentence in sentences if words.search(sentence)), "")  # type: ignore[union-attr]
    return sentence if not sentence or sentence[-1] in ".!?" else f"{sentence}."


_WEIGHT_SAID = {
    True: {
        "none": gettext_noop("Our catalog doesn't list the weight of {names}, so I can't tell which is lighter."),
        "best": gettext_noop("{name} is the lightest at {value}, then {rest}."),
    },
    False: {
        "none": gettext_noop("Our catalog doesn't list the weight of {names}, so I can't tell which is heavier."),
        "best": gettext_noop("{name} is the heaviest at {value}, then {rest}."),
    },
    None: {
        "one": gettext_noop("{name} weighs {value}."),
        "unknown": gettext_noop("Our catalog doesn't list the weight of {names}."),
    },
}
_WARMTH_SAID = {
    True: {
        "none": gettext_noop(
            "Our catalog doesn't list a comfort temperature for {names}, so I can't tell which is warmer."
        ),
        "best": gettext_noop("{name} is the warmest, comfortable to {value}, then {rest}."),
    },
    False: {
        "none": gettext_noop(
            "Our catalog doesn't list a comfort temperature for {names}, so I can't tell which is cooler."
        ),
        "best": gettext_noop("{name} is the coolest, comfortable to {value}, then {rest}."),
    },
    None: {
        "one": gettext_noop("{name} is comfortable to {value}."),
        "unknown": gettext_noop("Our catalog doesn't list a comfort temperature for {names}."),
    },
}


_VOLUME_SAID = {
    True: {
        "none": gettext_noop("Our catalog doesn't give the volume of {names}, so I can't tell which is smaller."),
        "best": gettext_noop("{name} is the smallest at {value}, then {rest}."),
    },
    False: {
        "none": gettext_noop("Our catalog doesn't give the volume of {names}, so I can't tell which is bigger."),
        "best": gettext_noop("{name} is the biggest at {value}, then {rest}."),
    },
    None: {
        "one": gettext_noop("{name} holds {value}."),
        "unknown": gettext_noop("Our catalog doesn't give the volume of {names}."),
    },
}


_SAID = {WEIGHT: _WEIGHT_SAID, WARMTH: _WARMTH_SAID, VOLUME: _VOLUME_SAID}


def _by_waterproofing(shown: list[tuple[dict[str, Any], ProductFacts, Variant]]) -> tuple[list[int], str]:
    rank = {"waterproof": 0, "water-resistant": 1, "": 2}
    kinds = [waterproofing(facts) for _, facts, _ in shown]
    order = sorted(range(len(shown)), key=lambda i: rank[kinds[i]])
    sentences = []
    said = {
        "waterproof": (_("{names} is waterproof."), _("{names} are waterproof.")),
        "water-resistant": (_("{names} is water-resistant."), _("{names} are water-resistant.")),
    }
    for kind, (one, several) in said.items():
        names = [_name(shown[i][1]) for i in order if kinds[i] == kind]
        if names:
            sentences.append(capitalised((one if len(names) == 1 else several).format(names=listing(names))))
    silent = [_name(shown[i][1]) for i in order if not kinds[i]]
    if silent and sentences:
        if len(silent) == 1:
            sentence = _("Our catalog doesn't say that {names} is waterproof.")
        else:
            sentence = _("Our catalog doesn't say that {names} are waterproof.")
        sentences.append(sentence.format(names=listing(silent)))
    elif silent:
        sentences.append(_("Our catalog doesn't say that {names} is waterproof.").format(names=listing(silent, "or")))
    return order, " ".join(sentences)


def _sizes(facts: ProductFacts) -> dict[str, bool]:
    """The product's sizes (an option named like "Size"), each with whether a variant in it is in stock."""
    return next((dict(values) for name, values in facts.option_values if is_size(name)), {})


def _by_size(shown: list[tuple[dict[str, Any], ProductFacts, Variant]], text: str) -> tuple[list[int], str]:
    match = _ASKED_SIZE.search(text)
    asked = (match.group(1) or match.group(2)).upper() if match else ""
    sizes = [_sizes(facts) for _, facts, _ in shown]
    if asked:
        def rank(i: int) -> int:
            found = {size.upper(): stock for size, stock in sizes[i].items()}
            return 0 if found.get(asked) else 1 if asked in found else 2

        order = sorted(range(len(shown)), key=rank)
        groups: dict[int, list[str]] = {0: [], 1: [], 2: []}
        for i in order:
            groups[rank(i)].append(_name(shown[i][1]))
        parts = []
        said = {0: _("In stock in {size}: {names}."), 1: _("Sold out in {size}: {names}."), 2: _("Not sold in {size}: {names}.")}
        for key, sentence in said.items():
            if groups[key]:
                parts.append(sentence.format(size=asked, names=listing(groups[key])))
        return order, " ".join(parts)
    order = sorted(range(len(shown)), key=lambda i: not sizes[i])
    parts = []
    for i in order:
        name = _name(shown[i][1])
        if not sizes[i]:
            parts.append(_("Our catalog lists no sizes for {name}.").format(name=name))
            continue
        listed = ", ".join(size if stock else sold_out(size) for size, stock in sizes[i].items())
        parts.append(_("Sizes of {name}: {sizes}.").format(name=name, sizes=listed))
    return order, " ".join(parts) + " " + _("Tell me your size and I'll check it.")


def names_another_kind(store: Store, text: str, shown: list[tuple[dict[str, Any], ProductFacts, Variant]]) -> bool:
    """"Which jackets are waterproof?" after tents were shown asks about jackets, not about those tents."""
    from catalog.grounding import product_types

    words = set(re.findall(r"[a-z]+", text.lower()))
    mine = {word for _, facts, _ in shown for word in re.findall(r"[a-z]+", f"{facts.title} {facts.product_type}".lower())}
    for kind in product_types(store, limit=50):
        kind_words = set(re.findall(r"[a-z]+", kind))
        singular = {word[:-1] for word in kind_words if word.endswith("s")}
        named = words & (kind_words | singular)
        if named and not (named & (mine | {word + "s" for word in mine})):
            return True
    return False


def compare(
    store: Store, text: str, cards: Sequence[dict[str, Any]], asked: tuple[str, bool] | None = None
) -> Compared | None:
    """The previous answer's ``cards`` ordered to answer ``text``, or None when ``text`` is not such a follow-up
    (or none of those products is sold any more). ``asked``: (attribute, ascending) when a planner read it,
    else read from ``text``."""
    planned = asked is not None  # a planner's reading of the message is not second-guessed from its words
    asked = asked or asked_attribute(text)
    if asked is None or not cards:
        return None
    shown = shown_products(store, cards)
    if not shown or (not planned and names_another_kind(store, text, shown)):
        return None
    attribute, ascending = asked
    order, reply = ordered(shown, attribute, ascending, text)
    return Compared(attribute, reply, [shown[i][0] for i in order], [shown[i][1] for i in order])


def ordered(
    shown: list[tuple[dict[str, Any], ProductFacts, Variant | None]], attribute: str, ascending: bool, text: str = ""
) -> tuple[list[int], str]:
    """The indexes of ``shown`` in the order that answers the comparison, and the sentence saying so."""
    if attribute == PRICE:
        return _by_price(shown, ascending)
    if attribute in MEASURES:
        return _by_measure(shown, attribute, ascending)
    if attribute == WATERPROOF:
        return _by_waterproofing(shown)
    return _by_size(shown, text)
