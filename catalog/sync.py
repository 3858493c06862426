"""Imports the studio starts: an upload, or a saved source synced by hand or on its schedule.

The work itself is ``catalog.ingest`` run by the ``catalog.ingest_catalog`` task; this module makes the
ImportRun rows, queues them, and decides which scheduled sources are due (celery beat calls
``run_due_syncs`` through ``catalog.run_scheduled_syncs`` every ``CATALOG_SYNC_CHECK_SECONDS``).
"""

from __future__ import annotations

import csv
import io
import logging
from datetime import datetime

from celery import current_app
from django.db import transaction
from django.utils import timezone

from . import csvsafe
from .ingest import describe_source
from .models import ImportRun, ImportSource, Store

logger = logging.getLogger(__name__)

ERROR_CSV_FIELDS = ["line", "where", "handle", "sku", "reason"]
INGEST_TASK = "catalog.ingest_catalog"


def _queue(run: ImportRun) -> ImportRun:
    # By name: catalog.tasks imports this module for the beat task. After the commit: a worker on another
    # machine must find the row (eager mode runs it right here).
    transaction.on_commit(lambda: current_app.tasks[INGEST_TASK].delay(run.pk))
    return run


def start_upload(store: Store, fmt: str, name: str, text: str, user=None) -> ImportRun:
    """Queue the import of an uploaded file's text (a Shopify CSV or a JSON feed)."""
    run = ImportRun.objects.create(
        store=store,
        format=fmt,
        source=name[:1000],
        upload=text,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return _queue(run)


def start_sync(source: ImportSource, user=None) -> ImportRun:
    """Queue a sync of a saved source now, and move its next scheduled sync one interval on."""
    with transaction.atomic():
        run = ImportRun.objects.create(
            store_id=source.store_id,
            import_source=source,
            format=source.format,
            source=source.location,
            mapping=source.mapping,
            archive_missing=source.archive_missing,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        interval = source.interval()
        source.last_run = run
        source.next_due_at = timezone.now() + interval if interval else None
        source.save(update_fields=["last_run", "next_due_at"])
        return _queue(run)


def schedule(source: ImportSource, now: datetime | None = None) -> None:
    """Set the next due time after the schedule changed: one interval from now, or none when off."""
    interval = source.interval()
    source.next_due_at = (now or timezone.now()) + interval if interval else None


def due_sources(now: datetime | None = None):
    now = now or timezone.now()
    return ImportSource.objects.exclude(schedule=ImportSource.Schedule.OFF).filter(next_due_at__lte=now)


def run_due_syncs(now: datetime | None = None) -> list[int]:
    """Queue a sync of every scheduled source that is due; returns the new runs' ids.

    A source whose previous run is still going is skipped this time (two syncs of one feed would race on the
    same products). Claiming a source moves its due time first, with a conditional update, so two beat
    schedulers (a deployment mistake, or a restart overlapping) never queue the same sync twice.
    """
    now = now or timezone.now()
    started = []
    for source in due_sources(now).select_related("last_run"):
        if source.last_run is not None and not source.last_run.finished:
            continue
        claimed = ImportSource.objects.filter(pk=source.pk, next_due_at=source.next_due_at).update(
            next_due_at=now + source.interval()
        )
        if not claimed:
            continue
        source.refresh_from_db()
        started.append(start_sync(source).pk)
        logger.info("scheduled sync of %s queued as import #%s", source, started[-1])
    return started


def error_report_csv(run: ImportRun) -> str:
    """The run's refused rows as CSV, for the owner to fix in a spreadsheet."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=ERROR_CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for error in run.errors:
        writer.writerow({key: csvsafe.cell(error.get(key)) for key in ERROR_CSV_FIELDS})
    return out.getvalue()


def display_location(source: ImportSource) -> str:
    """Where a source reads from, as a page may show it: a database URL without its password."""
    return describe_source(source.location)
