"""The studio's knowledge pages (shop_assistant/studio/knowledge.py): owners only on every page and action, and
an owner editing, publishing and rolling back a policy, with the quote per sentence."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog.models import DocumentVersion, Store, StoreDocument
from shop_assistant.studio import documents

from .conftest import make_user

RETURNS = "Unused items can be returned within 30 days of delivery. Refunds go back to the original payment method."


@pytest.fixture
def versions(store):
    doc = StoreDocument.objects.create(store=store, kind="returns", title="Returns and refunds", body=RETURNS)
    v1 = documents.record_outside_change(doc)
    draft = documents.create_draft(doc)
    return doc, v1, draft


def every_page_and_action(versions) -> list[tuple[str, str, dict]]:
    doc, v1, draft = versions
    base = f"/studio/corner/knowledge/{doc.pk}"
    return [
        ("get", "/studio/corner/knowledge/", {}),
        ("get", f"{base}/", {}),
        ("get", f"{base}/drafts/{draft.pk}/", {}),
        ("get", f"{base}/versions/{v1.pk}/", {}),
        ("post", "/studio/corner/knowledge/new", {"kind": "faq", "title": "Hacked"}),
        ("post", f"{base}/questions", {"s-1": RETURNS.split(". ")[0] + ".", "q-1": "hacked?"}),
        ("post", f"{base}/drafts/new", {}),
        ("post", f"{base}/drafts/{draft.pk}/", {"title": "Hacked", "body": "hacked", "publish": "1"}),
        ("post", f"{base}/versions/{draft.pk}/publish", {}),
        ("get", f"{base}/versions/{v1.pk}/rollback/confirm", {}),
        ("post", f"{base}/versions/{v1.pk}/rollback", {}),
        ("post", f"{base}/versions/{draft.pk}/discard", {}),
    ]


def snapshot(store: Store):
    return (
        list(StoreDocument.objects.filter(store=store).values_list("pk", "title", "body", "questions")),
        list(DocumentVersion.objects.filter(document__store=store).values_list("pk", "status", "body")),
    )


@pytest.mark.parametrize("who", ["anonymous", "agent", "owner_of_another_store", "staff_without_store"])
def test_everyone_but_the_owner_gets_403_on_every_knowledge_page_and_action(store, versions, who):
    client = Client()
    if who == "agent":
        client.force_login(make_user("adam", store, "agent"))
    elif who == "owner_of_another_store":
        client.force_login(make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"))
    elif who == "staff_without_store":
        client.force_login(make_user("sam", None, None))
    before = snapshot(store)
    for method, url, data in every_page_and_action(versions):
        response = getattr(client, method)(url, data)
        if who == "anonymous" and method == "get":
            assert response.status_code == 302, (who, url, response.status_code)
            assert response["Location"] == f"/accounts/login/?next={url}"
            continue
        assert response.status_code == 403, (who, method, url, response.status_code)
    assert snapshot(store) == before


def test_another_stores_document_is_not_reached_through_ones_own_store(store, versions):
    doc, v1, draft = versions
    client = Client()
    client.force_login(make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"))
    assert client.get(f"/studio/other/knowledge/{doc.pk}/").status_code == 404
    assert client.post(f"/studio/other/knowledge/{doc.pk}/versions/{draft.pk}/publish").status_code == 404
    assert DocumentVersion.objects.get(pk=draft.pk).status == "draft"


def test_forms_need_the_csrf_token(store, versions, owner):
    doc, v1, draft = versions
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(f"/studio/corner/knowledge/{doc.pk}/versions/{draft.pk}/publish").status_code == 403
    assert DocumentVersion.objects.get(pk=draft.pk).status == "draft"


def test_the_owner_edits_publishes_and_rolls_back_a_policy(store, versions, owner, django_capture_on_commit_callbacks):
    doc, v1, draft = versions
    client = Client()
    client.force_login(owner)
    listing = client.get("/studio/corner/knowledge/").content.decode()
    assert "Returns and refunds" in listing and "v1" in listing

    page = client.get(f"/studio/corner/knowledge/{doc.pk}/").content.decode()
    assert "What shoppers are quoted" in page and "within 30 days" in page
    assert page.count('class="sentence"') == 2

    new_text = RETURNS.replace("30 days", "45 days")
    url = f"/studio/corner/knowledge/{doc.pk}/drafts/{draft.pk}/"
    response = client.post(url, {"title": doc.title, "body": new_text, "note": "45", "save": "1"})
    assert response.status_code == 302
    page = client.get(url).content.decode()
    assert "Draft v2 saved." in page and '<span class="d-add">+ ' + new_text in page

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"title": doc.title, "body": new_text, "note": "45", "publish": "1",
                                     "expected_published": str(v1.pk)})
    assert response.status_code == 302 and response["Location"] == f"/studio/corner/knowledge/{doc.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "Published: v2" in page and "within 45 days" in page
    # The quote beside the sentence is the new one.
    sentences = page.split('id="sentences"')[1].split("History")[0]
    assert sentences.count("within 45 days") >= 2 and "within 30 days" not in sentences
    # Nothing else says 30 days: the prompt restates no policy, so the page has no second copy to keep in step.
    assert "within 30 days" not in page.split("History")[0] and "prompt-lines" not in page

    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/studio/corner/knowledge/{doc.pk}/versions/{v1.pk}/rollback",
                    {"expected_published": str(DocumentVersion.objects.get(document=doc, version=2).pk)})
    doc.refresh_from_db()
    assert doc.body == RETURNS
    assert DocumentVersion.objects.get(document=doc, status="published").version == 3


def test_a_rollback_asks_first_with_the_diff_as_the_prompts_does(store, versions, owner):
    """Issue 40: "Roll back to this" on the document page published at once. Now it opens the prompt's confirm
    step (the same template): what shoppers get now, the diff, and a form that posts the rollback; nothing changes
    until it is confirmed."""
    doc, v1, draft = versions
    documents.update_draft(draft, doc.title, RETURNS.replace("30 days", "60 days"))
    v2 = documents.publish(draft)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studio/corner/knowledge/{doc.pk}/").content.decode()
    history = page.split("History")[-1]
    confirm = f"/studio/corner/knowledge/{doc.pk}/versions/{v1.pk}/rollback/confirm"
    assert f'href="{confirm}"' in history
    assert "/rollback\"" not in history  # no form that rolls back in one click

    response = client.get(confirm)
    assert response.status_code == 200
    assert [t.name for t in response.templates][0] == "studio/rollback.html"
    page = response.content.decode()
    assert "Roll back “Returns and refunds” to v1?" in page and "Shoppers now get v2" in page
    assert '<span class="d-del">- Unused items can be returned within 60 days' in page
    assert '<span class="d-add">+ Unused items can be returned within 30 days' in page
    assert f'action="/studio/corner/knowledge/{doc.pk}/versions/{v1.pk}/rollback"' in page
    assert f'name="expected_published" value="{v2.pk}"' in page
    doc.refresh_from_db()
    assert "60 days" in doc.body  # only asked: nothing rolled back yet

    # The published version (or a draft) has nothing to roll back to: back to the document with a message.
    response = client.get(f"/studio/corner/knowledge/{doc.pk}/versions/{v2.pk}/rollback/confirm", follow=True)
    assert "is not an earlier published version" in response.content.decode()


def test_a_new_document_starts_as_a_draft(store, owner):
    client = Client()
    client.force_login(owner)
    response = client.post("/studio/corner/knowledge/new", {"kind": "faq", "title": "Questions"})
    doc = StoreDocument.objects.get(store=store, title="Questions")
    draft = DocumentVersion.objects.get(document=doc)
    assert response["Location"] == f"/studio/corner/knowledge/{doc.pk}/drafts/{draft.pk}/"
    assert "not yet" in client.get("/studio/corner/knowledge/").content.decode()


def version_rows(store: Store) -> list[tuple]:
    return list(
        DocumentVersion.objects.filter(document__store=store).order_by("pk")
        .values_list("pk", "document_id", "version", "title", "body", "status", "note", "published_at")
    )


def test_reading_the_pages_writes_nothing_even_when_a_text_changed_behind_the_studios_back(store, versions, owner):
    doc, v1, draft = versions
    # Changed with a queryset update (no signal), and a document made before versions (none at all).
    StoreDocument.objects.filter(pk=doc.pk).update(body="Returns within 14 days only. Refunds as store credit.")
    older = StoreDocument.objects.create(store=store, kind="shipping", title="Shipping", body="We ship in 2 days.")
    client = Client()
    client.force_login(owner)
    before = version_rows(store)
    documents_before = list(StoreDocument.objects.filter(store=store).order_by("pk").values())

    listing = client.get("/studio/corner/knowledge/").content.decode()
    page = client.get(f"/studio/corner/knowledge/{doc.pk}/").content.decode()
    older_page = client.get(f"/studio/corner/knowledge/{older.pk}/").content.decode()
    client.get(f"/studio/corner/knowledge/{doc.pk}/versions/{v1.pk}/")
    client.get(f"/studio/corner/knowledge/{doc.pk}/drafts/{draft.pk}/")

    assert version_rows(store) == before
    assert list(StoreDocument.objects.filter(store=store).order_by("pk").values()) == documents_before
    assert listing.count("changed outside the studio, not yet recorded") == 2
    # The text shoppers are quoted now, read-only, above the last published version, whose text is not theirs.
    assert "Changed outside the studio, not yet recorded" in page and "it replaced v1" in page
    unrecorded = page.split('class="unrecorded"')[1].split("</div>")[0]
    assert "Returns within 14 days only." in unrecorded and "<textarea" not in unrecorded
    assert "Last published in the studio: v1" in page and "within 30 days" in page
    sentences = page.split('id="sentences"')[1].split("History")[0]
    assert "Returns within 14 days only." in sentences and "within 30 days of delivery." not in sentences
    assert "We ship in 2 days." in older_page and "quotes nothing" not in older_page
    assert "No version recorded yet." in older_page
    assert "New draft from the text shoppers are quoted" in older_page


def test_pages_in_step_say_nothing_about_outside_changes(store, versions, owner):
    doc, v1, draft = versions
    client = Client()
    client.force_login(owner)
    assert "not yet recorded" not in client.get("/studio/corner/knowledge/").content.decode()
    page = client.get(f"/studio/corner/knowledge/{doc.pk}/").content.decode()
    assert "not yet recorded" not in page.lower() and "Published: v1" in page


def test_a_new_draft_records_the_unrecorded_text_first(store, versions, owner):
    doc, v1, draft = versions
    StoreDocument.objects.filter(pk=doc.pk).update(body="Returns within 14 days only.")
    client = Client()
    client.force_login(owner)
    response = client.post(f"/studio/corner/knowledge/{doc.pk}/drafts/new")
    new = DocumentVersion.objects.filter(document=doc).order_by("-version").first()
    assert response["Location"] == f"/studio/corner/knowledge/{doc.pk}/drafts/{new.pk}/"
    recorded = documents.published_version(doc)
    assert (recorded.version, recorded.body, recorded.note) == (3, "Returns within 14 days only.",
                                                                documents.OUTSIDE_NOTE)
    assert (new.version, new.body, new.status) == (4, "Returns within 14 days only.", "draft")
    page = client.get(f"/studio/corner/knowledge/{doc.pk}/").content.decode()
    assert "not yet recorded" not in page.lower() and "Published: v3" in page
