"""The owner's webhook: the chat's order requests and the agents' decisions, POSTed to the store's own endpoint,
so that their system can act on an accepted return, exchange or cancellation (the assistant never does).

Events: ``order_request.created`` (the chat started a request), ``order_request.accepted`` and
``order_request.declined`` (an agent decided it in the console). The body is JSON: the event's name, the request
(id, kind, status, order number, lines, the size or colour wanted, the agent's note, the decision) and when.

Signed as Stripe and Shopify sign theirs: the header ``X-Shop-Assistant-Signature: t=<unix time>,v1=<hex>``, where
the hex is HMAC-SHA256 of ``"<t>.<body>"`` under the webhook's secret. A receiver recomputes it over the raw body,
compares in constant time, and refuses a ``t`` older than a few minutes (a replayed request). ``verify`` does it.

Where it may connect is the operator's decision, as for a feed (``catalog.outbound``: public addresses, or the
networks in CATALOG_FEED_ALLOWED_NETWORKS, checked when it connects). The POST runs in a Celery task
(``orders.tasks.deliver_webhook``), queued after the decision commits, so a slow endpoint never holds the agent's
request; an answer other than 2xx or a connection that fails is tried again (``ORDERS_WEBHOOK_ATTEMPTS`` in all,
waits doubling from ``ORDERS_WEBHOOK_RETRY_WAIT`` seconds). Every delivery is recorded (``WebhookDelivery``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import Any

from django.conf import settings
from django.utils import timezone

from catalog import outbound
from shop_assistant.runtime.retry import retrying

from . import background
from .models import OrderRequest, OrderWebhook, WebhookDelivery

SIGNATURE_HEADER = "X-Shop-Assistant-Signature"
EVENT_HEADER = "X-Shop-Assistant-Event"
DELIVERY_HEADER = "X-Shop-Assistant-Delivery"
CREATED = "order_request.created"
DECIDED = {OrderRequest.Status.ACCEPTED: "order_request.accepted", OrderRequest.Status.DECLINED: "order_request.declined"}
TOLERANCE_SECONDS = 300
DELIVERIES_SHOWN = 10


class RetryableAnswer(Exception):
    """The endpoint answered, but not with a 2xx: worth another try for a 5xx, a 408 or a 429."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".strip())
        self.status = status


class FinalAnswer(RetryableAnswer):
    """A 3xx or 4xx (but 408 and 429): the request itself is wrong; trying again would get the same."""


def new_secret() -> str:
    """A signing secret: 32 random bytes, the prefix telling it apart from other keys an owner keeps."""
    return "whsec_" + secrets.token_urlsafe(32)


def save(store: Any, url: str) -> tuple[OrderWebhook, str]:
    """Set the store's webhook URL; a secret is made for a new webhook. Returns (webhook, the secret when made
    now: the only time a page shows it, or "")."""
    webhook = OrderWebhook.objects.filter(store=store).first()
    if webhook is None:
        secret = new_secret()
        webhook = OrderWebhook.objects.create(store=store, url=url, secret=secret, secret_rotated_at=timezone.now())
        return webhook, secret
    webhook.url, webhook.active = url, True
    webhook.save(update_fields=["url", "active", "updated_at"])
    return webhook, ""


