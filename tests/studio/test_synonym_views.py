"""The studio's search synonyms page (shop_assistant/studio/synonym_views.py): owners only, CSRF on every form,
add, delete, upload, export, and proposals accepted before the search uses them."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from catalog import synonyms
from catalog.models import SearchSynonym, Store

from .conftest import make_user

BASE = "/studio/corner/catalog/synonyms"


@pytest.fixture(autouse=True)
def fresh_tables():
    synonyms.clear()
    yield
    synonyms.clear()


@pytest.fixture
def rows(store):
    accepted = SearchSynonym.objects.create(store=store, language="es", term="tienda", replacement="tent")
    proposed = SearchSynonym.objects.create(store=store, language="fr", term="tente", replacement="tent",
                                            status=SearchSynonym.Status.PROPOSED, source=SearchSynonym.Source.GENERATED)
    return accepted, proposed


def upload(text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile("synonyms.csv", text.encode(), content_type="text/csv")


def every_page_and_action(rows) -> list[tuple[str, str, dict]]:
    accepted, proposed = rows
    return [
        ("get", f"{BASE}/", {}),
        ("get", "/studio/corner/catalog/synonyms.csv", {}),
        ("post", f"{BASE}/add", {"language": "de", "term": "zelt", "replacement": "tent"}),
        ("post", f"{BASE}/{accepted.pk}/delete", {}),
        ("post", f"{BASE}/accept", {"all": "1"}),
        ("post", f"{BASE}/upload", {"file": upload("de,zelt,tent\n")}),
    ]


def snapshot(store: Store):
    return list(SearchSynonym.objects.filter(store=store).values_list("pk", "term", "replacement", "status"))


@pytest.mark.parametrize("who", ["anonymous", "agent", "owner_of_another_store", "staff_without_store"])
def test_everyone_but_the_owner_gets_403_on_every_page_and_action(store, rows, who):
    client = Client()
    if who == "agent":
        client.force_login(make_user("adam", store, "agent"))
    elif who == "owner_of_another_store":
        client.force_login(make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"))
    elif who == "staff_without_store":
        client.force_login(make_user("sam", None, None))
    before = snapshot(store)
    for method, url, data in every_page_and_action(rows):
        response = getattr(client, method)(url, data)
        if who == "anonymous" and method == "get":
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
            continue
        assert response.status_code == 403, (who, method, url, response.status_code)
    assert snapshot(store) == before


def test_another_stores_synonym_is_not_found_through_ones_own_store(store, rows):
    other = Store.objects.create(slug="other", name="Other")
    client = Client()
    client.force_login(make_user("oscar", other, "owner"))
    assert client.post(f"/studio/other/catalog/synonyms/{rows[0].pk}/delete").status_code == 404
    assert client.post("/studio/other/catalog/synonyms/accept", {"synonym": [rows[1].pk]}).status_code == 302
    assert SearchSynonym.objects.get(pk=rows[1].pk).status == SearchSynonym.Status.PROPOSED
    assert SearchSynonym.objects.filter(pk=rows[0].pk).exists()


def test_forms_need_the_csrf_token(store, owner, rows):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(f"{BASE}/add", {"language": "de", "term": "zelt", "replacement": "tent"}).status_code == 403
    assert client.post(f"{BASE}/{rows[0].pk}/delete").status_code == 403
    page = client.get(f"{BASE}/").content.decode()
    # add, upload, accept, one delete per synonym in use, and the navigation's log-out
    assert page.count('name="csrfmiddlewaretoken"') == 5
    assert snapshot(store) == [(r.pk, r.term, r.replacement, r.status) for r in sorted(rows, key=lambda r: r.language)]


def test_the_owner_adds_and_deletes_a_synonym_and_the_search_reads_it(store, owner):
    client = Client()
    client.force_login(owner)
    response = client.post(
        f"{BASE}/add", {"language": "es", "term": "Chaqueta impermeable", "replacement": "rain jacket"}
    )
    assert response.status_code == 302
    assert synonyms.apply(store, "¿Tienen chaquetas impermeables?", "es").query == "rain jacket"
    page = client.get(f"{BASE}/").content.decode()
    assert "Chaqueta impermeable" in page and "rain jacket" in page and "Written by the owner" in page
    row = SearchSynonym.objects.get(store=store)
    assert client.post(f"{BASE}/{row.pk}/delete").status_code == 302
    assert synonyms.apply(store, "¿Tienen chaquetas impermeables?", "es").query == "¿Tienen chaquetas impermeables?"


def test_a_bad_synonym_is_refused_with_the_reason(store, owner):
    client = Client()
    client.force_login(owner)
    response = client.post(f"{BASE}/add", {"language": "es", "term": "¿?", "replacement": "tent"})
    assert response.status_code == 400 and "The term has no word." in response.content.decode()
    assert not SearchSynonym.objects.exists()


def test_the_page_escapes_what_it_shows(store, owner):
    SearchSynonym.objects.create(
        store=store, language="es", term="<script>alert(1)</script> tienda", replacement="tent"
    )
    client = Client()
    client.force_login(owner)
    page = client.get(f"{BASE}/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; tienda" in page


def test_upload_export_and_accepting_proposals(store, owner, rows):
    client = Client()
    client.force_login(owner)
    response = client.post(f"{BASE}/upload", {"file": upload("language,term,replacement\nde,Zelt,tent\nzz,x,y\n")})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "1 added, 0 updated." in page and "line 3: language &#x27;zz&#x27; is not one of en, es, fr, de" in page

    exported = client.get("/studio/corner/catalog/synonyms.csv")
    assert exported["Content-Disposition"] == 'attachment; filename="corner-synonyms.csv"'
    assert exported.content.decode().splitlines() == ["language,term,replacement", "de,Zelt,tent", "es,tienda,tent"]

    # The proposal is listed under its own heading and not used until accepted.
    assert 'id="proposed"' in page and "Proposed translations" in page
    assert synonyms.apply(store, "une tente", "fr").query == "une tente"
    client.post(f"{BASE}/accept", {"synonym": [rows[1].pk]})
    assert synonyms.apply(store, "une tente", "fr").query == "tent"
    assert 'id="proposed"' not in client.get(f"{BASE}/").content.decode()


def test_the_catalog_page_links_to_the_synonyms(store, owner):
    client = Client()
    client.force_login(owner)
    assert f'href="{BASE}/"' in client.get("/studio/corner/catalog/").content.decode()
