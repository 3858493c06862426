"""Prompt versioning: create drafts, publish one, read the published one."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from catalog.models import Store

from .defaults import DEFAULT_POLICIES, DEFAULT_SYSTEM_PROMPT
from .models import PromptVersion


def published_prompt(store: Store) -> PromptVersion | None:
    return PromptVersion.objects.filter(store=store, status=PromptVersion.Status.PUBLISHED).first()


def create_draft(store: Store, system_prompt: str, policies: str = "", user=None, note: str = "") -> PromptVersion:
    with transaction.atomic():
        latest = PromptVersion.objects.select_for_update().filter(store=store).aggregate(v=Max("version"))["v"]
        return PromptVersion.objects.create(
            store=store,
            version=(latest or 0) + 1,
            system_prompt=system_prompt,
            policies=policies,
            created_by=user,
            note=note,
        )


def publish(version: PromptVersion) -> PromptVersion:
    """Publish ``version``; the previously published one is archived in the same transaction."""
    with transaction.atomic():
        PromptVersion.objects.filter(store=version.store, status=PromptVersion.Status.PUBLISHED).exclude(
            pk=version.pk
        ).update(status=PromptVersion.Status.ARCHIVED)
        version.status = PromptVersion.Status.PUBLISHED
        version.published_at = timezone.now()
        version.save(update_fields=["status", "published_at"])
    return version


def ensure_default_prompt(store: Store) -> PromptVersion:
    """Give a store a published prompt if it has none (idempotent)."""
    current = published_prompt(store)
    if current is not None:
        return current
    return publish(create_draft(store, DEFAULT_SYSTEM_PROMPT.format(store=store.name), DEFAULT_POLICIES, note="default"))
