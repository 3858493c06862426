"""``check_capacity``: is a product big, strong or warm enough: "is the tent big enough for three?", "does the
cookset cook for four?", "will the chair hold 110 kg?", "is the sleeping bag warm enough for -5?".

The capacity is read from the product's own title and description ("2-Person", "room for six", "cooks dinner for
two", "holds up to 120 kg", "comfortable to -7 °C"); the answer says yes or no with the catalog's words, and names
the products of the same kind that do fit. When the catalog does not say, the answer says that. The sentences are
translated (the shopper's language); the catalog's own words ("room for six") are quoted as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import get_language, ngettext, pgettext
from pydantic import BaseModel, ConfigDict, Field

from catalog.grounding import ProductFacts, card, product_facts
from catalog.search import MATCH_THRESHOLD, search

from .. import comparison
from ..composition import NO_MATCH, Composition, no_match_reply
from ..opening import listing, money
from .details import asks_price
from .references import Product, pointed_at
from .registry import Context, register

CAPACITY = "capacity"
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "eleven": 11, "twelve": 12}  # fmt: skip
_COUNT = r"(\d{1,2}|" + "|".join(NUMBERS) + r")"
# How the catalog says how many people a product is for, the count in group 1.
_PEOPLE = (
    re.compile(rf"\b{_COUNT}[- ](?:person|people|man|p)\b", re.I),
    re.compile(rf"\b(?:room|space|sleeps|serves|seats|fits|cooks? (?:dinner |meals? )?)\s*(?:for\s+)?(?:up to\s+)?{_COUNT}\b", re.I),
    re.compile(rf"\bfor {_COUNT}\b(?! (?:days?|nights?|hours?|years?|minutes?|seasons?))", re.I),
)
_LOAD = re.compile(r"\b(?:holds?|supports?|carries|load(?: limit)?(?: of)?|capacity(?: of)?)\s+(?:up to\s+)?(\d{2,4})\s*kg\b", re.I)


class CapacityArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    product: str = Field(description="the product or the kind of product asked about ('Ridgeline tent', 'tent')")
    # Neither: "how many people does the Basecamp tent sleep?", what the product is made for.
    people: int | None = Field(None, ge=1, le=50, description="how many people it must be for")
    weight_kg: float | None = Field(None, gt=0, le=1000, description="the weight it must hold, in kg")
    temperature_c: float | None = Field(
        None, ge=-60, le=40, description="the coldest temperature it must keep the shopper warm at, in °C"
    )


@dataclass(frozen=True)
class Capacity:
    people: int | None
    people_words: str  # the catalog's words: "for two"
    people_word: str  # the count as the catalog writes it: "two", "2"
    load_kg: int | None
    people_in: str = "description"  # where those words are: "name" (the title) or "description"
    comfort: tuple[float, str] | None = None  # (°C, the catalog's words: "-7 °C") of its comfort rating


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word.lower()]


def capacity_of(facts: ProductFacts) -> Capacity:
    """The people and the load the product's own text gives, with the words it uses."""
    text = f"{facts.title}. {facts.description}"
    people, words, word, where = None, "", "", "description"
    for pattern in _PEOPLE:
        match = pattern.search(text)
        if match:
            people, words, word = _count(match.group(1)), match.group(0), match.group(1).lower()
            where = "name" if match.start() < len(facts.title) else "description"
            break
    load = _LOAD.search(text)
    load_kg = int(load.group(1)) if load else None
    return Capacity(people, words, word, load_kg, where, comparison.comfort_temperature(facts))


def fits(capacity: Capacity, arguments: CapacityArguments) -> bool | None:
    """True or False when the catalog says, None when it does not."""
    checks = []
    if arguments.people is not None:
        checks.append(None if capacity.people is None else capacity.people >= arguments.people)
    if arguments.weight_kg is not None:
        checks.append(None if capacity.load_kg is None else capacity.load_kg >= arguments.weight_kg)
    if arguments.temperature_c is not None:
        checks.append(None if capacity.comfort is None else capacity.comfort[0] <= arguments.temperature_c)
    if None in checks:
        return None
    return all(checks)


def _need(arguments: CapacityArguments) -> str:
    parts = []
    if arguments.people is not None:
        parts.append(ngettext("{count} person", "{count} people", arguments.people).format(count=arguments.people))
    if arguments.weight_kg is not None:
        parts.append(f"{arguments.weight_kg:g} kg")
    if arguments.temperature_c is not None:
        parts.append(f"{arguments.temperature_c:g} °C")
    return _and(parts)


def _and(parts: list[str]) -> str:
    """"2 people and 100 kg"."""
    return f" {pgettext('list', 'and')} ".join(parts)


def _says(facts: ProductFacts, capacity: Capacity, priced: bool = False, warmth: bool = False) -> str:
    """"the Basecamp 6 Family Tent is made for six people"; ``priced``: with its price after the name (the
    shopper asked "how much"); ``warmth``: with its comfort rating (a temperature was asked)."""
    said = []
    if capacity.people is not None:
        said.append(
            ngettext("is made for {count} person", "is made for {count} people", capacity.people).format(
                # the catalog's own word ("two") in English; a figure in a translated sentence ("pour 2 personnes")
                count=capacity.people_word if (get_language() or "en").startswith("en") else capacity.people
            )
        )
    if capacity.load_kg is not None:
        said.append(_("holds up to {kg} kg").format(kg=capacity.load_kg))
    if warmth and capacity.comfort is not None:
        said = [_("is comfortable to {temperature}").format(temperature=capacity.comfort[1])]
    title = f"{facts.title} ({money(facts.price, facts.currency)})" if priced else facts.title
    return _("the {title} {facts}").format(title=title, facts=_and(said))


