"""Conversations and their messages; the store's settings of its answers and of its widget.

A new conversation's id and resume token are chosen when a websocket connects (the ``ready`` frame carries them),
but its row is written together with its first message (``conversations.draft_conversation``), so a connection
where nothing is said leaves nothing in the database. Messages are written by a Celery task (see
``tasks.log_message``), which is why a message row carries its own id, position and timestamp chosen by the
consumer: the worker may write them later, more than once (acks_late), or out of order, and the result is the same.
An answer's row is written as soon as it starts, empty and without a finish reason, together with the shopper's
message, so that a node dying mid-answer leaves a trace another node can end (``Message.FinishReason.INTERRUPTED``).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid

from django.conf import settings
from django.db import models

from catalog.models import StoreSettings


def hash_token(token: str) -> str:
    """Only this hash is stored, so a database leak does not hand out live resume tokens."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_resume_token() -> str:
    return secrets.token_urlsafe(32)


def new_widget_key() -> str:
    return f"pk_{secrets.token_urlsafe(18)}"


class AnswerSettings(StoreSettings):
    """How the store's assistant answers: its own fixed replies, the wordings answers open with, what the model may
    add and how it samples, and when agents take over. The studio edits these; the chat reads them
    (``AnswerSettings.of(store)``)."""

    class ModelText(models.TextChoices):
        # What the model may add after an answer's opening (the sentences composed from the store's data).
        OFF = "off", "Off: openings only, no model text"
        CHECKED = "checked", "Checked: each model sentence shown only if the store's data supports it"
        UNCHECKED = "unchecked", "Unchecked: the model's text as it comes (prices and stock still guarded)"

    store = models.OneToOneField(
        "catalog.Store", on_delete=models.CASCADE, primary_key=True, related_name="answer_settings"
    )
    greeting = models.TextField(blank=True, help_text="First line the widget shows; empty: the default greeting.")
    no_match_reply = models.TextField(
        blank=True, help_text="Fixed reply when the catalog has nothing for a request; empty: a reply built from "
        "the store's product types."
    )
    handoff_reply = models.TextField(blank=True, help_text="Fixed reply when a shopper asks for a person.")
    model_text = models.CharField(max_length=10, choices=ModelText.choices, default=ModelText.CHECKED)
    # kind -> wordings of an answer's first sentence ("We have the {product} for {price}."); a kind left out
    # uses the defaults of shop_assistant.chat.answers.opening.
    opening_templates = models.JSONField(default=dict, blank=True)
    # {"timezone": "Europe/Berlin", "weekdays": [0, 1, 2, 3, 4], "open": "09:00", "close": "17:00"}
    # (weekdays: Monday is 0); empty: agents are always reachable.
    support_hours = models.JSONField(default=dict, blank=True)
    # Chat decoding; null: the site-wide default from settings.CHAT.
    answer_max_tokens = models.PositiveIntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    repetition_penalty = models.FloatField(null=True, blank=True)
    frequency_penalty = models.FloatField(null=True, blank=True)
    presence_penalty = models.FloatField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "answer settings"

    def __str__(self) -> str:
        return f"answers of {self.store}"


class WidgetSettings(StoreSettings):
    """Where the store's widget may be embedded, and the key its shoppers' identities are signed with."""

    store = models.OneToOneField(
        "catalog.Store", on_delete=models.CASCADE, primary_key=True, related_name="widget_settings"
    )
    # Origins ("https://shop.example.com") allowed to embed the widget, one per line.
    allowed_origins = models.TextField(blank=True)
    # Never sent to a browser: the widget names its store by slug and the websocket checks the page's origin
    # (allowed_origins), so the embed snippet carries no key. It seeds the store's customer-signing key
    # (shop_assistant.chat.protocol.identity.store_secret), which only the store's owners see.
    key = models.CharField(max_length=64, unique=True, default=new_widget_key, editable=False)

    saved_on_first_read = True  # a random key handed out must be the one kept

    class Meta:
        verbose_name_plural = "widget settings"

    def __str__(self) -> str:
        return f"widget of {self.store}"


