"""Versioned system prompts. Exactly one published version per store is what shoppers' chats start with."""

from __future__ import annotations

import datetime as dt
import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

# A score still "running" after this long was lost (its worker died): it no longer blocks publishing.
SCORE_STALE_AFTER = dt.timedelta(minutes=15)


class PromptVersion(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        ARCHIVED = "archived"

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="prompt_versions")
    version = models.PositiveIntegerField()
    system_prompt = models.TextField()
    # Written by versions from before the knowledge documents became the one copy of a policy: kept as history,
    # never sent to the model nor quoted (``full_text``), so a published document has nothing to disagree with.
    policies = models.TextField(blank=True, help_text="Store policies the assistant must follow.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A rollback publishes an earlier version's text again as a new version; this points at that version.
    restored_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What the last pre-warm after publishing left in the engine's prefix cache (diagnostics for the studio).
    prewarmed_tokens = models.PositiveIntegerField(null=True, blank=True)
    prewarmed_at = models.DateTimeField(null=True, blank=True)
    # The version's score on the store's evaluation questions (``scoring``): the share of the evaluation's checks
    # its answers passed, in percent, and the evaluation's report. ``score_text_hash`` says which text was scored,
    # so a draft edited since shows no stale score.
    score = models.FloatField(null=True, blank=True)
    score_report = models.JSONField(default=dict, blank=True)
    score_text_hash = models.CharField(max_length=64, blank=True)
    score_state = models.CharField(max_length=10, blank=True)  # "", "running", "done", "failed"
    score_done = models.PositiveSmallIntegerField(default=0)
    score_total = models.PositiveSmallIntegerField(default=0)
    score_started_at = models.DateTimeField(null=True, blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["store", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["store", "version"], name="prompt_version_unique"),
            models.UniqueConstraint(
                fields=["store"], condition=Q(status="published"), name="one_published_prompt_per_store"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.store} v{self.version} ({self.status})"

    def text_hash(self) -> str:
        return hashlib.sha256(f"{self.system_prompt}\x00{self.policies}".encode()).hexdigest()

    @property
    def score_running(self) -> bool:
        """A scoring is under way (queued or answering), and not so old that its worker must have died."""
        started = self.score_started_at
        return self.score_state == "running" and started is not None and timezone.now() - started < SCORE_STALE_AFTER

    @property
    def score_current(self) -> float | None:
        """The score of the text as it is now (None: never scored, or edited since)."""
        if self.score_state == "done" and self.score_text_hash == self.text_hash():
            return self.score
        return None

    def full_text(self) -> str:
        """The exact system message: the same bytes for every session, so its KV blocks are shared. Not the
        ``policies`` of an old version: a policy's one copy is its knowledge document, quoted with the message."""
        return self.system_prompt.strip()


class SampleQuestion(models.Model):
    """A question the studio's preview asks of a draft and of the published version, side by side."""

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="sample_questions")
    text = models.CharField(max_length=500)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["store", "position", "id"]

    def __str__(self) -> str:
        return self.text


def published_prompt(store) -> PromptVersion | None:
    """The version shoppers' chats start with (a store always has one: the studio gives every new store its
    default), or None."""
    return PromptVersion.objects.filter(store=store, status=PromptVersion.Status.PUBLISHED).first()
