"""Who the shopper is, for the conversation's sidebar: the customer the store signed (verified), else the e-mail the
shopper typed (unverified), the page they chat from, their cart, and their earlier conversations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from shop_assistant.chat.models import Conversation

EARLIER_LIMIT = 10


@dataclass
class CustomerContext:
    name: str = ""
    email: str = ""
    customer_id: str = ""
    verified: bool = False  # the store signed it (chat.identity); else the shopper typed it
    page_url: str = ""
    cart: list[dict[str, Any]] = field(default_factory=list)
    earlier: list[Conversation] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return bool(self.name or self.email or self.customer_id)


def same_customer(conversation: Conversation) -> Q | None:
    """The other conversations of this customer: the same signed customer id in the same store, or the same
    e-mail (signed or typed). None when nothing identifies them."""
    customer = conversation.customer or {}
    email = customer.get("email") or conversation.shopper_email
    match = Q()
    if customer.get("id"):
        match |= Q(customer__id=customer["id"])
    if email:
        match |= Q(customer__email__iexact=email) | Q(shopper_email__iexact=email)
    return match or None


def context_for(conversation: Conversation) -> CustomerContext:
    customer = conversation.customer or {}
    verified = bool(customer)
    context = CustomerContext(
        name=customer.get("name", ""),
        email=customer.get("email", "") if verified else conversation.shopper_email,
        customer_id=customer.get("id", ""),
        verified=verified,
        page_url=conversation.page_url,
        cart=conversation.cart if isinstance(conversation.cart, list) else [],
    )
    match = same_customer(conversation)
    if match is not None:
        # Another store's conversations are never shown, even for the same e-mail.
        context.earlier = list(
            Conversation.objects.filter(match, store_id=conversation.store_id)
            .exclude(pk=conversation.pk)
            .order_by("-last_activity_at")[:EARLIER_LIMIT]
        )
    return context
