"""The studio's receivers (shop_assistant/studio/receivers.py): a store document's text written outside the studio
(a catalog import, the admin, a plain save) is recorded as a published version when it is saved, once its
transaction commits; the studio's own publish records nothing more than its version."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from django.urls import reverse

from catalog.ingest import apply_catalog
from catalog.ingest.jsonfeed import parse_json_catalog
from catalog.models import DocumentVersion, StoreDocument
from shop_assistant.studio import documents

Status = DocumentVersion.Status
RETURNS = "Unused items can be returned within 30 days of delivery. Refunds go back to the original payment method."


def history(document: StoreDocument) -> list[tuple[int, str, str, str]]:
    return list(
        DocumentVersion.objects.filter(document=document).order_by("version")
        .values_list("version", "status", "body", "note")
    )


def import_documents(store, *bodies: tuple[str, str, str]):
    feed = {"products": [], "documents": [{"kind": k, "title": t, "body": b} for k, t, b in bodies]}
    return apply_catalog(store, parse_json_catalog(json.dumps(feed)))


def test_an_import_records_a_new_or_changed_policy_as_a_published_version_when_it_commits(
    store, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        import_documents(store, ("returns", "Returns", RETURNS))
    doc = StoreDocument.objects.get(store=store, title="Returns")
    assert history(doc) == [(1, Status.PUBLISHED, RETURNS, documents.FIRST_OUTSIDE_NOTE)]

    changed = RETURNS.replace("30 days", "14 days")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = import_documents(store, ("returns", "Returns", changed))
    assert result.summary["documents"]["updated"] == 1 and len(callbacks) == 1
    assert history(doc) == [
        (1, Status.ARCHIVED, RETURNS, documents.FIRST_OUTSIDE_NOTE),
        (2, Status.PUBLISHED, changed, documents.OUTSIDE_NOTE),
    ]
    published = documents.published_version(doc)
    assert published.published_at is not None and published.published_by is None

    # The same feed again changes nothing, and records nothing.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = import_documents(store, ("returns", "Returns", changed))
    assert result.summary["documents"]["unchanged"] == 1 and callbacks == []
    assert [v for v, *_ in history(doc)] == [1, 2]


def test_nothing_is_recorded_before_the_commit_nor_when_the_change_rolls_back(
    store, django_capture_on_commit_callbacks
):
    doc = StoreDocument.objects.create(store=store, kind="returns", title="Returns", body=RETURNS)
    documents.record_outside_change(doc)
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                doc.body = "Rolled back."
                doc.save()
                assert history(doc) == [(1, Status.PUBLISHED, RETURNS, documents.FIRST_OUTSIDE_NOTE)]
                raise RuntimeError("the import failed")
    assert history(doc) == [(1, Status.PUBLISHED, RETURNS, documents.FIRST_OUTSIDE_NOTE)]
    assert StoreDocument.objects.get(pk=doc.pk).body == RETURNS


def test_an_admin_save_records_the_new_text(store, django_capture_on_commit_callbacks):
    doc = StoreDocument.objects.create(store=store, kind="returns", title="Returns", body=RETURNS)
    v1 = documents.record_outside_change(doc)
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("boss", password="x-very-secret-1"))
    url = reverse("admin:catalog_storedocument_change", args=[doc.pk])
    assert client.get(url).status_code == 200
    new_text = "Returns within 60 days, by post or in store."
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"store": store.pk, "kind": "returns", "title": "Returns and refunds",
                                     "body": new_text, "questions": "{}"})
    assert response.status_code == 302, response.content.decode()[:2000]
    published = documents.published_version(doc)
    assert (published.version, published.title, published.body, published.note) == (
        2, "Returns and refunds", new_text, documents.OUTSIDE_NOTE)
    assert DocumentVersion.objects.get(pk=v1.pk).status == Status.ARCHIVED


def test_a_plain_save_records_once_and_a_save_of_the_questions_alone_not_at_all(
    store, django_capture_on_commit_callbacks
):
    doc = StoreDocument.objects.create(store=store, kind="faq", title="FAQ", body="Q? A.")
    with django_capture_on_commit_callbacks(execute=True):
        doc.body = "Do you ship abroad? Yes, to the EU."
        doc.save()
        doc.save()  # twice in one transaction: one version
    assert history(doc) == [(1, Status.PUBLISHED, "Do you ship abroad? Yes, to the EU.", documents.FIRST_OUTSIDE_NOTE)]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        doc.questions = {"Do you ship abroad?": "EU?"}
        doc.save(update_fields=["questions"])
    assert callbacks == []


def test_the_studios_own_publish_records_exactly_its_version(store, owner, django_capture_on_commit_callbacks):
    doc = StoreDocument.objects.create(store=store, kind="returns", title="Returns", body=RETURNS)
    documents.record_outside_change(doc)
    draft = documents.create_draft(doc, user=owner)
    documents.update_draft(draft, "Returns", RETURNS.replace("30", "45"))
    before = DocumentVersion.objects.count()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        published = documents.publish(draft, user=owner)
    assert len(callbacks) >= 1  # the receiver's (and the re-embedding) ran, and found the text in step
    assert DocumentVersion.objects.count() == before
    assert [(v, s) for v, s, *_ in history(doc)] == [(1, Status.ARCHIVED), (2, Status.PUBLISHED)]
    assert published.pk == draft.pk and published.published_by == owner

    with django_capture_on_commit_callbacks(execute=True):
        documents.rollback(DocumentVersion.objects.get(document=doc, version=1), user=owner)
    assert [(v, s) for v, s, *_ in history(doc)] == [(1, Status.ARCHIVED), (2, Status.ARCHIVED), (3, Status.PUBLISHED)]


def test_a_change_behind_the_studios_back_is_recorded_by_its_next_write_and_the_publish_is_refused(
    store, owner, django_capture_on_commit_callbacks
):
    doc = StoreDocument.objects.create(store=store, kind="returns", title="Returns", body=RETURNS)
    v1 = documents.record_outside_change(doc)
    mine = documents.create_draft(doc, user=owner)
    documents.update_draft(mine, "Returns", "My text.")
    StoreDocument.objects.filter(pk=doc.pk).update(body="Rewritten by SQL.")  # no signal
    assert len(history(doc)) == 2  # the draft; nothing recorded yet

    with pytest.raises(documents.DocumentConflict):
        documents.publish(mine, user=owner, expected_published=v1.pk)
    # The refused publish kept the text it would have replaced, as a published version.
    assert history(doc)[-1] == (3, Status.PUBLISHED, "Rewritten by SQL.", documents.OUTSIDE_NOTE)
    assert StoreDocument.objects.get(pk=doc.pk).body == "Rewritten by SQL."
    recorded = documents.published_version(doc)
    with django_capture_on_commit_callbacks(execute=True):
        documents.publish(DocumentVersion.objects.get(pk=mine.pk), user=owner, expected_published=recorded.pk)
    assert StoreDocument.objects.get(pk=doc.pk).body == "My text."

    StoreDocument.objects.filter(pk=doc.pk).update(body="Again behind its back.")
    draft = documents.create_draft(doc, user=owner)
    assert draft.body == "Again behind its back." and draft.note == "from v4"
    assert history(doc)[3] == (4, Status.PUBLISHED, "Again behind its back.", documents.OUTSIDE_NOTE)
