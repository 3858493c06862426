"""Scheduled order imports (shop_assistant/orders/imports.py ``run_due_imports``), run by celery beat through
``orders.run_scheduled_imports`` as the catalog's scheduled syncs are: a due source is imported and moved one
interval on; one not due, or off, is not."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from celery import current_app
from django.conf import settings as django_settings
from django.utils import timezone

from catalog.models import Store
from shop_assistant.orders import imports
from shop_assistant.orders.models import Order, OrderImport, OrderSource
from shop_assistant.orders.tasks import run_scheduled_imports

from .test_ingest import MAPPING, fill_source


@pytest.fixture
def source_url(tmp_path, settings) -> str:
    settings.CATALOG_STUDIO_ALLOW_SQLITE = True
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    fill_source(engine)
    engine.dispose()
    return url


def _source(slug: str, url: str, schedule: str, due_in: timedelta | None) -> OrderSource:
    store = Store.objects.create(slug=slug, name=slug.title())
    return OrderSource.objects.create(store=store, location=url, mapping=MAPPING, schedule=schedule,
                                      next_due_at=timezone.now() + due_in if due_in is not None else None)


def test_a_due_source_is_imported_and_one_not_due_is_not(db, source_url):
    due = _source("due", source_url, "hourly", -timedelta(minutes=1))
    later = _source("later", source_url, "hourly", timedelta(minutes=30))
    off = _source("off", source_url, "off", None)
    now = timezone.now()

    done = run_scheduled_imports.delay().get()  # beat's entry (eager here)

    assert [record.store.slug for record in OrderImport.objects.filter(pk__in=done)] == ["due"]
    assert Order.objects.filter(store=due.store).count() == 2
    assert not Order.objects.filter(store__in=[later.store, off.store]).exists()
    due.refresh_from_db()
    assert now + timedelta(minutes=59) < due.next_due_at <= timezone.now() + timedelta(hours=1)
    # Run again at once: nothing is due any more.
    assert imports.run_due_imports() == []
    # Half an hour on, the other one is.
    assert len(imports.run_due_imports(now=now + timedelta(minutes=31))) == 1
    assert Order.objects.filter(store=later.store).count() == 2


def test_a_scheduled_import_is_held_to_the_operators_rules(db, source_url, settings):
    source = _source("due", source_url, "daily", -timedelta(seconds=1))
    settings.CATALOG_STUDIO_ALLOW_SQLITE = False
    [record_id] = imports.run_due_imports()
    record = OrderImport.objects.get(pk=record_id)
    assert not record.succeeded and "SQLite" in record.message
    source.refresh_from_db()
    assert source.next_due_at > timezone.now() + timedelta(hours=23)  # stays on its schedule


def test_the_schedule_sets_the_next_due_time_and_beat_runs_the_check():
    source = OrderSource(schedule="15min")
    now = timezone.now()
    imports.schedule(source, now)
    assert source.next_due_at == now + timedelta(minutes=15)
    source.schedule = "off"
    imports.schedule(source, now)
    assert source.next_due_at is None
    entry = django_settings.CELERY_BEAT_SCHEDULE["orders-scheduled-imports"]
    assert entry["task"] == "orders.run_scheduled_imports" and entry["task"] in current_app.tasks
