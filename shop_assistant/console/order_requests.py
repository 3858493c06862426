"""Agents decide the return, exchange and cancellation requests the chat started: accept or decline, with a
note; the shopper is told the outcome in the widget, as a message of the conversation. Deciding changes the
request only: the store's own system is changed by the agent there (the assistant never changes an order).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from shop_assistant.chat.log.agents import send_agent_message
from shop_assistant.chat.protocol import events
from shop_assistant.orders.models import ConversationOrder, OrderRequest

from .roles import can_work_on, stores_for
from .services import ConsoleError

DECIDED_SHOWN = 30
NOT_FOUND = "no such request"  # of a store the agent does not work for, too: whether it exists is not told

OUTCOMES = {
    (OrderRequest.Kind.RETURN, True): gettext_noop("Your return request for order #{number} was accepted."),
    (OrderRequest.Kind.RETURN, False): gettext_noop("Your return request for order #{number} was declined."),
    (OrderRequest.Kind.EXCHANGE, True): gettext_noop("Your exchange request for order #{number} was accepted."),
    (OrderRequest.Kind.EXCHANGE, False): gettext_noop("Your exchange request for order #{number} was declined."),
    (OrderRequest.Kind.CANCEL, True): gettext_noop("Your order #{number} is cancelled."),
    (OrderRequest.Kind.CANCEL, False): gettext_noop("Your request to cancel order #{number} was declined."),
}


def pending_for(user: Any, store_id: int) -> list[OrderRequest]:
    """The queue: requests waiting for a decision, oldest first."""
    if not can_work_on(user, store_id):
        return []
    return list(OrderRequest.objects.filter(store_id=store_id, status=OrderRequest.Status.PENDING)
                .select_related("order").order_by("created_at"))


def queue_for(user: Any, decided_shown: int = DECIDED_SHOWN) -> list[OrderRequest]:
    """The queue page: every pending request of the user's stores (oldest first: the longest waiting on top),
    then the latest decided ones (newest first), for the record."""
    mine = OrderRequest.objects.filter(store__in=stores_for(user)).select_related("order", "store", "decided_by")
    pending = mine.filter(status=OrderRequest.Status.PENDING).order_by("created_at", "pk")
    decided = mine.exclude(status=OrderRequest.Status.PENDING).order_by("-decided_at", "-pk")[:decided_shown]
    return [*pending, *decided]


def verified_order(conversation_id: Any) -> dict[str, Any] | None:
    """The conversation's verified order for the context panel: status, items, tracking (no address, no payment)."""
    state = ConversationOrder.objects.filter(conversation_id=conversation_id, verified_at__isnull=False).select_related("order").first()
    if state is None or state.order is None:
        return None
    order = state.order
    return {"number": order.number, "status": order.fulfillment_status, "via": state.verified_via,
            "placed_at": order.placed_at, "fulfilled_at": order.fulfilled_at, "delivered_at": order.delivered_at,
            "expected_on": order.expected_on, "currency": order.currency,
            "carrier": order.carrier, "tracking_url": order.tracking_url,
            "items": [{"title": line.title, "variant": line.variant, "quantity": line.quantity, "price": line.price}
                      for line in order.lines.all()],
            "requests": [{"id": r.pk, "kind": r.kind, "status": r.status} for r in order.requests.all()]}


def decide(user: Any, request_id: int, accepted: bool, note: str = "") -> OrderRequest:
    """Accept or decline a pending request; the shopper hears the outcome (and the note) in the chat."""
    with transaction.atomic():
        request = OrderRequest.objects.select_for_update().select_related("order").filter(pk=request_id).first()
        if request is None or not can_work_on(user, request.store_id):
            raise ConsoleError(NOT_FOUND)
        if request.status != OrderRequest.Status.PENDING:
            raise ConsoleError("this request was decided already")
        request.status = OrderRequest.Status.ACCEPTED if accepted else OrderRequest.Status.DECLINED
        request.note, request.decided_by, request.decided_at = note.strip()[:2000], user, timezone.now()
        request.save(update_fields=["status", "note", "decided_by", "decided_at"])
    if request.conversation_id:
        from django.utils.translation import gettext as _

        text = _(OUTCOMES[(request.kind, accepted)]).format(number=request.order.number)
        send_agent_message(request.conversation_id, f"{text} {request.note}".strip(), events.agent_display_name(user))
    return request
