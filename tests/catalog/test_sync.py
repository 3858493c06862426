"""catalog.sync: uploads and saved sources queued as import runs, archiving on a full sync, due schedules, and
the error report."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
import sqlalchemy as sa
from django.utils import timezone

from catalog import sync
from catalog.models import ImportRun, ImportSource, Product, Store

from .conftest import count_shopify_export
from .test_ingest_sql import MAPPING, fill_source

pytestmark = pytest.mark.django_db


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="sync-test", name="Sync test")


@pytest.fixture
def sql_source(store, tmp_path, settings) -> ImportSource:
    # A studio source is a store owner's: a SQLite file only where the tests allow it (catalog.outbound).
    settings.CATALOG_STUDIO_ALLOW_SQLITE = True
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    fill_source(sa.create_engine(url))
    return ImportSource.objects.create(
        store=store, name="shop db", kind=ImportSource.Kind.SQL, location=url, mapping=MAPPING,
        schedule=ImportSource.Schedule.HOURLY, archive_missing=True, next_due_at=timezone.now() - timedelta(minutes=1),
    )


def test_an_upload_runs_through_the_task_and_counts_added_and_rejected(
    store, shopify_samples_dir, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("catalog.tasks.embed_store_products.delay", lambda *a, **k: None)
    path = shopify_samples_dir / "apparel.csv"
    text = path.read_text(encoding="utf-8")
    # Two bad rows: a price that is not a number, and a variant row of a product that never appears.
    lines = text.splitlines()
    header = lines[0].split(",")
    price = header.index("Variant Price")
    row = lines[1].split(",")
    row[0], row[1], row[price] = "broken-price", "Broken Price", "abc"
    bad = [",".join(row), "=orphan-row" + "," * (len(header) - 1)]
    expected = count_shopify_export(path)
    with django_capture_on_commit_callbacks(execute=True):
        run = sync.start_upload(store, ImportRun.Format.SHOPIFY, "apparel.csv", "\n".join(lines + bad) + "\n")
    run.refresh_from_db()
    assert run.status == ImportRun.Status.SUCCEEDED
    assert run.counts["added"] == expected.products
    assert run.counts["updated"] == run.counts["archived"] == 0
    assert run.counts["rejected"] == 2 and len(run.errors) >= 2
    report = list(csv.DictReader(io.StringIO(sync.error_report_csv(run))))
    assert {r["reason"] for r in report} and any("price" in r["reason"].lower() for r in report)
    # A cell starting with "=" is quoted so that a spreadsheet does not run it.
    assert all(not value.startswith("=") for r in report for value in r.values())
    assert any(value.startswith("'=") for r in report for value in r.values())


def test_an_empty_upload_never_reads_a_server_file_of_its_name(
    store, shopify_samples_dir, django_capture_on_commit_callbacks, monkeypatch, tmp_path
):
    # Issue 39, item 7: a file of only a UTF-8 BOM decodes to "", and the run read "apparel.csv" from the
    # server's working directory instead (its message told whether such a file exists).
    monkeypatch.setattr("catalog.tasks.embed_store_products.delay", lambda *a, **k: None)
    (tmp_path / "apparel.csv").write_bytes((shopify_samples_dir / "apparel.csv").read_bytes())
    monkeypatch.chdir(tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        run = sync.start_upload(store, ImportRun.Format.SHOPIFY, "apparel.csv", "")
        missing = sync.start_upload(store, ImportRun.Format.SHOPIFY, "no-such-file.csv", "")
    run.refresh_from_db()
    missing.refresh_from_db()
    assert (run.status, run.message) == ("failed", "apparel.csv is empty")
    assert (missing.status, missing.message) == ("failed", "no-such-file.csv is empty")  # the same either way
    assert not Product.objects.filter(store=store).exists()


def test_a_full_sync_archives_what_the_source_no_longer_lists(
    store, sql_source, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("catalog.tasks.embed_store_products.delay", lambda *a, **k: None)
    Product.objects.create(store=store, handle="discontinued", title="Discontinued Hat")
    with django_capture_on_commit_callbacks(execute=True):
        run = sync.start_sync(sql_source)
    run.refresh_from_db()
    assert run.status == ImportRun.Status.SUCCEEDED, run.message
    assert run.counts["archived"] == 1 and run.counts["added"] >= 2
    assert Product.objects.get(store=store, handle="discontinued").status == Product.Status.ARCHIVED
    sql_source.refresh_from_db()
    assert sql_source.last_run == run
    assert sql_source.next_due_at > timezone.now() + timedelta(minutes=59)
    # Again: nothing left to archive, nothing added.
    with django_capture_on_commit_callbacks(execute=True):
        again = sync.start_sync(sql_source)
    again.refresh_from_db()
    assert again.counts == {"added": 0, "updated": 0, "archived": 0, "rejected": again.counts["rejected"]}


def test_only_due_sources_are_synced_once_and_not_while_a_run_is_going(
    store, sql_source, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("catalog.tasks.embed_store_products.delay", lambda *a, **k: None)
    later = ImportSource.objects.create(
        store=store, name="later", kind=ImportSource.Kind.JSON, location="https://example.com/feed.json",
        schedule=ImportSource.Schedule.DAILY, next_due_at=timezone.now() + timedelta(hours=3),
    )
    ImportSource.objects.create(
        store=store, name="off", kind=ImportSource.Kind.JSON, location="https://example.com/off.json",
        schedule=ImportSource.Schedule.OFF, next_due_at=timezone.now() - timedelta(days=1),
    )
    with django_capture_on_commit_callbacks(execute=True):
        started = sync.run_due_syncs()
    assert [ImportRun.objects.get(pk=pk).import_source for pk in started] == [sql_source]
    # Not due any more: a second beat tick right after queues nothing.
    assert sync.run_due_syncs() == []
    assert not later.runs.exists()

    # Due again while its last run is still going: skipped, not queued twice.
    sql_source.refresh_from_db()
    ImportRun.objects.filter(pk=sql_source.last_run_id).update(status=ImportRun.Status.RUNNING)
    ImportSource.objects.filter(pk=sql_source.pk).update(next_due_at=timezone.now() - timedelta(seconds=1))
    assert sync.run_due_syncs() == []
    ImportRun.objects.filter(pk=sql_source.last_run_id).update(status=ImportRun.Status.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=True):
        assert len(sync.run_due_syncs()) == 1


def test_a_source_shows_its_database_url_without_the_password(store):
    source = ImportSource(store=store, kind=ImportSource.Kind.SQL,
                          location="postgresql+psycopg://shop:s3cret@db.example.com/shop")
    shown = sync.display_location(source)
    assert "s3cret" not in shown and "db.example.com" in shown
