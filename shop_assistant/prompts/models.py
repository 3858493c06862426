"""Versioned system prompts. Exactly one published version per store is what shoppers' chats start with."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class PromptVersion(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        ARCHIVED = "archived"

    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="prompt_versions")
    version = models.PositiveIntegerField()
    system_prompt = models.TextField()
    policies = models.TextField(blank=True, help_text="Store policies the assistant must follow.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

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

    def full_text(self) -> str:
        """The exact system message: the same bytes for every session, so its KV blocks are shared."""
        if not self.policies.strip():
            return self.system_prompt.strip()
        return f"{self.system_prompt.strip()}\n\nStore policies:\n{self.policies.strip()}"
