"""The owner's webhook (shop_assistant/orders/webhooks.py): a real HTTP server on 127.0.0.1 receives the signed
events of a request and its decision; an address the operator does not allow is refused and recorded; a failing
server is tried again; the agent's decision does not wait for a slow one."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings
from django.utils import timezone

from catalog.models import Store
from shop_assistant.console.models import StoreMembership
from shop_assistant.console.order_requests import decide
from shop_assistant.orders import background, conversations, webhooks
from shop_assistant.orders.models import Order, OrderRequest, OrderWebhook, WebhookDelivery
from tests.console.conftest import make_conversation

LOCAL = ["127.0.0.1/32"]


class Receiver:
    """A threading http.server on 127.0.0.1 that records what it is sent and answers with ``statuses`` in turn
    (the last one from then on), after ``delay`` seconds."""

    def __init__(self, statuses: tuple[int, ...] = (200,), delay: float = 0.0) -> None:
        self.received: list[dict] = []
        self.statuses, self.delay = list(statuses), delay
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append({"headers": dict(self.headers), "body": body})
                time.sleep(receiver.delay)
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/orders"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made: list[Receiver] = []

    def make(*statuses: int, delay: float = 0.0) -> Receiver:
        made.append(Receiver(statuses or (200,), delay))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def quick(settings):
    """Deliveries in line (not on the background thread), retried at once."""
    settings.ORDERS_TASKS_IN_THREAD = False
    settings.ORDERS_WEBHOOK_RETRY_WAIT = 0
    settings.ORDERS_WEBHOOK_ATTEMPTS = 3


@pytest.fixture
def shop(django_user_model):
    store = Store.objects.create(slug="corner", name="Corner Shop")
    order = Order.objects.create(store=store, number="1003", email="sam@example.com", placed_at=timezone.now(),
                                 fulfillment_status="delivered", delivered_at=timezone.now())
    order.lines.create(title="Trailblazer Boots", variant="US 9", quantity=1, price=Decimal("159.00"))
    agent = django_user_model.objects.create_user("dana", "dana@example.com", "pw", first_name="Dana")
    StoreMembership.objects.create(user=agent, store=store, role="agent")
    return store, order, agent


def _request(store, order) -> OrderRequest:
    """As the chat makes one: through ``conversations.apply`` (which announces it)."""
    conversation = make_conversation(store)
    made = conversations.apply(conversation, [conversations.Requested(
        "exchange", order.pk, ("Trailblazer Boots (US 9)",), "size 10", "exchange the boots for a 10")])
    return made[0]


def _hook(store, url: str) -> tuple[OrderWebhook, str]:
    return webhooks.save(store, url)


def _verify(secret: str, header: str, body: bytes) -> bool:
    """What the owner's receiver does, written from the documented format (not with ``webhooks.verify``)."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(secret.encode(), fields["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) < 300


@override_settings(CATALOG_FEED_ALLOWED_NETWORKS=LOCAL)
def test_the_owners_server_receives_the_signed_request_and_decision(transactional_db, shop, receiver, quick):
    store, order, agent = shop
    server = receiver(200)
    _hook_row, secret = _hook(store, server.url)
    assert secret.startswith("whsec_") and len(secret) > 40
    request = _request(store, order)
    decide(agent, request.pk, True, "Ship them back with the label.")

    assert [json.loads(r["body"])["event"] for r in server.received] == ["order_request.created",
                                                                         "order_request.accepted"]
    for received in server.received:
        headers = received["headers"]
        assert _verify(secret, headers["X-Shop-Assistant-Signature"], received["body"])
        assert not _verify("whsec_someone-else", headers["X-Shop-Assistant-Signature"], received["body"])
        assert headers["Content-Type"] == "application/json"
    accepted = json.loads(server.received[1]["body"])
    assert accepted["request"] == {
        "id": request.pk, "kind": "exchange", "status": "accepted", "order_number": "1003",
        "lines": ["Trailblazer Boots (US 9)"], "wanted": "size 10", "note": "Ship them back with the label.",
        "decision": "accepted", "decided_at": accepted["request"]["decided_at"]}
    assert server.received[1]["headers"]["X-Shop-Assistant-Event"] == "order_request.accepted"
    deliveries = WebhookDelivery.objects.filter(store=store).order_by("pk")
    assert [(d.event, d.status, d.response_status, d.attempts) for d in deliveries] == [
        ("order_request.created", "delivered", 200, 1), ("order_request.accepted", "delivered", 200, 1)]
    # A tampered body no longer matches: the receiver can tell.
    assert not _verify(secret, server.received[1]["headers"]["X-Shop-Assistant-Signature"],
                       server.received[1]["body"].replace(b"accepted", b"declined"))


