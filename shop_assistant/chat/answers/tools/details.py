"""``product_details``: a question about one product: "how long does its battery last?", "do you have it in L?",
"does the Summit backpack have a rain cover?".

The product is named or pointed at ("it": the latest answer's first card). Its catalog row is read again with
the question's words, so the card is the variant the question names ("in L"). The answer is the catalog's own:
the sizes or colours asked about from the variants, the stock, else the sentence of the product's description
closest in meaning to the question (the search's sentence embeddings), with "Yes." in front when that sentence
has every word the yes/no question asks about (``opening.settles``).
"""

from __future__ import annotations

import re

import numpy as np
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from pydantic import BaseModel, ConfigDict, Field

from catalog.grounding import ProductFacts
from catalog.passages import content_words
from catalog.search import query_vector
from catalog.text import split_sentences

from .. import comparison
from ..composition import NO_MATCH, Composition, no_match_reply
from ..opening import asks_yes_or_no, be_for, money, options_sentences, sale_sentence, settles, stock_sentence
from .references import Product, is_pointing, resolve
from .registry import Context, register

DETAILS = "details"


class DetailsArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    product: str = Field(min_length=1, max_length=120, description="the product's name, or 'it' for the one just shown")
    question: str = Field("", max_length=200, description="what the shopper wants to know about it, in English")


# What "how <degree> ...?" is answered with: a sentence giving its measure. By meaning alone, "how long does the
# battery last?" found the headlamp's "400 lumens of light charged over USB-C" over "Runs 40 hours on its lowest
# setting", and "how warm" the down bag's "hold the warmth in" over "keeps you comfortable to -7 °C".
_WEIGHT = r"\d\s*(?:kg|g)\b|\bweigh"
_HEIGHT = r"(?<!-)\bheight\b|\d\s*m\b"  # not "standing-height"
_SIZE = r"\d[\s-]*(?:l|litres?|liters?|cm|m)\b|\broom for\b"
_MEASURES = {
    "heavy": _WEIGHT, "light": _WEIGHT,
    "warm": r"-?\d+(?:[.,]\d+)?\s*°\s*C|\bcomfortable to\b",
    "tall": _HEIGHT, "high": _HEIGHT,
    "big": _SIZE, "large": _SIZE, "roomy": _SIZE, "small": _SIZE,
    "bright": r"\blumens?\b",
    "volume": r"\d[\s-]*(?:l|litres?|liters?|ml)\b",
    "long": r"\bhours?\b|\bminutes?\b|\blength\b|\d\s*cm\b",
    "fast": r"\bminutes?\b|\bseconds?\b",
}  # fmt: skip
# Degrees only a figure answers: "how heavy is the stove?" is not answered by "boils a litre in three minutes"
# (while "how warm is the fleece?" is by "a soft, warm mid layer").
_FIGURE_ONLY = frozenset({"heavy", "light", "tall", "high", "bright", "volume"})
DEGREES = frozenset(_MEASURES)  # "how <degree> is it?": what a description can give a figure or a word for
_VOLUME = re.compile(r"\bhow many (?:litres?|liters?|l)\b|\bvolume\b|\bhow much (?:does|can|will) .+ hold\b", re.I)
_HOW = re.compile(r"\bhow\s+([a-z]+)\b|\b([a-z]+)\s+enough\b", re.IGNORECASE)  # "how warm", "warm enough"


def _degree(question: str) -> str:
    if re.search(r"\bweigh(?:s|t)?\b", question, re.IGNORECASE):
        return "heavy"  # "how much does it weigh?", "what's its weight?"
    if _VOLUME.search(question):
        return "volume"  # "how many litres is it?", "what's its volume?"
    how = _HOW.search(question)
    word = (how.group(1) or how.group(2)).lower() if how else ""
    return word if word in _MEASURES else ""


def _measured(sentences: list[str], question: str) -> list[str]:
    """The sentences that give the measure a "how <degree>" question asks for; when none does, all of them, or
    none for a degree only a figure answers."""
    degree = _degree(question)
    if not degree:
        return sentences
    giving = [sentence for sentence in sentences if re.search(_MEASURES[degree], sentence, re.IGNORECASE)]
    return giving or ([] if degree in _FIGURE_ONLY else sentences)


def closest_sentence(facts: ProductFacts, question: str, among: list[str] | None = None) -> str | None:
    """The sentence of the product's description (or of ``among``) that answers ``question`` best, by meaning,
    among those that give the measure asked for ("how heavy": a weight)."""
    sentences = _measured(split_sentences(facts.description, starts_upper=True) if among is None else among, question)
    if not sentences:
        return None
    asked = query_vector(question)
    scores = [float(np.dot(query_vector(sentence), asked)) for sentence in sentences]
    return sentences[int(np.argmax(scores))]


