"""Who works for which store: the roles the console and the studio check."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from catalog.models import StoreSettings


class StoreMembership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"  # edits the assistant (studio) and everything an agent does
        AGENT = "agent"  # answers conversations in the console

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="store_memberships")
    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "store"], name="one_membership_per_user_and_store")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.store}"


class RetentionSettings(StoreSettings):
    """How long the store keeps its conversations: the console's retention job (``tasks.apply_retention``) deletes
    older ones."""

    store = models.OneToOneField(
        "catalog.Store", on_delete=models.CASCADE, primary_key=True, related_name="retention_settings"
    )
    # Conversations idle longer than this many days are deleted; null: kept.
    retention_days = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "retention settings"

    def __str__(self) -> str:
        return f"retention of {self.store}"


class Label(models.Model):
    """A tag agents put on conversations ("refund", "vip"); one set per store."""

    # The preset colours agents tell labels apart by (Chatwoot's palette, readable with white text).
    COLORS = ["#1f6feb", "#2da44e", "#bf8700", "#cf222e", "#8250df", "#e16f24", "#0a7ea4", "#57606a"]

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=50)
    color = models.CharField(max_length=7, default="#57606a",
                             validators=[RegexValidator(r"^#[0-9a-fA-F]{6}$", "a colour is #rrggbb")])
    conversations = models.ManyToManyField("chat.Conversation", related_name="labels", blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["store", "name"], name="label_unique_per_store")]

    def __str__(self) -> str:
        return self.name


class CannedReply(models.Model):
    """A prepared answer an agent inserts with its shortcut."""

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="canned_replies")
    shortcut = models.SlugField(max_length=50)
    text = models.TextField()

    class Meta:
        ordering = ["shortcut"]
        verbose_name_plural = "canned replies"
        constraints = [models.UniqueConstraint(fields=["store", "shortcut"], name="canned_reply_unique_per_store")]

    def __str__(self) -> str:
        return f"/{self.shortcut}"


class Note(models.Model):
    """An internal note on a conversation: staff only, never sent to the shopper or the model."""

    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]


class Action(models.Model):
    """Who did what to a conversation, and when (take over, hand back, close, reply, note, label, export)."""

    class Kind(models.TextChoices):
        TAKE_OVER = "take_over"
        HAND_BACK = "hand_back"
        CLOSE = "close"
        REOPEN = "reopen"
        REPLY = "reply"
        NOTE = "note"
        LABEL = "label"
        UNLABEL = "unlabel"
        EXPORT = "export"
        ASSIGN = "assign"
        CANNED = "canned"

    conversation = models.ForeignKey(
        "chat.Conversation", null=True, on_delete=models.CASCADE, related_name="console_actions"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]


class Notification(models.Model):
    """Something an agent should see in their own inbox (a conversation assigned to them), until they read it."""

    class Kind(models.TextChoices):
        ASSIGNED = "assigned"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="console_notifications")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread")]


class ReadMark(models.Model):
    """How far a staff member has read a conversation: messages after it are unread."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="read_marks")
    read_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "conversation"], name="one_read_mark")]


class TranscriptExport(models.Model):
    """A transcript export running as a Celery task; the page polls its progress, then downloads ``content``."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Format(models.TextChoices):
        CSV = "csv"
        JSON = "json"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    store = models.ForeignKey("catalog.Store", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    format = models.CharField(max_length=4, choices=Format.choices, default=Format.CSV)
    date_from = models.DateField(null=True, blank=True)
    date_to = models.DateField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    content = models.TextField(blank=True)  # the file; exports are transcripts of text, small enough for a row
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    @property
    def progress(self) -> float:
        return 1.0 if self.status == self.Status.DONE else (self.done / self.total if self.total else 0.0)
