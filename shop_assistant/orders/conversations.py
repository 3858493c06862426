"""A conversation's order: the state the chat keeps (``ConversationOrder``) and the changes an answer asks for,
applied after the answer is planned (planning only reads: the studio's preview plans too, and must change nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from . import webhooks
from .models import ConversationOrder, Order, OrderRequest


@dataclass(frozen=True)
class OrderState:
    """What the planner and the order tools read: the verified order, or what the chat is waiting for."""

    order: Order | None = None
    via: str = ""
    waiting_for: str = ""  # the order tool that asked the shopper for a number or an email, or EXCHANGE_WANTED
    number_given: str = ""
    pending_text: str = ""  # the shopper's words the question is about ("exchange the boots..."), for the answer


# What ``waiting_for`` holds after the chat asked which size or colour an exchange is for: the next message that
# says one ("size 10", "a 10", "in black") makes the exchange request, of the items the asking message named.
EXCHANGE_WANTED = "exchange_wanted"


@dataclass(frozen=True)
class Waiting:
    intent: str
    number: str = ""
    text: str = ""  # what the shopper asked, kept for the answer to the question (``OrderState.pending_text``)


@dataclass(frozen=True)
class Verified:
    order_id: int
    via: str
    intent: str = ""


@dataclass(frozen=True)
class Requested:
    kind: str
    order_id: int
    lines: tuple[str, ...] = ()
    wanted: str = ""
    reason: str = ""


def state_of(conversation: Any) -> OrderState | None:
    if conversation is None or getattr(conversation, "pk", None) is None:
        return None
    row = ConversationOrder.objects.filter(conversation_id=conversation.pk).select_related("order").first()
    if row is None:
        return None
    return OrderState(row.order if row.verified_at else None, row.verified_via, row.waiting_for, row.number_given,
                      row.pending_text)


@transaction.atomic
def apply(conversation: Any, effects: list[Any]) -> list[OrderRequest]:
    """Record what an answer did: a lookup waiting for the email, an order verified, a request for agents."""
    made = []
    for effect in effects:
        if isinstance(effect, Waiting):
            ConversationOrder.objects.update_or_create(
                conversation_id=conversation.pk, defaults={"waiting_for": effect.intent, "number_given": effect.number,
                                                           "pending_text": effect.text[:2000]})
        elif isinstance(effect, Verified):
            ConversationOrder.objects.update_or_create(conversation_id=conversation.pk, defaults={
                "order_id": effect.order_id, "verified_via": effect.via, "verified_at": timezone.now(),
                "waiting_for": "", "number_given": "", "pending_text": ""})
        elif isinstance(effect, Requested):
            # The question asked (which size?) is answered: the next message is read afresh.
            ConversationOrder.objects.filter(conversation_id=conversation.pk).update(
                waiting_for="", number_given="", pending_text="")
            order = Order.objects.get(pk=effect.order_id)
            pending = OrderRequest.objects.filter(order=order, kind=effect.kind, status=OrderRequest.Status.PENDING,
                                                  conversation_id=conversation.pk)
            if not pending.exists():  # asking twice in a chat makes one request
                made.append(OrderRequest.objects.create(
                    store_id=order.store_id, order=order, conversation_id=conversation.pk, kind=effect.kind,
                    lines=list(effect.lines), wanted=effect.wanted, reason=effect.reason[:2000]))
                webhooks.announce(made[-1], webhooks.CREATED)  # the owner's webhook hears of it after the commit
    return made
