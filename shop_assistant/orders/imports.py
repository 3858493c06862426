"""Importing a store's orders and keeping a record of it (``OrderImport``): the studio's upload and saved
database, and the operator's ``import_orders`` command, all through here. The last record is the freshness the
studio shows. Reading and writing are ``ingest``'s; this module only runs them and records the outcome.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from catalog.ingest import describe_source
from catalog.models import Store

from .ingest import SourceError, apply_orders, read_orders
from .models import OrderImport, OrderSource

ERRORS_KEPT = 50  # refused rows listed on the page; the count is of all of them

logger = logging.getLogger(__name__)


def run_import(store: Store, fmt: str, source: str, *, text: str | None = None, mapping: dict | None = None,
               restricted: bool = True, user: Any = None) -> OrderImport:
    """Read ``source`` (or the upload's ``text``), write its orders, record the outcome. A source that cannot
    be read at all is recorded with its reason, and nothing is written. ``restricted``: a store owner's source,
    held to the operator's allow-list (the command's operator is not)."""
    record = OrderImport(store=store, format=fmt, source=describe_source(source)[:1000],
                         created_by=user if getattr(user, "is_authenticated", False) else None)
    try:
        parsed = read_orders(fmt, source, text=text, mapping=mapping, restricted=restricted)
    except SourceError as exc:
        record.message = str(exc)
        record.save()
        return record
    result = apply_orders(store, parsed)
    record.created, record.updated, record.failed = result.created, result.updated, result.failed
    record.errors = [error.as_dict() for error in parsed.errors[:ERRORS_KEPT]]
    record.save()
    return record


def import_source(source: OrderSource, user: Any = None) -> OrderImport:
    return run_import(source.store, "sql", source.location, mapping=source.mapping, user=user)


def schedule(source: OrderSource, now: datetime | None = None) -> None:
    """Set the next due time after the schedule changed: one interval from now, or none when off (not saved)."""
    interval = source.interval()
    source.next_due_at = (now or timezone.now()) + interval if interval else None


def due_sources(now: datetime | None = None):
    return OrderSource.objects.exclude(schedule=OrderSource.Schedule.OFF).filter(
        next_due_at__lte=now or timezone.now()).select_related("store")


def run_due_imports(now: datetime | None = None) -> list[int]:
    """Import every scheduled order source that is due (celery beat, through ``orders.run_scheduled_imports``, as
    the catalog's scheduled syncs); returns the new imports' ids. A source is claimed by moving its due time one
    interval on with a conditional update first, so two beat schedulers never import it twice; an import that
    fails is recorded like any other (the studio shows why) and the source stays on its schedule."""
    now = now or timezone.now()
    done = []
    for source in due_sources(now):
        interval = source.interval()
        if interval is None:
            continue
        claimed = OrderSource.objects.filter(pk=source.pk, next_due_at=source.next_due_at).update(
            next_due_at=now + interval)
        if not claimed:
            continue
        record = import_source(source)
        done.append(record.pk)
        logger.info("scheduled order import of %s: #%s %s", source.store, record.pk,
                    "done" if record.succeeded else f"failed: {record.message}")
    return done


@dataclass(frozen=True)
class ConnectionTest:
    ok: bool
    text: str


def test_connection(source: OrderSource) -> ConnectionTest:
    """Connect and read through the mapping, writing nothing: what an import would find, or why it cannot."""
    try:
        parsed = read_orders("sql", source.location, mapping=source.mapping, restricted=True)
    except SourceError as exc:
        return ConnectionTest(False, str(exc))
    lines = sum(len(order.lines) for order in parsed.orders)
    text = f"Connected: {len(parsed.orders)} orders read ({lines} lines)"
    if parsed.errors:
        text += f"; {len(parsed.errors)} rows would be refused, the first: {parsed.errors[0].where}: {parsed.errors[0].reason}"
    return ConnectionTest(True, text + ".")


test_connection.__test__ = False  # not a test, though pytest would collect it by its name from a test's import


def last_import(store: Store) -> OrderImport | None:
    return OrderImport.objects.filter(store=store).first()
