"""The console's order pages (shop_assistant/console/order_views.py): the requests queue with accept / decline and a
note (staff of the request's store only, CSRF), and the verified order in the conversation's context panel."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from shop_assistant.chat.models import Message
from shop_assistant.orders.models import ConversationOrder, Order, OrderRequest

from .conftest import http_client, make_conversation


def _order(store, number: str, **extra) -> Order:
    defaults = {"email": "sam@example.com", "placed_at": timezone.now() - dt.timedelta(days=5),
                "fulfillment_status": "fulfilled", "fulfilled_at": timezone.now() - dt.timedelta(days=3),
                "carrier": "UPS", "tracking_url": "https://track.example.com/1Z999", "financial_status": "partially_refunded"}
    order = Order.objects.create(store=store, number=number, currency="EUR", expected_on=dt.date(2026, 12, 9),
                                 **{**defaults, **extra})
    order.lines.create(title="Cascade <Fleece> Jacket", variant="M", quantity=1, price=Decimal("79.00"))
    return order


def _request(store, number: str, kind: str = "return", status: str = "pending", **extra) -> OrderRequest:
    order = _order(store, number)
    conversation = make_conversation(store)
    ConversationOrder.objects.create(conversation=conversation, order=order, verified_via="email",
                                     verified_at=timezone.now())
    return OrderRequest.objects.create(store=store, order=order, conversation=conversation, kind=kind, status=status,
                                       lines=["Cascade <Fleece> Jacket (M)"], reason="It is <b>too small</b>", **extra)


@pytest.fixture
def requests_(world):
    return {
        "decided": _request(world.store_a, "1001", status="declined"),
        "return": _request(world.store_a, "1002"),
        "cancel": _request(world.store_a, "1003", kind="cancel"),
        "other": _request(world.store_b, "2001", kind="exchange", wanted="size L"),
    }


def test_the_queue_lists_the_agents_stores_requests_pending_first_and_escaped(db, world, requests_):
    page = http_client(world.users["agent"]).get("/console/orders/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "#1002" in html and "#1003" in html and "#1001" in html
    assert "#2001" not in html  # another store's request
    assert html.index("#1002") < html.index("#1003") < html.index("#1001")  # pending (oldest first), then decided
    assert "<b>too small</b>" not in html and "&lt;b&gt;too small&lt;/b&gt;" in html
    assert "Cascade &lt;Fleece&gt; Jacket" in html
    assert f'action="/console/orders/{requests_["return"].pk}/decide"' in html
    assert f'/console/orders/{requests_["decided"].pk}/decide' not in html  # nothing left to decide
    other = http_client(world.users["other_agent"]).get("/console/orders/").content.decode()
    assert "#2001" in other and "#1002" not in other


@pytest.mark.parametrize("role", ["anonymous", "plain"])
def test_the_queue_is_for_staff_only(db, world, requests_, role):
    client = http_client(world.users[role])
    page = client.get("/console/orders/")
    assert page.status_code == (302 if role == "anonymous" else 403)
    post = client.post(f"/console/orders/{requests_['return'].pk}/decide", {"decision": "accept"})
    assert post.status_code == 403
    assert OrderRequest.objects.get(pk=requests_["return"].pk).status == "pending"


def test_accepting_and_declining_change_the_status_and_tell_the_shopper(transactional_db, world, requests_):
    client = http_client(world.users["agent"])
    accepted = client.post(f"/console/orders/{requests_['return'].pk}/decide",
                           {"decision": "accept", "note": "The label is in your email."})
    assert accepted.status_code == 302 and accepted["Location"] == "/console/orders/"
    done = OrderRequest.objects.get(pk=requests_["return"].pk)
    assert (done.status, done.note, done.decided_by) == ("accepted", "The label is in your email.", world.users["agent"])
    told = Message.objects.get(conversation=done.conversation, role="agent")
    assert told.text == "Your return request for order #1002 was accepted. The label is in your email."

    declined = client.post(f"/console/orders/{requests_['cancel'].pk}/decide", {"decision": "decline", "note": ""})
    assert declined.status_code == 302
    cancel = OrderRequest.objects.get(pk=requests_["cancel"].pk)
    assert cancel.status == "declined"
    assert Message.objects.get(conversation=cancel.conversation, role="agent").text == (
        "Your request to cancel order #1003 was declined.")
    # Deciding again says so, and changes nothing.
    again = client.post(f"/console/orders/{requests_['cancel'].pk}/decide", {"decision": "accept"}, follow=True)
    assert b"decided already" in again.content
    assert OrderRequest.objects.get(pk=requests_["cancel"].pk).status == "declined"


def test_a_decision_must_be_accept_or_decline(db, world, requests_):
    response = http_client(world.users["agent"]).post(f"/console/orders/{requests_['return'].pk}/decide",
                                                      {"decision": "maybe"})
    assert response.status_code == 400
    assert OrderRequest.objects.get(pk=requests_["return"].pk).status == "pending"


def test_another_stores_agent_cannot_decide(db, world, requests_):
    client = http_client(world.users["other_agent"])
    response = client.post(f"/console/orders/{requests_['return'].pk}/decide", {"decision": "decline"})
    assert response.status_code == 404
    assert OrderRequest.objects.get(pk=requests_["return"].pk).status == "pending"
    assert not Message.objects.filter(role="agent").exists()
    assert client.post("/console/orders/999999/decide", {"decision": "decline"}).status_code == 404


def test_deciding_needs_the_csrf_token(transactional_db, world, requests_):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["agent"])
    page = client.get("/console/orders/")
    url = f"/console/orders/{requests_['return'].pk}/decide"
    assert client.post(url, {"decision": "accept"}).status_code == 403
    assert OrderRequest.objects.get(pk=requests_["return"].pk).status == "pending"
    token = page.cookies["csrftoken"].value if "csrftoken" in page.cookies else client.cookies["csrftoken"].value
    ok = client.post(url, {"decision": "accept", "csrfmiddlewaretoken": token})
    assert ok.status_code == 302 and OrderRequest.objects.get(pk=requests_["return"].pk).status == "accepted"


def test_the_context_panel_shows_the_verified_order_not_the_address_or_payment(db, world, requests_):
    conversation = requests_["return"].conversation
    html = http_client(world.users["agent"]).get(f"/console/c/{conversation.pk}/").content.decode()
    assert 'id="order"' in html and "#1002" in html
    assert "Cascade &lt;Fleece&gt; Jacket" in html and "UPS" in html
    assert "79.00 EUR" in html and "<dt>Expected</dt><dd>Dec 9, 2026</dd>" in html  # in transit: when it arrives
    assert 'href="https://track.example.com/1Z999"' in html
    assert "partially_refunded" not in html and "Address" not in html
    assert "return" in html and "pending" in html  # the order's request, linked to the queue
    unverified = make_conversation(world.store_a)
    ConversationOrder.objects.create(conversation=unverified, waiting_for="order_status", number_given="1002")
    html = http_client(world.users["agent"]).get(f"/console/c/{unverified.pk}/").content.decode()
    assert 'id="order"' not in html and "#1002" not in html  # asked for, never verified: nothing shown


def test_a_tracking_link_that_is_not_http_is_not_a_link(db, world):
    request = _request(world.store_a, "1009")
    Order.objects.filter(pk=request.order_id).update(tracking_url="javascript:alert(1)")
    html = http_client(world.users["agent"]).get(f"/console/c/{request.conversation_id}/").content.decode()
    assert 'id="order"' in html and 'href="javascript:' not in html


def test_a_cards_header_has_no_separator_of_its_own_text(db, world, requests_):
    """The header's parts (kind, order, store, status, time) are elements of their own and the "·" between them the
    stylesheet's, which a phone's stacked header leaves out: no line there starts with a stray "· "."""
    import re

    html = http_client(world.users["agent"]).get("/console/orders/").content.decode()
    header = re.search(rf'id="request-{requests_["return"].pk}">\s*<header>(.*?)</header>', html, re.S).group(1)
    between_elements = re.sub(r"<(\w+)[^>]*>.*?</\1>|\{#.*?#\}", "", header, flags=re.S)
    assert between_elements.strip() == "", between_elements
    assert '<span class="request-meta">order #1002</span>' in header
