"""Celery tasks of the console: transcript exports (with progress) and the data-retention job (beat)."""

from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task
from django.utils import timezone

from shop_assistant.chat.models import Conversation

from . import transcripts
from .models import RetentionSettings, TranscriptExport
from .roles import stores_for

logger = logging.getLogger(__name__)


@shared_task(name="console.export_transcripts", ignore_result=True)
def export_transcripts(export_id: int) -> None:
    export = TranscriptExport.objects.select_related("user").get(pk=export_id)
    # Checked again here: the user's memberships may have changed since the request.
    allowed = stores_for(export.user).values_list("pk", flat=True) if export.user else []
    store_ids = [export.store_id] if export.store_id else list(allowed)
    store_ids = [pk for pk in store_ids if pk in set(allowed)]
    TranscriptExport.objects.filter(pk=export_id).update(status=TranscriptExport.Status.RUNNING)

    def progress(done: int, total: int) -> None:
        TranscriptExport.objects.filter(pk=export_id).update(done=done, total=total)

    try:
        content = transcripts.render(
            transcripts.conversations_in_range(store_ids, export.date_from, export.date_to), export.format, progress
        )
    except Exception as exc:
        logger.exception("transcript export %s failed", export_id)
        TranscriptExport.objects.filter(pk=export_id).update(status=TranscriptExport.Status.FAILED, error=str(exc))
        return
    TranscriptExport.objects.filter(pk=export_id).update(status=TranscriptExport.Status.DONE, content=content)


@shared_task(name="console.apply_retention", ignore_result=True)
def apply_retention(now: str | None = None) -> dict[str, int]:
    """Delete conversations (and their messages, notes, actions) idle longer than their store's retention_days."""
    moment = dt.datetime.fromisoformat(now) if now else timezone.now()
    deleted: dict[str, int] = {}
    # A store without a row keeps everything (the default), so only the rows that say otherwise are read.
    for own in RetentionSettings.objects.filter(retention_days__isnull=False).select_related("store"):
        store = own.store
        cutoff = moment - dt.timedelta(days=own.retention_days)
        old = Conversation.objects.filter(store=store, last_activity_at__lt=cutoff)
        count = old.count()
        old.delete()
        if count:
            deleted[store.slug] = count
            logger.info("retention: deleted %d conversations of %s older than %s", count, store.slug, cutoff.date())
    return deleted
