"""Who may hear about an order: the shopper who gives its number and the email on it, or whose store-signed
identity (``chat.protocol.identity``, the widget's ``customer``) carries that email. Nothing else says anything about
an order, not even whether it exists: a wrong email and an unknown number get the same outcome ("not_found").

Failed lookups are limited (enumeration): per conversation, per order number and per email, on the ``limits`` library's
moving window (Redis when ``REDIS_URL`` is set, so that a new conversation or another process does not reset them;
this process's memory otherwise, and whenever Redis fails).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from catalog.models import Store

from .models import Order

logger = logging.getLogger(__name__)

EMAIL = re.compile(r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
NUMBER = re.compile(r"(?:#|\border\s*(?:number|no\.?|#)?\s*:?\s*)?\b(\d{3,12})\b", re.IGNORECASE)

VERIFIED, NOT_FOUND, LIMITED, NEED_EMAIL, NEED_NUMBER = "verified", "not_found", "limited", "need_email", "need_number"

_memory = MovingWindowRateLimiter(MemoryStorage())
_redis: MovingWindowRateLimiter | None = None


@dataclass(frozen=True)
class Lookup:
    outcome: str
    order: Order | None = None
    via: str = ""  # "email" or "identity"
    number: str = ""  # as the shopper gave it (said back when asking for the email; it discloses nothing)


def _limiter() -> MovingWindowRateLimiter:
    global _redis
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return _memory
    if _redis is None:
        _redis = MovingWindowRateLimiter(storage_from_string(url, key_prefix="shop-assistant-orders"))
    return _redis


def _limits() -> dict[str, int]:
    return {"conversation": 5, "number": 5, "email": 5, "window": 3600, **getattr(settings, "ORDER_LOOKUP_LIMITS", {})}


def _keys(store: Store, conversation_key: str, number: str, email: str) -> list[tuple[RateLimitItemPerSecond, str]]:
    limits = _limits()
    return [
        (RateLimitItemPerSecond(limits[kind], limits["window"]), f"order-lookup:{store.pk}:{kind}:{value.lower()}")
        for kind, value in (("conversation", conversation_key), ("number", number), ("email", email))
        if value and limits[kind] > 0
    ]


def _use(method: str, item: RateLimitItemPerSecond, key: str) -> bool:
    try:
        return getattr(_limiter(), method)(item, key)
    except Exception as exc:  # noqa: BLE001 - a Redis failure limits in this process, never not at all
        logger.warning("order lookup limits: Redis unavailable (%s); limiting in this process", exc)
        return getattr(_memory, method)(item, key)


def _allowed(keys: list[tuple[RateLimitItemPerSecond, str]]) -> bool:
    """No key has used up its failed lookups (a shopper who gets their own order right is never held back)."""
    return all(_use("test", item, key) for item, key in keys)


def _failed(keys: list[tuple[RateLimitItemPerSecond, str]]) -> None:
    for item, key in keys:
        _use("hit", item, key)


def reset() -> None:
    """Forget this process's counts (tests)."""
    _memory.storage.reset()


def given_number(text: str) -> str:
    match = NUMBER.search(text or "")
    return match.group(1) if match else ""


def given_email(text: str) -> str:
    match = EMAIL.search(text or "")
    return match.group(0).lower() if match else ""


def signed_email(conversation: Any) -> str:
    """The email of the store-signed customer (only a verified signature ever sets ``Conversation.customer``)."""
    customer = getattr(conversation, "customer", None) or {}
    return str(customer.get("email") or "").strip().lower()


def verify(store: Store, conversation_key: str, number: str, email: str, identity_email: str = "") -> Lookup:
    """The order the shopper proved to be theirs, or why not. ``email`` is what the shopper typed; the signed
    identity's email verifies too (a number without one: their own latest order is not guessed at)."""
    number = number.lstrip("#").strip()
    if not number and not identity_email:
        return Lookup(NEED_NUMBER)
    if number and not (email or identity_email):
        return Lookup(NEED_EMAIL, number=number)
    via, address = ("email", email) if email else ("identity", identity_email)
    keys = _keys(store, conversation_key, number, address)
    if not _allowed(keys):
        return Lookup(LIMITED, number=number)
    orders = Order.objects.filter(store=store, email=address)
    order = (orders.filter(number=number) if number else orders.order_by("-placed_at")).first()
    if order is None and email and identity_email and number:  # a typed email that is wrong; the signed one may hold
        order = Order.objects.filter(store=store, email=identity_email, number=number).first()
        via = "identity"
    if order is None:
        _failed(keys)
        return Lookup(NOT_FOUND, number=number)
    return Lookup(VERIFIED, order, via, number)
