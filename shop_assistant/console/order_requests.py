"""Agents decide the return, exchange and cancellation requests the chat started: accept or decline, with a
note; the shopper is told the outcome in the widget, as a message of the conversation, in the conversation's
language, and by email to the order's address when no connection of theirs is open (``orders.notify``). Deciding
changes the request only: the store's own system is changed by the agent there, or by the owner's webhook, which
hears of the decision (``orders.webhooks``); the assistant never changes an order.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation

from catalog import language as shopper_language
from shop_assistant.chat.log.agents import send_agent_message
from shop_assistant.chat.models import Message
from shop_assistant.chat.protocol import events
from shop_assistant.orders import notify, webhooks
from shop_assistant.orders.models import ConversationOrder, OrderRequest

from .roles import can_work_on, stores_for
from .services import ConsoleError

DECIDED_SHOWN = 30
NOT_FOUND = "no such request"  # of a store the agent does not work for, too: whether it exists is not told


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
        webhooks.announce(request, webhooks.DECIDED[request.status])  # sent once this commits
    if request.conversation_id:
        language = conversation_language(request.conversation_id)
        with translation.override(language):
            text = notify.outcome_text(request)
        # Asked before the message goes out, while the shopper's connections have nothing else to do. The message
        # waits in the conversation for the shopper's return; one who left hears of it by email now.
        present = async_to_sync(events.shopper_connected)(request.conversation_id)
        send_agent_message(request.conversation_id, text, events.agent_display_name(user))
        if not present:
            notify.queue_outcome_email(request, language)
    return request


def conversation_language(conversation_id: Any) -> str:
    """The language the shopper wrote in (their latest messages, as the chat detects it for its answers)."""
    said = list(Message.objects.filter(conversation_id=conversation_id, role=Message.Role.USER)
                .order_by("-created_at").values_list("text", flat=True)[:2])
    if not said:
        return settings.LANGUAGE_CODE
    return shopper_language.detect(said[0], earlier=said[1] if len(said) > 1 else "")
