"""``fit_budget``: one product of each kind asked for, together within the shopper's budget: "I need a tent and
a sleeping bag for a summer trip, budget 400", "tent and sleeping bag for under 350 total?".

Each kind's products are the catalog search's hits called that kind (by the words of their titles and types, as
the rule planner's ``_called``), best match first, those in stock before those sold out. The pick is the set, one
per kind, that fits the budget with the best matches (the lowest sum of ranks; the lower total on a tie). The
sentence shows every price and the sum, as ``price_total``'s does, and says the budget; when no set fits, it says
so with the least the kinds cost together, never a set over the budget as if it fitted. A kind the catalog has
nothing of is said to be left out.
"""

from __future__ import annotations

import itertools
import re
from decimal import Decimal

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field

from catalog.asked import is_called
from catalog.grounding import card, product_facts
from catalog.models import Store
from catalog.search import MATCH_THRESHOLD, search

from ..composition import NO_MATCH, Composition, no_match_reply
from ..opening import money
from .capacity import NUMBERS, CapacityArguments, capacity_of, fits
from .details import asked_temperature
from .references import Product
from .registry import Context, register
from .search import Price
from .total import TOTAL, left_out_sentence, stock_notes, terms_sentence

CHOICES = 4  # products of each kind weighed: 4 kinds of 4 are 256 sets, checked in microseconds


class KitArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[str] = Field(
        min_length=2, max_length=4,
        description="each kind of product asked for, in English catalog words ('tent', 'sleeping bag'), with what "
        "it must be for when the shopper says ('tent for 2', 'sleeping bag for -5')",
    )
    budget: Price = Field(description="the most the shopper wants to spend on all of them together")


# What one item must be for: "a sleeping bag for -5", "a tent for 2" (the figure below zero a temperature); not a
# count of something else ("a tent for 3 nights").
_FOR = re.compile(
    r"\s+for\s+((?:minus\s+|-)?\d+(?:[.,]\d+)?|two|three|four|five|six)\b"
    r"(?!\s*(?:nights?|days?|weeks?|months?|years?|hours?|minutes?|seasons?|kg|dollars?|bucks|euros?|usd)\b).*$",
    re.IGNORECASE,
)


def requirement(phrase: str) -> tuple[str, CapacityArguments | None]:
    """The kind an item names and what it must be for: ("sleeping bag", temperature -5) for "sleeping bag for -5"."""
    match = _FOR.search(phrase)
    if match is None:
        return phrase, None
    kind, figure = phrase[: match.start()], match.group(1).lower()
    temperature = asked_temperature(match.group(0))
    if temperature is not None:
        return kind, CapacityArguments(product=kind, temperature_c=temperature)
    people = int(figure) if figure.isdigit() else NUMBERS.get(figure)
    return kind, CapacityArguments(product=kind, people=people) if people else None


def choices(store: Store, phrase: str) -> list[Product]:
    """The products of the kind ``phrase`` names, best match first, those in stock first; one card per product.
    With what it must be for ("a tent for 2", "a sleeping bag for -5"), only those whose own text says they are."""
    phrase, required = requirement(phrase)
    hits = search(phrase, CHOICES * 2, store=store)
    hits = [hit for hit in hits if hit.variant is not None and hit.score >= MATCH_THRESHOLD]
    seen: set[str] = set()
    kind = []
    for hit in hits:  # a tent by "tent", not the headlamp whose text has "tent mate"
        if is_called(phrase, hit.product.title, hit.product.product_type) and hit.product.title not in seen:
            seen.add(hit.product.title)
            kind.append(Product(card(hit), product_facts(hit)))
    if required is not None:
        kind = [p for p in kind if fits(capacity_of(p.facts), required)]
    return sorted(kind, key=lambda p: not p.facts.in_stock)[:CHOICES]  # stable: the match order within each


def best_within(kinds: list[list[Product]], budget: Decimal) -> tuple[Product, ...] | None:
    """One product of each kind, together at most ``budget``: the best-ranked set, then the cheaper; None when no
    set fits."""
    fitting = [
        (sum(ranks), total, tuple(kind[rank] for kind, rank in zip(kinds, ranks)))
        for ranks in itertools.product(*(range(len(kind)) for kind in kinds))
        if (total := sum((kind[rank].facts.price for kind, rank in zip(kinds, ranks)), Decimal("0"))) <= budget
    ]
    return min(fitting, key=lambda fit: fit[:2])[2] if fitting else None


def _cheapest(kinds: list[list[Product]]) -> tuple[Product, ...]:
    return tuple(min(kind, key=lambda p: p.facts.price) for kind in kinds)


@register(
    "fit_budget",
    "Pick one product of each kind the shopper needs so that all of them together stay within their budget "
    "('a tent and a sleeping bag, budget 400').",
    KitArguments,
    examples=(
        ("I need a tent and a sleeping bag for a summer trip, budget 400",
         {"items": ["tent", "sleeping bag"], "budget": 400}),
        ("Una mochila y una linterna frontal por menos de 200 en total", {"items": ["backpack", "headlamp"], "budget": 200}),
    ),
)
def fit_budget(context: Context, arguments: KitArguments) -> Composition:
    found = [(item, choices(context.store, item)) for item in arguments.items]
    kinds = [products for _, products in found if products]
    missing = [item for item, products in found if not products]
    if not kinds:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    currency = kinds[0][0].facts.currency
    budget = money(arguments.budget, currency)
    picked = best_within(kinds, arguments.budget)
    if picked is not None:
        sentence = _("Within your budget of {budget}: {sum}")
    else:  # never a set over the budget as if it fitted: the least it takes, said as that
        picked = _cheapest(kinds)
        sentence = _("Nothing we have fits a budget of {budget} for all of these; the least they come to is {sum}")
    sentence = sentence.format(budget=budget, sum=terms_sentence([(1, product) for product in picked]))
    reply = " ".join([sentence, *stock_notes(list(picked)), *([left_out_sentence(missing)] if missing else [])])
    return Composition(TOTAL, reply=reply, cards=[p.card for p in picked], products=[p.facts for p in picked])
