"""What the store's page tells the chat about the shopper: a signed customer identity, the page and the cart.

The store's *server* signs the customer (``{"id", "name", "email"}``, serialized as JSON) with the store's
identity secret (HMAC-SHA256, hex); the widget passes the JSON string and the signature unchanged. Only a valid
signature makes ``Conversation.customer``: anyone can edit a page's HTML, so an unsigned or altered identity is
dropped and the chat goes on anonymously. The page URL and the cart are the shopper's own browser talking, shown
to agents as such (never trusted as identity). docs/console/README.md says how a store signs.

The secret is derived from the site's ``SECRET_KEY`` and the store's private widget key (``WidgetSettings.key``,
never sent to a browser), so it needs no stored secret of its own, differs per store, and changes when either of
them does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from django.utils.crypto import salted_hmac

from catalog.models import Store

from ..models import WidgetSettings

IDENTITY_SALT = "shop_assistant.chat.identity"
MAX_CUSTOMER_CHARS = 2000
MAX_FIELD_CHARS = 200
MAX_CART_CHARS = 8000
MAX_CART_ITEMS = 30
MAX_URL_CHARS = 1000


def store_secret(store: Store) -> str:
    """The key a store signs its customers with (shown to its owners in the console)."""
    return salted_hmac(IDENTITY_SALT, WidgetSettings.of(store).key, algorithm="sha256").hexdigest()


def sign(store: Store, customer_json: str) -> str:
    """What the store's server computes (here for tests): hex HMAC-SHA256 of the exact
    JSON text the page carries."""
    return hmac.new(store_secret(store).encode(), customer_json.encode("utf-8"), hashlib.sha256).hexdigest()


def verified_customer(store: Store, customer_json: str | None, signature: str | None) -> dict[str, str]:
    """The customer the store signed, or ``{}`` when there is none or the signature does not match (constant-time
    comparison). Only ``id``, ``name`` and ``email`` are kept, as short strings; an identity without an id or an
    e-mail says nothing to look earlier conversations up by, so it is dropped too."""
    if not customer_json or not signature or len(customer_json) > MAX_CUSTOMER_CHARS:
        return {}
    if not hmac.compare_digest(sign(store, customer_json), signature.strip().lower()):
        return {}
    try:
        data = json.loads(customer_json)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    customer = {
        key: str(data[key]).strip()[:MAX_FIELD_CHARS]
        for key in ("id", "name", "email")
        if isinstance(data.get(key), (str, int)) and str(data[key]).strip()
    }
    return customer if customer.get("id") or customer.get("email") else {}


def page_url(raw: str | None) -> str:
    """An http(s) URL, or "" (a ``javascript:`` link must never reach the console as a link)."""
    raw = (raw or "").strip()
    if not raw or len(raw) > MAX_URL_CHARS:
        return ""
    parts = urlsplit(raw)
    return raw if parts.scheme in ("http", "https") and parts.netloc else ""


def _cart_item(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or not str(item.get("title", "")).strip():
        return None
    clean: dict[str, Any] = {"title": str(item["title"]).strip()[:MAX_FIELD_CHARS]}
    try:
        clean["quantity"] = max(1, min(9999, int(item.get("quantity", 1))))
    except (TypeError, ValueError):
        clean["quantity"] = 1
    try:
        if item.get("price") not in (None, ""):
            clean["price"] = str(Decimal(str(item["price"])).quantize(Decimal("0.01")))
    except (InvalidOperation, ValueError):
        pass
    if item.get("currency"):
        clean["currency"] = str(item["currency"])[:3].upper()
    return clean


def cart(raw: str | None) -> list[dict[str, Any]]:
    """The cart as the page reported it (``[{"title", "quantity", "price", "currency"}]``), cleaned and bounded."""
    if not raw or len(raw) > MAX_CART_CHARS:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return [item for item in map(_cart_item, data[:MAX_CART_ITEMS]) if item is not None]


@dataclass
class PageContext:
    """What one connection of the widget said about the shopper."""

    customer: dict[str, str] = field(default_factory=dict)
    page_url: str = ""
    cart: list[dict[str, Any]] = field(default_factory=list)
    # The page sent an identity that did not verify: refused (not stored), and logged by the caller.
    refused: bool = False

    @classmethod
    def from_query(cls, store: Store, query: dict[str, str]) -> PageContext:
        customer = verified_customer(store, query.get("customer"), query.get("customer_sig"))
        return cls(
            customer=customer,
            page_url=page_url(query.get("page")),
            cart=cart(query.get("cart")),
            refused=bool(query.get("customer")) and not customer,
        )

    def apply(self, conversation: Any) -> list[str]:
        """Set the fields this connection knows on ``conversation``; the names of those that changed. A
        connection without an identity never clears one a signed page set before."""
        changed = []
        values: dict[str, Any] = {"page_url": self.page_url, "cart": self.cart}
        if self.customer:
            values["customer"] = self.customer
        for name, value in values.items():
            if name == "page_url" and not value:
                continue
            if getattr(conversation, name) != value:
                setattr(conversation, name, value)
                changed.append(name)
        return changed


def remember(conversation: Any, context: PageContext) -> list[str]:
    """Keep the connection's context on the conversation: on its row when it has one, and on the object, which a
    draft's first message carries into the row it creates (``writes.MessageRecord.payload``)."""
    from ..models import Conversation

    changed = context.apply(conversation)
    if changed:
        values = {name: getattr(conversation, name) for name in changed}
        Conversation.objects.filter(pk=conversation.pk).update(**values)
    return changed
