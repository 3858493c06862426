"""Orders as imported from the store (Shopify CSV, JSON feed, its own database), and what the chat does with them.

Only what a verified shopper may be told is kept: status, dates, carrier, tracking, line items. Addresses and
payment details are never imported, so no answer can disclose them.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models


class Order(models.Model):
    class Fulfillment(models.TextChoices):
        UNFULFILLED = "unfulfilled"
        PARTIAL = "partial"
        FULFILLED = "fulfilled"  # shipped
        DELIVERED = "delivered"
        CANCELLED = "cancelled"

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="orders")
    number = models.CharField(max_length=40, help_text="As the shopper reads it, without '#'.")
    email = models.EmailField(help_text="The order's email, lower-cased: what verifies a shopper.")
    financial_status = models.CharField(max_length=40, blank=True)
    fulfillment_status = models.CharField(max_length=20, choices=Fulfillment.choices, default=Fulfillment.UNFULFILLED)
    placed_at = models.DateTimeField()
    fulfilled_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    expected_on = models.DateField(null=True, blank=True)
    shipping_method = models.CharField(max_length=200, blank=True)
    carrier = models.CharField(max_length=100, blank=True)
    tracking_number = models.CharField(max_length=100, blank=True)
    tracking_url = models.URLField(max_length=500, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["store", "number"], name="order_number_per_store")]
        indexes = [models.Index(fields=["store", "email"])]
        ordering = ["-placed_at"]

    def __str__(self) -> str:
        return f"#{self.number}"

    @property
    def shipped(self) -> bool:
        return self.fulfillment_status in (self.Fulfillment.FULFILLED, self.Fulfillment.PARTIAL, self.Fulfillment.DELIVERED)


class OrderLine(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveIntegerField(default=0)
    title = models.CharField(max_length=300)
    variant = models.CharField(max_length=200, blank=True)
    sku = models.CharField(max_length=100, blank=True)
    quantity = models.PositiveIntegerField(default=1)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    on_sale = models.BooleanField(default=False)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"{self.title} ({self.variant})" if self.variant else self.title


class ConversationOrder(models.Model):
    """What a conversation knows about the shopper's order: the one verified (kept for follow-ups: "and when will
    it arrive?"), or what the chat asked for and is waiting on (the email for a number given)."""

    conversation = models.OneToOneField("chat.Conversation", on_delete=models.CASCADE, related_name="order_state")
    order = models.ForeignKey(Order, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verified_via = models.CharField(max_length=10, blank=True)  # "email" or "identity"
    verified_at = models.DateTimeField(null=True, blank=True)
    waiting_for = models.CharField(max_length=30, blank=True)  # the tool that asked for an email / a number
    number_given = models.CharField(max_length=40, blank=True)
    # The message the pending question is about ("exchange the boots from order 1003" while asking which size).
    pending_text = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class OrderRequest(models.Model):
    """A return, an exchange or a cancellation the chat started: agents accept or decline it in the console; the
    store's own system is changed by them (or the owner's webhook), never by the assistant."""

    class Kind(models.TextChoices):
        RETURN = "return"
        EXCHANGE = "exchange"
        CANCEL = "cancel"

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        DECLINED = "declined"

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="order_requests")
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="requests")
    conversation = models.ForeignKey("chat.Conversation", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="order_requests")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    lines = models.JSONField(default=list, blank=True)  # ["Trailblazer Waterproof Hiking Boots (US 9)", ...]
    wanted = models.CharField(max_length=200, blank=True)  # an exchange's size or colour, as the shopper said
    reason = models.TextField(blank=True)  # the shopper's message
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    note = models.TextField(blank=True)  # the agent's, told to the shopper with the outcome
    # The outcome went by email too: the shopper had no live connection when it was decided (``orders.notify``).
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]


class OrderSource(models.Model):
    """The store's own database as its order source, saved in the studio: a SQLAlchemy URL (it may hold a password,
    so pages show it through ``catalog.ingest.describe_source`` only) and the mapping of its columns."""

    class Schedule(models.TextChoices):
        OFF = "off", "Off (import by hand)"
        QUARTER = "15min", "Every 15 minutes"
        HOURLY = "hourly", "Every hour"
        DAILY = "daily", "Every day"

    INTERVALS = {Schedule.QUARTER: timedelta(minutes=15), Schedule.HOURLY: timedelta(hours=1),
                 Schedule.DAILY: timedelta(days=1)}

    store = models.OneToOneField("catalog.Store", on_delete=models.CASCADE, related_name="order_source")
    location = models.CharField(max_length=1000)
    mapping = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)
    # Imported on this schedule by celery beat (``orders.run_scheduled_imports``, as the catalog's sources are).
    schedule = models.CharField(max_length=6, choices=Schedule.choices, default=Schedule.OFF)
    next_due_at = models.DateTimeField(null=True, blank=True, db_index=True)

    def interval(self) -> timedelta | None:
        return self.INTERVALS.get(self.schedule)


class OrderImport(models.Model):
    """One import of a store's orders (an upload, the saved database, the operator's command): the studio shows
    the last one as the orders' freshness."""

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="order_imports")
    format = models.CharField(max_length=10)  # shopify, json or sql
    source = models.CharField(max_length=1000)  # a file's name or a database URL without its password
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    created = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)  # the first refused rows: where and why
    message = models.TextField(blank=True)  # why the whole import failed; empty when it ran
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["-created_at", "-pk"]

    @property
    def succeeded(self) -> bool:
        return not self.message


class OrderWebhook(models.Model):
    """The owner's endpoint that hears of the chat's requests and the agents' decisions (``orders.webhooks``), so
    that their own system can act on an accepted one. Each POST is signed with ``secret`` (HMAC-SHA256), which the
    server generates and the studio shows once, when it is made or rotated."""

    store = models.OneToOneField("catalog.Store", on_delete=models.CASCADE, related_name="order_webhook")
    url = models.URLField(max_length=1000)
    secret = models.CharField(max_length=100)
    active = models.BooleanField(default=True)
    secret_rotated_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)


class WebhookDelivery(models.Model):
    """One event sent (or refused) to a store's webhook: what the studio lists as the last deliveries."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"  # a 2xx answer
        FAILED = "failed"  # every attempt failed: the last error or status is kept
        REFUSED = "refused"  # the operator's outbound rules do not allow the URL: not attempted

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="order_webhook_deliveries")
    request = models.ForeignKey(OrderRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    event = models.CharField(max_length=40)  # order_request.created, .accepted, .declined
    url = models.URLField(max_length=1000)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