def rotate(webhook: OrderWebhook) -> str:
    """A new secret, in force from the next delivery (the old one stops signing now); shown once."""
    webhook.secret, webhook.secret_rotated_at = new_secret(), timezone.now()
    webhook.save(update_fields=["secret", "secret_rotated_at", "updated_at"])
    return webhook.secret


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The header's value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str, body: bytes, now: float | None = None, tolerance: int = TOLERANCE_SECONDS) -> bool:
    """What a receiver does (in Python): the signature matches the raw body, and it is recent."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


def event_body(request: OrderRequest, event: str) -> dict[str, Any]:
    """What an event says: the request as agents see it (no address, no payment: neither is imported)."""
    decision = request.status if request.status != OrderRequest.Status.PENDING else None
    return {
        "event": event,
        "created_at": timezone.now().isoformat(),
        "store": request.store.slug,
        "request": {
            "id": request.pk,
            "kind": request.kind,
            "status": request.status,
            "order_number": request.order.number,
            "lines": list(request.lines),
            "wanted": request.wanted,
            "note": request.note,
            "decision": decision,
            "decided_at": request.decided_at.isoformat() if request.decided_at else None,
        },
    }


def announce(request: OrderRequest, event: str) -> WebhookDelivery | None:
    """Record the event for the store's webhook (if it has an active one) and queue its delivery after the caller's
    transaction commits. Returns the delivery (pending), or None when the store has no webhook."""
    webhook = OrderWebhook.objects.filter(store_id=request.store_id, active=True).first()
    if webhook is None:
        return None
    delivery = WebhookDelivery.objects.create(store_id=request.store_id, request=request, event=event,
                                              url=webhook.url, payload=event_body(request, event))
    background.queue("orders.deliver_webhook", delivery.pk)
    return delivery


def _post_once(delivery: WebhookDelivery, secret: str, body: bytes) -> int:
    delivery.attempts += 1
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=delivery.attempts)
    headers = {"Content-Type": "application/json", EVENT_HEADER: delivery.event, DELIVERY_HEADER: str(delivery.pk),
               SIGNATURE_HEADER: signature(secret, int(time.time()), body)}  # signed per attempt: a fresh t
    status, reason = outbound.post(delivery.url, body, headers, timeout=settings.ORDERS_WEBHOOK_TIMEOUT)
    if 200 <= status < 300:
        return status
    if status >= 500 or status in (408, 429):
        raise RetryableAnswer(status, reason)
    raise FinalAnswer(status, reason)


def _worth_retrying(error: BaseException) -> bool:
    if isinstance(error, (outbound.Refused, FinalAnswer)):
        return False
    return isinstance(error, (RetryableAnswer, outbound.FetchError))


def deliver(delivery_id: int) -> WebhookDelivery:
    """Send one recorded event, trying again as the settings say; the outcome is written on the delivery."""
    delivery = WebhookDelivery.objects.select_related("store").get(pk=delivery_id)
    if delivery.status != WebhookDelivery.Status.PENDING:
        return delivery  # delivered already (a task run twice after a worker's restart)
    webhook = OrderWebhook.objects.filter(store_id=delivery.store_id).first()
    if webhook is None or not webhook.active:
        delivery.status, delivery.error = WebhookDelivery.Status.FAILED, "the webhook was removed before delivery"
    else:
        body = json.dumps(delivery.payload, ensure_ascii=False, separators=(",", ":")).encode()
        policy = retrying(retry_on=_worth_retrying, attempts=settings.ORDERS_WEBHOOK_ATTEMPTS,
                          first_wait=settings.ORDERS_WEBHOOK_RETRY_WAIT, max_wait=300)
        try:
            delivery.response_status = policy(_post_once, delivery, webhook.secret, body)
            delivery.status, delivery.error = WebhookDelivery.Status.DELIVERED, ""
        except outbound.Refused as exc:
            delivery.status, delivery.error = WebhookDelivery.Status.REFUSED, str(exc)
        except RetryableAnswer as exc:
            delivery.status, delivery.response_status, delivery.error = WebhookDelivery.Status.FAILED, exc.status, str(exc)
        except outbound.FetchError as exc:
            delivery.status, delivery.error = WebhookDelivery.Status.FAILED, str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded for the owner: a delivery must end, one way or another
            delivery.status, delivery.error = WebhookDelivery.Status.FAILED, f"{type(exc).__name__}: {exc}"
    delivery.finished_at = timezone.now()
    delivery.save(update_fields=["status", "response_status", "error", "attempts", "finished_at"])
    return delivery


def last_deliveries(store: Any, count: int = DELIVERIES_SHOWN) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(store=store)[:count])