_TEMPERATURE = re.compile(r"(-?\d+(?:[.,]\d+)?)\s*(?:°\s*C|degrees?(?: c(?:elsius)?)?|ºC)", re.IGNORECASE)
# "warm enough for -5?": a bare figure after "warm enough for" is a temperature
_BARE_TEMPERATURE = re.compile(r"\bwarm enough for\s+(-?\d+(?:[.,]\d+)?)\s*[?.!]*$", re.IGNORECASE)
# "a sleeping bag for -20": a figure below zero is no price, no count and no weight
_BELOW_ZERO = re.compile(r"\bfor\s+(-\d+(?:[.,]\d+)?)(?![\w.,%])")
_DOWN_TO = re.compile(r"\b(?:to|down to|rated (?:to|for)|comfort(?:able)? (?:to|at))\s*(-?\d+(?:[.,]\d+)?)\s*°\s*C", re.I)


def asked_temperature(question: str) -> float | None:
    """The temperature, in °C, that "warm enough for -5 degrees?" or "a sleeping bag for -5 °C" asks about."""
    question = re.sub(r"\bminus\s+(?=\d)", "-", question, flags=re.IGNORECASE)  # "minus 5 degrees"
    asked = _TEMPERATURE.search(question) or _BARE_TEMPERATURE.search(question) or _BELOW_ZERO.search(question)
    return float(asked.group(1).replace(",", ".")) if asked else None


def _warm_enough(question: str, sentence: str) -> str | None:
    """"Yes."/"No." for "warm enough for -5 degrees?" against a rating the sentence gives ("comfortable to -7 °C")."""
    asked, rated = asked_temperature(question), _DOWN_TO.search(sentence)
    if asked is None or rated is None:
        return None
    return "Yes." if float(rated.group(1).replace(",", ".")) <= asked else "No."


_ROOT = 6  # letters two words share at the start to be one word's forms: "collapsible", "collapse"
# Verbs any question of a product has: "does it fit a laptop?" is not answered by "Fits a 3-litre bladder".
_GENERIC = frozenset(content_words("fit hold take come use work go get need have make"))


def _shares_a_word(question: str, sentence: str, facts: ProductFacts) -> bool:
    """The sentence has a word the question asks about, the product's own name left out; "collapsible" meets
    "collapse", "breathable" "breathe" (the stems only fold plurals and "-ing")."""
    asked = content_words(question) - content_words(facts.title) - _GENERIC
    said = content_words(sentence)
    return bool(asked & said) or any(
        len(a) >= _ROOT and len(b) >= _ROOT and a[:_ROOT] == b[:_ROOT] for a in asked for b in said
    )


def sentence_sharing(facts: ProductFacts, question: str) -> str | None:
    """The closest sentence among those that share a word with the question: "Is the hammock easy to set up?"
    is answered by "Sets up between two trees in a minute.", not the closer "A roomy ... hammock"."""
    sentences = split_sentences(facts.description, starts_upper=True)
    sharing = [sentence for sentence in sentences if _shares_a_word(question, sentence, facts)]
    return closest_sentence(facts, question, among=sharing) if sharing else None


_FREE_OF = re.compile(r"\b([a-z]+)-free\b", re.IGNORECASE)  # "itch-free", "BPA-free"


def _said_free(facts: ProductFacts, question: str) -> str | None:
    """The description's sentence calling the product free of what the yes/no question asks about: "Is the beanie
    itchy?" of "a soft, itch-free merino beanie" (a "No."); not "is it BPA free?" (that is the sentence's word)."""
    if not asks_yes_or_no(question) or re.search(r"\bfree\b", question, re.IGNORECASE):
        return None
    asked = {word.lower() for word in re.findall(r"[a-z]+", question, re.IGNORECASE)}
    for sentence in split_sentences(facts.description, starts_upper=True):
        for root in (match.group(1).lower() for match in _FREE_OF.finditer(sentence)):
            if asked & {root, f"{root}y", f"{root}s", f"{root}ing"}:
                return sentence
    return None


def _named_so(question: str, facts: ProductFacts) -> str | None:
    """"Yes." when the product's own name has every word the yes/no question asks ("Is the headlamp
    rechargeable?" of the Beam 400 Rechargeable Headlamp): the name is the catalog's word on it. Never "No.": a
    name says what a product is, not what it is not."""
    return "Yes." if settles(question, facts.title) == "Yes." else None


# What the catalog does not give, said in the shopper's language (a degree only a figure answers: ``_FIGURE_ONLY``).
_UNGIVEN = {
    "heavy": gettext_noop("Our catalog doesn't give the weight of the {title}."),
    "light": gettext_noop("Our catalog doesn't give the weight of the {title}."),
    "tall": gettext_noop("Our catalog doesn't give the height of the {title}."),
    "high": gettext_noop("Our catalog doesn't give the height of the {title}."),
    "bright": gettext_noop("Our catalog doesn't give the brightness of the {title}."),
    "volume": gettext_noop("Our catalog doesn't give the volume of the {title}."),
}
ASK_A_PERSON = gettext_noop("A member of our team can help: ask for a person.")


