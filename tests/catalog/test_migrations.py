"""catalog's data migrations (catalog/migrations/): 0005 records every store document's text as a published version
where none matches it, so the studio's knowledge pages only read."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from catalog.models import DocumentVersion, ImportRun, Store, StoreDocument

BEFORE = ("catalog", "0004_studio_sources_and_document_versions")
AFTER = ("catalog", "0005_document_versions_as_they_were")


def migrate(target: tuple[str, str] | None) -> None:
    """To ``target``, or with None to the latest migration of every app (whatever was added since 0005)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target] if target else executor.loader.graph.leaf_nodes())


def history(document: StoreDocument) -> list[tuple[int, str, str, str]]:
    return list(
        DocumentVersion.objects.filter(document=document).order_by("version")
        .values_list("version", "status", "body", "note")
    )


@pytest.mark.django_db(transaction=True)  # the migration executor runs outside the test's transaction
def test_0005_gives_each_document_its_text_as_a_published_version_once():
    try:
        check_0005()
    finally:
        migrate(None)  # the next tests run on the latest schema whatever happened


def check_0005() -> None:
    store = Store.objects.create(slug="migrated", name="Migrated")
    migrate(BEFORE)
    # Queryset writes: the studio's receivers, which record a saved text, are not what is tested here.
    StoreDocument.objects.bulk_create([
        StoreDocument(store=store, kind="returns", title="Returns", body="30 days."),  # made before versions
        StoreDocument(store=store, kind="shipping", title="Shipping", body="2 days."),  # changed by an import since
        StoreDocument(store=store, kind="warranty", title="Warranty", body="2 years."),  # in step
        StoreDocument(store=store, kind="faq", title="FAQ", body=""),  # a new studio document: a draft only
    ])
    docs = {d.kind: d for d in StoreDocument.objects.filter(store=store)}
    DocumentVersion.objects.bulk_create([
        DocumentVersion(document=docs["shipping"], version=1, title="Shipping", body="5 days.", status="published"),
        DocumentVersion(document=docs["shipping"], version=2, title="Shipping", body="3 days?", status="draft"),
        DocumentVersion(document=docs["warranty"], version=1, title="Warranty", body="2 years.", status="published"),
        DocumentVersion(document=docs["faq"], version=1, title="FAQ", body="Q? A.", status="draft"),
    ])
    untouched = {kind: history(docs[kind]) for kind in ("warranty", "faq")}

    migrate(AFTER)
    assert history(docs["returns"]) == [(1, "published", "30 days.", "as it was")]
    assert history(docs["shipping"]) == [
        (1, "archived", "5 days.", ""),
        (2, "draft", "3 days?", ""),
        (3, "published", "2 days.", "changed outside the studio (import or admin)"),
    ]
    assert DocumentVersion.objects.get(document=docs["returns"]).published_at is not None
    assert {kind: history(docs[kind]) for kind in ("warranty", "faq")} == untouched

    # Back and forth again: in step now, nothing more is recorded.
    rows = list(DocumentVersion.objects.order_by("pk").values_list("pk", "version", "status", "body"))
    migrate(BEFORE)
    migrate(AFTER)
    assert list(DocumentVersion.objects.order_by("pk").values_list("pk", "version", "status", "body")) == rows


@pytest.mark.django_db(transaction=True)
def test_the_schema_is_the_latest_after_the_migration_tests():
    """A test after the one above reads every column of the newest migration (it left 0006 unapplied once)."""
    from django.db.migrations.recorder import MigrationRecorder

    executor = MigrationExecutor(connection)
    applied = set(MigrationRecorder(connection).applied_migrations())
    assert set(executor.loader.graph.leaf_nodes()) <= applied
    ImportRun.objects.values_list("embedded", "to_embed").first()  # 0006's columns: a missing one raises
