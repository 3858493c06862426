"""What the shopper tells the store about the chat itself: thumbs on an answer, the conversation's rating when it
is resolved, an email to be answered at when nobody is there, and which product card they opened.

Plain blocking functions (database); the session validates the frames' shapes and calls them on a worker thread.
Each one acts only on the shopper's own conversation: an id from another conversation is "not found".
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils import timezone

from catalog.models import Variant

from ..models import CardClick, Conversation, Message

MAX_COMMENT_CHARS = 2000
MAX_EMAIL_CHARS = 254  # RFC 5321's limit on a forward path, and EmailField's max_length


class FeedbackError(Exception):
    """The request cannot be applied (the session answers with an ``error`` frame of this code)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def rate_answer(conversation_id: uuid.UUID, message_id: uuid.UUID, value: int) -> None:
    """Thumbs up (1), down (-1) or taken back (0) on one of the assistant's answers in this conversation."""
    updated = Message.objects.filter(
        pk=message_id, conversation_id=conversation_id, role=Message.Role.ASSISTANT
    ).update(rating=value or None)
    if not updated:
        raise FeedbackError("unknown_message", "there is no such answer in this conversation")


def rate_conversation(conversation_id: uuid.UUID, rating: int, comment: str) -> None:
    """The shopper's satisfaction (1-5, an optional comment) with a resolved conversation; a second rating
    replaces the first."""
    updated = Conversation.objects.filter(pk=conversation_id, status=Conversation.Status.CLOSED).update(
        csat_rating=rating, csat_comment=comment, csat_at=timezone.now()
    )
    if not updated:
        raise FeedbackError("not_closed", "a conversation is rated once it has been resolved")


def clean_email(value: str) -> str:
    """The address as kept; FeedbackError when it does not look like one (the frame's schema took a string)."""
    email = value.strip()
    try:
        if len(email) > MAX_EMAIL_CHARS:
            raise ValidationError("too long")
        validate_email(email)
    except ValidationError:
        raise FeedbackError("invalid_email", "that does not look like an email address") from None
    return email


def save_email(conversation_id: uuid.UUID, email: str) -> None:
    """Where the team answers when nobody was there to take the chat (the console shows it)."""
    updated = Conversation.objects.filter(pk=conversation_id).update(shopper_email=email)
    if not updated:  # a draft: nothing was said yet, so no handoff was asked for
        raise FeedbackError("not_saved", "say something first; the email is kept with the conversation")


def record_card_click(conversation_id: uuid.UUID, message_id: uuid.UUID, sku: str) -> CardClick:
    """A card of this conversation's answer ``message_id`` was opened: its product from the card's SKU."""
    message = Message.objects.filter(pk=message_id, conversation_id=conversation_id).only("id", "products").first()
    if message is None or not any(isinstance(card, dict) and card.get("sku") == sku for card in message.products):
        raise FeedbackError("unknown_message", "that card is not in this conversation")
    store_id = Conversation.objects.filter(pk=conversation_id).values_list("store_id", flat=True).first()
    variant = Variant.objects.filter(store_id=store_id, sku=sku).only("product_id").first()
    return CardClick.objects.create(
        conversation_id=conversation_id, message=message, product_id=variant.product_id if variant else None
    )


def csat_state(conversation: Conversation) -> dict[str, Any] | None:
    """The rating already given, for the widget after a reload (None when not rated)."""
    if conversation.csat_rating is None:
        return None
    return {"rating": conversation.csat_rating, "comment": conversation.csat_comment}
