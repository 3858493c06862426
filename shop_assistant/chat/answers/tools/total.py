"""``price_total``: what several products cost together, or how much more one costs than another.

Quantities times the variants' prices, summed in Decimal; the sentence shows every term, so the shopper can check
the sum. A product the catalog has nothing for is said to be left out, never guessed. The sentences are translated
(composed under the shopper's language); titles and prices go in unchanged.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from django.utils.translation import gettext as _
from pydantic import BaseModel, ConfigDict, Field

from ..composition import NO_MATCH, Composition, no_match_reply
from ..opening import listing, money
from .references import Product, resolve
from .registry import Context, register

TOTAL = "total"


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    product: str = Field(description="the product as the shopper names it, or 'it' / 'both' for the ones shown")
    quantity: int = Field(1, ge=1, le=99)


class TotalArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item] = Field(min_length=1, max_length=8)
    operation: Literal["sum", "difference"] = "sum"


def _term(quantity: int, product: Product) -> str:
    facts = product.facts
    name = f"{facts.title} ({facts.variant})" if facts.variant else facts.title
    price = money(facts.price, facts.currency)
    if quantity == 1:
        return f"{name} {price}"
    return _("{quantity} × {name} at {price}").format(quantity=quantity, name=name, price=price)


def stock_notes(products: list[Product]) -> list[str]:
    out = [p.facts for p in products if not p.facts.in_stock]
    return [_("The {title} is out of stock right now.").format(title=facts.title) for facts in out]


def terms_sentence(lines: list[tuple[int, Product]]) -> str:
    """"2 × Merino Hiking Socks (3-Pack) (S) at 24.00 USD + Titanium Camp Mug 450 ml 27.00 USD = 75.00 USD in total.":
    every term, so the shopper can check the sum; one product alone: its term."""
    if len(lines) == 1 and lines[0][0] == 1:  # one thing: its price is the sum ("... 249.00 USD = 249.00 USD" is noise)
        return f"{_term(*lines[0])}."
    currency = lines[0][1].facts.currency
    total = sum((quantity * p.facts.price for quantity, p in lines), Decimal("0"))
    terms = " + ".join(_term(quantity, p) for quantity, p in lines)
    return _("{terms} = {total} in total.").format(terms=terms, total=money(total, currency))


def left_out_sentence(missing: list[str]) -> str:
    """What the total leaves out: the phrases the catalog has nothing for."""
    names = listing([repr(m) for m in missing], "or")
    return _("I couldn't find {names} in our catalog, so the total leaves it out.").format(names=names)


def _sum(lines: list[tuple[int, Product]], missing: list[str]) -> str:
    if len(lines) > 1 or lines[0][0] > 1:
        sentence = terms_sentence(lines)
    else:
        facts = lines[0][1].facts
        sentence = _("The {title} costs {price}.").format(title=facts.title, price=money(facts.price, facts.currency))
    return " ".join([sentence, *([left_out_sentence(missing)] if missing else [])])


def difference_sentence(first: Product, second: Product) -> str:
    a, b = first.facts, second.facts
    if a.price == b.price:
        return _("The {first} and the {second} cost the same: {price}.").format(
            first=a.title, second=b.title, price=money(a.price, a.currency)
        )
    high, low = (a, b) if a.price > b.price else (b, a)
    return _("The {high} ({high_price}) costs {difference} more than the {low} ({low_price}).").format(
        high=high.title,
        high_price=money(high.price, high.currency),
        difference=money(high.price - low.price, high.currency),
        low=low.title,
        low_price=money(low.price, low.currency),
    )


@register(
    "price_total",
    "Add up what products cost together (quantities times prices), or the price difference between two products.",
    TotalArguments,
    examples=(
        ("The stove and three mugs, what does that come to?",
         {"items": [{"product": "stove", "quantity": 1}, {"product": "mug", "quantity": 3}], "operation": "sum"}),
        ("How much more is the big pack than the small one?",
         {"items": [{"product": "big pack", "quantity": 1}, {"product": "small pack", "quantity": 1}],
          "operation": "difference"}),
    ),
)
def price_total(context: Context, arguments: TotalArguments) -> Composition:
    lines: list[tuple[int, Product]] = []
    missing: list[str] = []
    for item in arguments.items:
        found = resolve(context.store, item.product, context.shown)
        if not found:
            missing.append(item.product)
        lines += [(item.quantity, product) for product in found]
    if not lines:
        return Composition(NO_MATCH, reply=no_match_reply(context.store, context.text))
    products = [p for _, p in lines]
    if arguments.operation == "difference" and len(lines) == 2:
        reply = difference_sentence(lines[0][1], lines[1][1])
    else:
        reply = _sum(lines, missing)
    reply = " ".join([reply, *stock_notes(products)])
    return Composition(TOTAL, reply=reply, cards=[p.card for p in products], products=[p.facts for p in products])