class Conversation(models.Model):
    class Status(models.TextChoices):
        BOT = "bot"  # the assistant answers
        HANDOFF = "handoff"  # the shopper asked for a person; the assistant still answers until one takes over
        AGENT = "agent"  # a person took over: the assistant stays silent
        CLOSED = "closed"  # resolved

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="conversations")
    resume_token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.BOT, db_index=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_conversations"
    )
    handoff_requested_at = models.DateTimeField(null=True, blank=True)
    # The first request for a person, kept when the open request above is cleared (an agent hands back, or
    # reopens): analytics count a handoff once it happened, while the inbox waits only on the open request.
    first_handoff_requested_at = models.DateTimeField(null=True, blank=True)
    # Who the shopper is, as far as the store said so: ``customer`` holds only fields whose signature (the
    # store's widget secret) checked out; an email the shopper typed (out-of-hours capture) is kept apart.
    customer = models.JSONField(default=dict, blank=True)  # {"id": ..., "name": ..., "email": ...}
    shopper_email = models.EmailField(blank=True)
    page_url = models.URLField(max_length=1000, blank=True)  # the store page the chat was opened on
    cart = models.JSONField(default=list, blank=True)  # [{"title": ..., "quantity": ..., "price": ...}]
    # The shopper's rating of the conversation, asked for when it is resolved.
    csat_rating = models.PositiveSmallIntegerField(null=True, blank=True)  # 1..5
    csat_comment = models.TextField(blank=True)
    csat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_activity_at"]

    def __str__(self) -> str:
        return f"{self.store} {self.id}"


# An answer in progress: its row is written empty, with no finish reason, when it starts (for a node's failover),
# and replaced by the answer's own write when it ends.
PENDING_ANSWER = models.Q(role="assistant", finish_reason="", text="")


class MessageQuerySet(models.QuerySet):
    def said(self) -> "MessageQuerySet":
        """What was said: without answers in progress, which agents, transcripts and previews should not show
        as blank messages."""
        return self.exclude(PENDING_ANSWER)


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        AGENT = "agent"  # a human agent writing from the console

    class FinishReason(models.TextChoices):
        STOP = "stop"
        LENGTH = "length"
        ABORT = "abort"
        ERROR = "error"
        REPETITION = "repetition"  # the loop detector ended an answer that started repeating itself
        FIXED = "fixed"  # a fixed reply (no match, handoff, "are you a bot?"): no model text
        UNSUPPORTED_FIGURE = "unsupported_figure"  # ended before a price or stock figure the model made up
        UNSUPPORTED = "unsupported"  # ended before a model sentence the store's data does not support
        # Cut by a failure (its node died): ended by the node the shopper resumed on (``session.settle_answers``).
        INTERRUPTED = "interrupted"
        # An assistant row with no finish reason is an answer in progress: written with the shopper's message
        # (``MessageRecord.answer_id``), replaced by the answer when it ends.

    # The id the protocol calls message_id; chosen by the consumer so that a retried task is idempotent.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    text = models.TextField(blank=True)
    # For user turns: the exact content the model saw (the shopper's text plus that turn's catalog results).
    # Replaying it byte for byte keeps earlier turns identical, so a follow-up question hits the prefix cache.
    model_text = models.TextField(blank=True)
    products = models.JSONField(default=list, blank=True)
    agent = models.CharField(max_length=150, blank=True)
    finish_reason = models.CharField(max_length=20, choices=FinishReason.choices, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    # How long the shopper waited for an answer's first words: from the question reaching the server to the first
    # `token` frame going out (planning, queueing and the engine's first token together), for the store's analytics.
    first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    # The policy quotes shown under an answer ([{"title": ..., "text": ...}]), replayed with the history.
    quotes = models.JSONField(default=list, blank=True)
    # The shopper's thumbs on an assistant answer: 1 up, -1 down, null not rated.
    rating = models.SmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)
    # A shopper's message: the id the widget gave it (`message.client_id`), kept in its outbox until the `ack`
    # and sent again after a reconnect; the message is stored once per (conversation, client id).
    client_id = models.UUIDField(null=True, blank=True)
    # An assistant answer: what kind of answer it was, from the path that composed it (``Composition.answer_kind``:
    # "products", "no_match", "not_understood", "handoff", ...), never from its words, which are the shopper's
    # language. Analytics count by it ("Don't sell" is "no_match"). Blank for other roles and for answers logged
    # before it was kept.
    kind = models.CharField(max_length=20, blank=True, db_index=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["conversation", "created_at"]
        indexes = [models.Index(fields=["conversation", "created_at"], name="chat_msg_conv_time")]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "client_id"],
                condition=models.Q(client_id__isnull=False),
                name="chat_msg_once_per_client_id",
            )
        ]

    @property
    def is_pending(self) -> bool:
        """An answer in progress (``PENDING_ANSWER``), as the row was read."""
        return self.role == self.Role.ASSISTANT and not self.finish_reason and not self.text

    def __str__(self) -> str:
        return f"{self.role}: {self.text[:40]}"


class CardClick(models.Model):
    """A shopper opened a product card's link: reported by the widget, counted by the store's analytics."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="card_clicks")
    message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    product = models.ForeignKey("catalog.Product", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
