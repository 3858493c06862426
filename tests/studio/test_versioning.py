"""One lifecycle for the prompt's versions and the documents' (``studio.versioning``): the same rules hold for
both kinds, through each kind's own service."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog.models import StoreDocument
from shop_assistant.studio import documents, services
from shop_assistant.studio.versioning import PromptError, PublishConflict


def _prompt(store):
    first = services.published_prompt(store)
    return first, [services.create_draft(store, f"Prompt {n}.") for n in (1, 2)], services


def _document(store):
    v1 = documents.create_document(store, StoreDocument.Kind.values[0], "Returns")
    documents.update_draft(v1, "Returns", "Within 30 days.")
    first = documents.publish(v1)
    return first, [documents.create_draft(first.document) for _ in (1, 2)], documents


@pytest.mark.parametrize("kind", [_prompt, _document], ids=["prompt", "document"])
def test_both_kinds_share_one_lifecycle(store, kind):
    first, (a, b), service = kind(store)
    published = service.publish(a, expected_published=first.pk)
    first.refresh_from_db()
    assert published.status == "published" and first.status == "archived"
    with pytest.raises(PublishConflict):  # the owner of b saw ``first`` published: someone published since
        service.publish(b, expected_published=first.pk)
    with pytest.raises(PromptError, match="only drafts can be edited"):
        service.update_draft(published, *(["Edited."] * (2 if service is documents else 1)), "")
    copy = service.rollback(first, expected_published=published.pk)
    assert copy.status == "published" and copy.restored_from_id == first.pk and copy.version > b.version
    assert copy.note == f"rollback to v{first.version}"
    with pytest.raises(PromptError, match="already the published version"):
        service.rollback(copy)
    service.discard_draft(b)
    with pytest.raises(PromptError, match="only drafts can be discarded"):
        service.discard_draft(copy)


def test_a_malformed_expected_version_is_a_conflict_not_an_error(store, owner):
    draft = services.create_draft(store, "Be brief.")
    client = Client()
    client.force_login(owner)
    response = client.post(f"/studio/corner/versions/{draft.pk}/publish", {"expected_published": "²"}, follow=True)
    assert response.status_code == 200 and "was published" in response.content.decode()
    draft.refresh_from_db()
    assert draft.status == "draft"
