"""Agents accept or decline the chat's return, exchange and cancellation requests; the shopper hears the outcome."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from shop_assistant.chat.models import Message
from shop_assistant.console.order_requests import decide, pending_for, verified_order
from shop_assistant.console.services import ConsoleError
from shop_assistant.orders.models import ConversationOrder, Order, OrderRequest
from tests.console.conftest import make_conversation


@pytest.fixture
def request_of(world):
    order = Order.objects.create(store=world.store_a, number="1003", email="sam@example.com", placed_at=timezone.now(),
                                 fulfillment_status="delivered", delivered_at=timezone.now(), carrier="USPS")
    order.lines.create(title="Cascade Fleece Jacket", variant="M", quantity=1, price=Decimal("79.00"))
    conversation = make_conversation(world.store_a)
    ConversationOrder.objects.create(conversation=conversation, order=order, verified_via="email", verified_at=timezone.now())
    return OrderRequest.objects.create(store=world.store_a, order=order, conversation=conversation, kind="return",
                                       lines=["Cascade Fleece Jacket (M)"])


def test_an_agent_accepts_with_a_note_and_the_shopper_is_told(transactional_db, world, request_of):
    agent = world.users["agent"]
    assert [r.pk for r in pending_for(agent, world.store_a.pk)] == [request_of.pk]
    decided = decide(agent, request_of.pk, True, "The label is in your email.")
    assert (decided.status, decided.decided_by, decided.note) == ("accepted", agent, "The label is in your email.")
    told = Message.objects.filter(conversation=request_of.conversation, role="agent").get()
    assert told.text == "Your return request for order #1003 was accepted. The label is in your email."
    assert pending_for(agent, world.store_a.pk) == []
    with pytest.raises(ConsoleError, match="decided already"):
        decide(agent, request_of.pk, False)
    assert Order.objects.get(pk=request_of.order_id).fulfillment_status == "delivered"  # the order is not changed


def test_another_stores_agent_can_neither_see_nor_decide(transactional_db, world, request_of):
    other = world.users["other_agent"]
    assert pending_for(other, world.store_a.pk) == []
    with pytest.raises(ConsoleError, match="no such request"):
        decide(other, request_of.pk, False)
    assert OrderRequest.objects.get(pk=request_of.pk).status == "pending"


def test_the_context_panel_shows_the_verified_order_without_address_or_payment(world, request_of):
    panel = verified_order(request_of.conversation_id)
    assert panel["number"] == "1003" and panel["status"] == "delivered" and panel["carrier"] == "USPS"
    assert panel["items"] == [{"title": "Cascade Fleece Jacket", "variant": "M", "quantity": 1, "price": Decimal("79.00")}]
    assert panel["requests"] == [{"id": request_of.pk, "kind": "return", "status": "pending"}]
    assert verified_order(make_conversation(world.store_a).pk) is None