def _candidates(context: Context, phrase: str) -> list[Product]:
    """The products of one kind the phrase means: the cards it points at ("those" after the tents), else the
    first hit's kind."""
    pointed = pointed_at(context.store, phrase, context.shown)
    if pointed is not None:
        return pointed
    hits = [h for h in search(phrase, 6, store=context.store) if h.variant is not None and h.score >= MATCH_THRESHOLD]
    if not hits:
        return []
    kind = hits[0].product.product_type
    return [Product(card(h), product_facts(h)) for h in hits if h.product.product_type == kind]


def _others_of_kind(context: Context, product: Product) -> list[Product]:
    """The other products of ``product``'s type: what fits when it does not ("Is the Breeze warm enough for -5?")."""
    kind = product.facts.product_type
    if not kind:
        return []
    hits = [h for h in search(kind, 6, store=context.store) if h.variant is not None and h.product.product_type == kind]
    return [Product(card(h), product_facts(h)) for h in hits if h.product.title != product.facts.title]


def _named(phrase: str, candidates: list[Product]) -> Product | None:
    """The one candidate the phrase names by a word of its title that the others lack ("Ridgeline")."""
    words = set(re.findall(r"[a-z0-9]+", phrase.lower()))
    own = [set(re.findall(r"[a-z0-9]+", p.facts.title.lower())) for p in candidates]
    named = [p for i, p in enumerate(candidates) if words & (own[i] - set().union(*(o for j, o in enumerate(own) if j != i)))]
    return named[0] if len(named) == 1 else None


@register(
    "check_capacity",
    "Whether a product (or which product of a kind) is big, strong or warm enough: for a number of people, a weight "
    "or a temperature; with none, how many people it is made for.",
    CapacityArguments,
    examples=(
        ("Does the hammock take two people?", {"product": "hammock", "people": 2}),
        ("Can the stool hold 95 kg?", {"product": "stool", "weight_kg": 95}),
        ("How many people does the canoe take?", {"product": "canoe"}),
        ("Is the quilt warm enough for minus 10?", {"product": "quilt", "temperature_c": -10}),
    ),
)
def check_capacity(context: Context, arguments: CapacityArguments) -> Composition:
    candidates = _candidates(context, arguments.product)
    if not candidates:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    named = _named(arguments.product, candidates) if len(candidates) > 1 else candidates[0]
    if arguments.people is None and arguments.weight_kg is None and arguments.temperature_c is None:
        return _how_many(named or candidates[0])
    # The snuggest fit first: "the best tent for two" is the one made for two, then the one with room for six.
    fitting = sorted((p for p in candidates if fits(capacity_of(p.facts), arguments)), key=_size)
    need, priced, warmth = _need(arguments), asks_price(context.text), arguments.temperature_c is not None
    sentences = []
    if named is not None:
        capacity = capacity_of(named.facts)
        verdict = fits(capacity, arguments)
        if verdict is False and not [p for p in fitting if p is not named]:  # the one named does not: what does
            others = [p for p in _others_of_kind(context, named) if fits(capacity_of(p.facts), arguments)]
            fitting = sorted(others, key=_size)
        if verdict is None:
            sentence = _("Our catalog doesn't say whether the {title} is right for {need}.")
            sentences.append(sentence.format(title=named.facts.title, need=need))
        else:
            sentence = _("Yes: {says}.") if verdict else _("No: {says}.")
            sentences.append(sentence.format(says=_says(named.facts, capacity, priced, warmth)))
        fitting = [p for p in fitting if p is not named]
        if verdict and fitting:
            fitting = []
    if fitting:
        names = listing([_says(p.facts, capacity_of(p.facts), priced, warmth) for p in fitting])
        sentences.append(_("For {need}: {names}.").format(need=need, names=names))
    elif named is None:
        kind = candidates[0].facts.product_type.lower() or _("products")
        sentences.append(_("None of our {kind} says it is made for {need}.").format(kind=kind, need=need))
    shown = ([named] if named is not None else []) + fitting
    shown = shown or candidates[:2]
    return Composition(CAPACITY, reply=" ".join(sentences), cards=[p.card for p in shown], products=[p.facts for p in shown])


def _size(product: Product) -> tuple[int, int, float]:
    capacity = capacity_of(product.facts)
    return capacity.people or 0, capacity.load_kg or 0, -capacity.comfort[0] if capacity.comfort else 0.0


def made_for(facts: ProductFacts) -> str | None:
    """What one product is made for, as its own text says: "The Basecamp 6 Family Tent is made for six people.";
    None when it does not say."""
    capacity = capacity_of(facts)
    if capacity.people is None and capacity.load_kg is None:
        return None
    says = _says(facts, capacity)
    return f"{says[:1].upper()}{says[1:]}."


def _how_many(product: Product) -> Composition:
    reply = made_for(product.facts) or _("Our catalog doesn't say how many people the {title} is made for.").format(
        title=product.facts.title
    )
    return Composition(CAPACITY, reply=reply, cards=[product.card], products=[product.facts])
