"""A return or an exchange checked against the store's returns policy (``policy.return_rules``): the window from
delivery, what cannot be returned in the state the shopper describes (worn footwear), sale items. The answer
quotes the sentence that decides (``Decision.policy``: the quote under the reply, not repeated in its text);
eligible items become a request for agents, never a change to the order."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.utils import timezone
from django.utils.translation import gettext as _

from catalog.models import Variant

from . import replies
from .conversations import EXCHANGE_WANTED, Requested, Waiting
from .models import Order, OrderLine, OrderRequest
from .policy import Exclusion, ReturnRules

# The shopper's words for the state a rule names ("I wore them on a hike" is worn)
_STATES = {
    "worn": re.compile(r"\b(?:wore|worn|wearing|hiked in|walked in|ran in|used them|used it)\b", re.I),
    "used": re.compile(r"\b(?:used|cooked with|lit)\b", re.I),
    "opened": re.compile(r"\b(?:opened|open(?:ed)? it|unsealed)\b", re.I),
}
_WORDS = re.compile(r"[a-z]+")
_IGNORED = frozenset("the a an my order from of and for with to i want return exchange it them these those in".split())


@dataclass
class Decision:
    sentences: list[str] = field(default_factory=list)
    policy: list[str] = field(default_factory=list)  # the policy's sentences quoted
    effects: list[object] = field(default_factory=list)


def _kind_words(line: OrderLine, store_id: int) -> str:
    variant = Variant.objects.filter(product__store_id=store_id, sku=line.sku).select_related("product").first() if line.sku else None
    product_type = variant.product.product_type if variant else ""
    return f"{product_type} {line.title}".lower()


def _matches(exclusion: Exclusion, kind_words: str) -> bool:
    words = [w.rstrip("s") for w in _WORDS.findall(exclusion.kind)]
    return bool(words) and all(w in kind_words for w in words)


def named_lines(order: Order, text: str) -> list[OrderLine]:
    """The lines the message names ("the boots"), or all of them when it names none."""
    lines = list(order.lines.all())
    said = {w.rstrip("s") for w in _WORDS.findall(text.lower())} - _IGNORED
    named = [line for line in lines if said & {w.rstrip("s") for w in _WORDS.findall(line.title.lower())}]
    return named or lines


def check(order: Order, text: str, rules: ReturnRules, kind: str, wanted: str = "") -> Decision:
    decision = Decision()
    if order.fulfillment_status == Order.Fulfillment.CANCELLED:
        decision.sentences.append(_(replies.ALREADY_CANCELLED).format(number=order.number))
        return decision
    if not order.shipped:
        decision.sentences.append(_(replies.NOT_SHIPPED_RETURN).format(number=order.number))
        return decision
    delivered = order.delivered_at
    if delivered is None:
        decision.sentences.append(_(replies.NOT_DELIVERED_YET).format(number=order.number))
        return decision
    days = (timezone.localdate() - timezone.localtime(delivered).date()).days
    if rules.window_days is not None and days > rules.window_days:
        decision.sentences.append(_(replies.OUTSIDE_WINDOW).format(
            number=order.number, date=replies.day(delivered), days=days))
        decision.policy.append(rules.window_sentence)
        return decision
    eligible = []
    for line in named_lines(order, text):
        refused = _refusal(line, text, rules, order.store_id)
        if refused:
            decision.sentences.append(_(replies.EXCLUDED).format(item=replies.line_text(line)))
            decision.policy.append(refused)
        else:
            eligible.append(line)
    if not eligible:
        return decision
    names = ", ".join(replies.line_text(line) for line in eligible)
    if kind == OrderRequest.Kind.EXCHANGE and not wanted:
        # An exchange for nothing said is no request an agent can act on: ask, and keep what was asked about.
        decision.sentences.append(_(replies.ASK_WANTED).format(items=names, number=order.number))
        decision.effects.append(Waiting(EXCHANGE_WANTED, order.number, text))
        return decision
    if kind == OrderRequest.Kind.EXCHANGE:
        extra = _(replies.FOR_WANTED).format(wanted=wanted) if wanted else ""
        decision.sentences.append(
            replies.requested(replies.EXCHANGE_REQUESTED, items=names, number=order.number, wanted=extra))
        quoted = rules.exchange_sentence or rules.window_sentence
    else:
        decision.sentences.append(replies.requested(replies.RETURN_REQUESTED, items=names, number=order.number))
        quoted = rules.window_sentence
    if quoted:  # shown as the answer's quote, not in its text (``replies.OUTSIDE_WINDOW``)
        decision.policy.append(quoted)
    decision.effects.append(Requested(kind, order.pk, tuple(replies.line_text(line) for line in eligible), wanted, text))
    return decision


def _refusal(line: OrderLine, text: str, rules: ReturnRules, store_id: int) -> str:
    """The policy sentence that refuses this line in the state the shopper described, or ""."""
    if line.on_sale and rules.sale_sentence:
        return rules.sale_sentence
    kind_words = _kind_words(line, store_id)
    for exclusion in rules.exclusions:
        said = _STATES.get(exclusion.state, re.compile(rf"\b{exclusion.state}\b", re.I))
        if said.search(text) and _matches(exclusion, kind_words):
            return exclusion.sentence
    return ""