# "How much is it?", a model's plan of "¿Cuánto cuesta la linterna frontal?": the price, from the variant's row.
_ASKS_PRICE = re.compile(  # not "how much does it weigh?"; in the languages the answers are written in too
    r"\bhow much\b(?!.*\b(?:weigh|hold))|\bprice[sd]?\b|\bcosts?\b"
    r"|\bcu[áa]nto\b|\bprecios?\b|\bcuestan?\b|\bcombien\b|\bprix\b|\bco[ûu]tent?\b|\bwie ?viel\b|\bpreise?\b|\bkostet\b",
    re.IGNORECASE,
)


def asks_price(question: str) -> bool:
    """"How much is it?", "what does it cost?", "price?": the question asks what something costs."""
    return bool(_ASKS_PRICE.search(question))


def _answer(facts: ProductFacts, question: str) -> str:
    said = options_sentences(facts, question)
    stock = stock_sentence(facts, question)
    if said or stock:
        return " ".join([*said, *([stock] if stock and stock not in said else [])])
    if asks_price(question):
        costs = _("The {title} costs {price}.") if be_for(facts.title) == "is" else _("The {title} cost {price}.")
        priced = costs.format(title=facts.title, price=money(facts.price, facts.currency))
        sale = [sale_sentence(facts)] if facts.on_sale else []
        return " ".join([priced, *sale, *([stock_sentence(facts, "in stock")] if not facts.in_stock else [])])
    free = _said_free(facts, question)
    if free is not None:
        return f"{_('No.')} " + _("The {title}: {sentence}").format(title=facts.title, sentence=free)
    sentence = closest_sentence(facts, question)
    # no sentence of the description gives a volume: the name may ("Insulated Steel Water Bottle 750 ml")
    volume = comparison.volume_of(facts) if sentence is None and _degree(question) == "volume" else None
    if volume is not None:
        return _("The {title} holds {volume}.").format(title=facts.title, volume=volume[1])
    if sentence is None:
        unsaid = _UNGIVEN.get(_degree(question), gettext_noop("Our catalog doesn't say more about the {title}."))
        return f"{_(unsaid).format(title=facts.title)} {_(ASK_A_PERSON)}"
    # The sentence is said of the product: its name's words count as said ("Does the family tent have a divider?" of
    # "A divider turns it into two bedrooms.")
    verdict = _warm_enough(question, sentence) or settles(question, f"{facts.title}: {sentence}") or _named_so(question, facts)
    if verdict is None and not _degree(question) and not _shares_a_word(question, sentence, facts):
        # "Is it waterproof?" of the fleece found "wear it ... under a shell when the weather turns": the closest
        # sentence by meaning, but no answer; one that has the word asked about may be further by meaning.
        sentence = sentence_sharing(facts, question)
        if sentence is None:
            unsaid = _("Our catalog doesn't say that about the {title}.").format(title=facts.title)
            return f"{unsaid} {_(ASK_A_PERSON)}"
        verdict = settles(question, f"{facts.title}: {sentence}")
    ended = sentence if sentence[-1] in ".!?" else f"{sentence}."  # a list item ("Packed weight 1.6 kg")
    quoted = _("The {title}: {sentence}").format(title=facts.title, sentence=ended)
    return f"{_(verdict)} {quoted}" if verdict else quoted


def _reread(context: Context, product: Product, question: str) -> Product:
    """The same product read with the question's words: the variant it names ("in L")."""
    asked = f"{product.facts.title} {question}"
    retrieved = context.retrieve(context.store, asked, k=1)
    if retrieved.products and retrieved.products[0].title == product.facts.title:
        return Product(retrieved.cards[0], retrieved.products[0])
    # The grounding's filters may drop the product ("in size L, charcoal"); the variant the words name still
    # comes from the catalog search, never the default variant shown as if it were the one asked about.
    named = resolve(context.store, asked)
    return named[0] if named and named[0].facts.title == product.facts.title else product


@register(
    "product_details",
    "Answer a question about one product (its features, materials, battery, warmth, weight, sizes or colours in "
    "stock): by name, or 'it' for the product just shown.",
    DetailsArguments,
    examples=(
        ("How long does its battery last?", {"product": "it", "question": "how long does the battery last"}),
        ("Does the stove come with a case?", {"product": "stove", "question": "does it come with a case"}),
        ("Wie schwer ist das Zelt?", {"product": "tent", "question": "how heavy is it"}),
    ),
)
def product_details(context: Context, arguments: DetailsArguments) -> Composition:
    found = resolve(context.store, arguments.product, context.shown)
    if not found:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    question = arguments.question or context.text
    product = _reread(context, found[0], question)
    # The shopper's own words decide what is asked of the options ("in L"); the planner's may be a translation.
    asked = question if question == context.text or context.language != "en" else f"{context.text} {question}"
    if is_pointing(arguments.product):  # "does the warmer one have a hood?" asks of a hood, not of warmth
        asked = re.sub(rf"\b{re.escape(arguments.product)}\b", "it", asked, flags=re.IGNORECASE)
    reply = _answer(product.facts, asked)
    return Composition(DETAILS, reply=reply, cards=[product.card], products=[product.facts])