@override_settings(CATALOG_FEED_ALLOWED_NETWORKS=LOCAL)
def test_a_rotated_secret_signs_from_then_on(transactional_db, shop, receiver, quick):
    store, order, _agent = shop
    server = receiver(200)
    hook, old = _hook(store, server.url)
    new = webhooks.rotate(hook)
    assert new != old
    _request(store, order)
    header, body = server.received[0]["headers"]["X-Shop-Assistant-Signature"], server.received[0]["body"]
    assert _verify(new, header, body) and not _verify(old, header, body)
    assert webhooks.verify(new, header, body) and not webhooks.verify(new, header, body, now=time.time() + 600)


def test_an_address_the_operator_does_not_allow_is_refused_and_recorded(transactional_db, shop, receiver, quick,
                                                                        settings):
    store, order, agent = shop
    settings.CATALOG_FEED_ALLOWED_NETWORKS = []
    server = receiver(200)
    # Saved earlier (or edited in the database): the delivery checks again when it connects.
    OrderWebhook.objects.create(store=store, url=server.url, secret="whsec_x", secret_rotated_at=timezone.now())
    request = _request(store, order)
    decide(agent, request.pk, False, "")
    assert server.received == []
    deliveries = list(WebhookDelivery.objects.filter(store=store).order_by("pk"))
    assert [(d.status, d.attempts) for d in deliveries] == [("refused", 1), ("refused", 1)]  # checked as it connects: once, never again
    assert "127.0.0.1 is an address inside the server's own network" in deliveries[0].error
    assert "CATALOG_FEED_ALLOWED_NETWORKS" in deliveries[0].error


def test_a_name_resolving_to_loopback_is_refused_too(transactional_db, shop, quick, settings):
    store, order, _agent = shop
    settings.CATALOG_FEED_ALLOWED_NETWORKS = []
    OrderWebhook.objects.create(store=store, url="http://localhost:9/hook", secret="whsec_x",
                                secret_rotated_at=timezone.now())
    _request(store, order)
    delivery = WebhookDelivery.objects.get(store=store)
    assert delivery.status == "refused" and "localhost is an address inside" in delivery.error


@override_settings(CATALOG_FEED_ALLOWED_NETWORKS=LOCAL)
def test_a_failing_server_is_tried_again_until_it_answers(transactional_db, shop, receiver, quick):
    store, order, _agent = shop
    server = receiver(503, 500, 200)
    _hook(store, server.url)
    _request(store, order)
    delivery = WebhookDelivery.objects.get(store=store)
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 3, 200)
    assert len(server.received) == 3
    # Every attempt is signed afresh, each one valid.
    assert len({r["body"] for r in server.received}) == 1


@override_settings(CATALOG_FEED_ALLOWED_NETWORKS=LOCAL)
def test_a_server_that_keeps_failing_is_recorded_after_the_last_attempt(transactional_db, shop, receiver, quick):
    store, order, _agent = shop
    server = receiver(502)
    _hook(store, server.url)
    _request(store, order)
    delivery = WebhookDelivery.objects.get(store=store)
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("failed", 3, 502)
    assert "HTTP 502" in delivery.error and len(server.received) == 3
    # A 4xx says the request itself is wrong: not tried again.
    gone = receiver(410)
    OrderWebhook.objects.filter(store=store).update(url=gone.url)
    _request(store, order)
    second = WebhookDelivery.objects.filter(store=store).latest("pk")
    assert (second.status, second.attempts, second.response_status) == ("failed", 1, 410)


@override_settings(CATALOG_FEED_ALLOWED_NETWORKS=LOCAL)
def test_the_agents_decision_does_not_wait_for_a_slow_server(transactional_db, shop, receiver, settings):
    """The embedded default: the eager task runs on the orders' background thread, not in the agent's request."""
    store, order, agent = shop
    settings.ORDERS_TASKS_IN_THREAD = True
    server = receiver(200, delay=2.0)
    _hook(store, server.url)
    request = OrderRequest.objects.create(store=store, order=order, kind="return", lines=["Trailblazer Boots (US 9)"])
    started = time.monotonic()
    decide(agent, request.pk, True, "")
    took = time.monotonic() - started
    assert took < 1.5, took
    background.wait_idle()
    delivery = WebhookDelivery.objects.get(store=store)
    assert delivery.status == "delivered" and len(server.received) == 1


def test_no_webhook_no_delivery(transactional_db, shop, quick):
    store, order, agent = shop
    request = _request(store, order)
    decide(agent, request.pk, True, "")
    assert not WebhookDelivery.objects.exists()
