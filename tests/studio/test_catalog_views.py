"""The studio's catalog pages (shop_assistant/studio/catalog_views.py): owners only on every page and action,
upload with progress and the error report, saved sources (no password shown back), product search and preview."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from catalog.models import ImportRun, ImportSource, Product, Store, Variant
from tests.catalog.test_ingest_sql import FLAT_MAPPING, fill_source

from .conftest import make_user

CSV_HEADER = ("Handle,Title,Body (HTML),Vendor,Type,Tags,Option1 Name,Option1 Value,Variant SKU,Variant Price,"
              "Variant Inventory Qty")
CSV_ROWS = [
    "trail-mug,Trail Mug,<p>Enamel mug.</p>,Camp Co,Mugs,\"camp,kitchen\",Colour,Blue,MUG-BLUE,12.50,7",
    "trail-mug,,,,,,,Red,MUG-RED,12.50,0",
    "head-torch,Head Torch,<p>300 lumens.</p>,Camp Co,Lights,night,Title,Default Title,TORCH-1,29.00,3",
    "bad-price,Bad Price,,Camp Co,Mugs,,Title,Default Title,BAD-1,twelve,1",
]


def csv_upload(rows=CSV_ROWS, name="catalog.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, ("\n".join([CSV_HEADER, *rows]) + "\n").encode(), content_type="text/csv")


@pytest.fixture
def no_embedding(monkeypatch):
    monkeypatch.setattr("catalog.tasks.embed_store_products.delay", lambda *a, **k: None)


@pytest.fixture
def catalog_rows(store):
    run = ImportRun.objects.create(store=store, format="shopify", source="x.csv", status="succeeded",
                                   errors=[{"line": 3, "where": "line 3", "handle": "h", "sku": "", "reason": "bad"}])
    source = ImportSource.objects.create(store=store, name="feed", kind="json", location="https://example.com/f.json")
    product = Product.objects.create(store=store, handle="mug", title="Mug")
    return run, source, product


def every_page_and_action(rows) -> list[tuple[str, str, dict]]:
    run, source, product = rows
    base = "/studio/corner/catalog"
    return [
        ("get", f"{base}/", {}),
        ("get", f"{base}/?q=mug", {}),
        ("get", f"{base}/runs/{run.pk}/", {}),
        ("get", f"{base}/runs/{run.pk}/errors.csv", {}),
        ("get", f"{base}/products/{product.pk}/", {}),
        ("post", f"{base}/upload", {"file": csv_upload()}),
        ("post", f"{base}/sources", {"name": "evil", "kind": "json", "location": "https://evil.example/f.json",
                                     "schedule": "off"}),
        ("post", f"{base}/sources/{source.pk}/sync", {}),
        ("post", f"{base}/sources/{source.pk}/schedule", {"schedule": "hourly"}),
        ("post", f"{base}/sources/{source.pk}/delete", {}),
    ]


def snapshot(store: Store):
    return (
        list(ImportRun.objects.filter(store=store).values_list("pk", "status")),
        list(ImportSource.objects.filter(store=store).values_list("pk", "name", "schedule")),
        list(Product.objects.filter(store=store).values_list("pk", "title")),
    )


@pytest.mark.parametrize("who", ["anonymous", "agent", "owner_of_another_store", "staff_without_store"])
def test_everyone_but_the_owner_gets_403_on_every_catalog_page_and_action(store, catalog_rows, who):
    client = Client()
    if who == "agent":
        client.force_login(make_user("adam", store, "agent"))
    elif who == "owner_of_another_store":
        client.force_login(make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"))
    elif who == "staff_without_store":
        client.force_login(make_user("sam", None, None))
    before = snapshot(store)
    for method, url, data in every_page_and_action(catalog_rows):
        response = getattr(client, method)(url, data)
        if who == "anonymous" and method == "get":
            assert response.status_code == 302, (who, url, response.status_code)
            assert response["Location"].startswith("/accounts/login/?next=")
            continue
        assert response.status_code == 403, (who, method, url, response.status_code)
    assert snapshot(store) == before


def test_another_stores_run_and_product_are_not_found_through_ones_own_store(store, owner, catalog_rows):
    run, source, product = catalog_rows
    other = Store.objects.create(slug="other", name="Other")
    theirs = make_user("oscar", other, "owner")
    client = Client()
    client.force_login(theirs)
    for url in (f"/studio/other/catalog/runs/{run.pk}/", f"/studio/other/catalog/runs/{run.pk}/errors.csv",
                f"/studio/other/catalog/products/{product.pk}/"):
        assert client.get(url).status_code == 404
    assert client.post(f"/studio/other/catalog/sources/{source.pk}/delete").status_code == 404
    assert ImportSource.objects.filter(pk=source.pk).exists()


def test_forms_need_the_csrf_token(store, owner, catalog_rows):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post("/studio/corner/catalog/upload", {"file": csv_upload()}).status_code == 403
    assert client.post(f"/studio/corner/catalog/sources/{catalog_rows[1].pk}/delete").status_code == 403
    page = client.get("/studio/corner/catalog/").content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 4


def test_the_owner_uploads_and_follows_the_run_to_its_report(store, owner, no_embedding,
                                                             django_capture_on_commit_callbacks):
    client = Client()
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/studio/corner/catalog/upload", {"file": csv_upload()})
    run = ImportRun.objects.get(store=store)
    assert response.status_code == 302 and response["Location"] == f"/studio/corner/catalog/?run={run.pk}#runs"
    page = client.get(response["Location"]).content.decode()
    # The page polls the run it just started even though eager mode finished it already.
    assert f'data-run="{run.pk}"' in page and 'data-watch="1"' in page and "studio/catalog.js" in page

    # Issue 40: the banner said "Import #N of catalog.csv started." over a run that had finished. It follows the
    # run: here it is over already.
    banner = page.split('id="run-banner"')[1].split("</li>")[0]
    assert f"Import #{run.pk} of catalog.csv finished: 2 added, 0 updated, 0 archived, 1 rejected." in banner
    assert "started" not in page.split('id="runs"')[0]

    progress = client.get(f"/studio/corner/catalog/runs/{run.pk}/").json()
    assert progress["status"] == "succeeded" and progress["finished"] and progress["percent"] == 100
    assert progress["banner"] == (
        f"Import #{run.pk} of catalog.csv finished: 2 added, 0 updated, 0 archived, 1 rejected.")
    assert progress["counts"] == {"added": 2, "updated": 0, "archived": 0, "rejected": 1}
    assert progress["done"] == progress["total"] == 3  # the bad product counts as read
    report = client.get(progress["errors_url"])
    assert report["Content-Type"].startswith("text/csv")
    assert 'filename="import-' in report["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(report.content.decode())))
    # Every reason of the refused row: its price, and its product left without a variant.
    assert {row["handle"] for row in rows} == {"bad-price"} and {row["line"] for row in rows} == {"5"}
    assert any("price" in row["reason"].lower() for row in rows)

    # Products with their stock per variant; search over title, type, tags and SKU.
    assert Variant.objects.get(sku="MUG-RED").inventory_quantity == 0
    for query, expected in [("torch", ["Head Torch"]), ("mugs", ["Trail Mug"]), ("kitchen", ["Trail Mug"]),
                            ("MUG-RED", ["Trail Mug"]), ("nothing-like-it", [])]:
        page = client.get("/studio/corner/catalog/", {"q": query}).content.decode()
        found = [title for title in ("Trail Mug", "Head Torch") if f"<td>{title}<br>" in page]
        assert found == expected, query
    page = client.get("/studio/corner/catalog/", {"q": "mug"}).content.decode()
    assert "MUG-BLUE" in page and "7 in stock" in page and "0 in stock" in page


def test_a_bad_upload_is_refused_with_the_reason(store, owner):
    client = Client()
    client.force_login(owner)
    response = client.post("/studio/corner/catalog/upload", {"file": csv_upload(name="catalog.txt")})
    assert response.status_code == 400 and b"Cannot tell the format" in response.content
    assert not ImportRun.objects.exists()


def test_a_sql_source_keeps_its_password_out_of_the_page(store, owner, settings):
    settings.CATALOG_SQL_HOSTS = ["db.example.com"]
    client = Client()
    client.force_login(owner)
    mapping = '{"products": {"query": "SELECT slug, name, price FROM p", "columns": ' \
              '{"handle": "slug", "title": "name", "price": "price"}}}'
    data = {"name": "warehouse", "kind": "sql", "location": "postgresql+psycopg://shop@db.example.com/shop",
            "password": "hunter2-secret", "mapping_text": mapping, "schedule": "daily"}
    response = client.post("/studio/corner/catalog/sources", data)
    assert response.status_code == 302
    source = ImportSource.objects.get(store=store, name="warehouse")
    assert "hunter2-secret" in source.location  # kept for the sync...
    assert source.next_due_at > timezone.now() + timedelta(hours=23)
    page = client.get("/studio/corner/catalog/").content.decode()
    assert "hunter2-secret" not in page and "db.example.com" in page  # ...never shown

    # A form shown again after an error does not echo the password either (typed into the URL or its field).
    bad = {**data, "name": "warehouse", "location": "postgresql+psycopg://shop:inline-secret@db.example.com/shop"}
    response = client.post("/studio/corner/catalog/sources", bad)
    assert response.status_code == 400
    assert b"already have a source" in response.content
    assert b"inline-secret" not in response.content and b"hunter2-secret" not in response.content

    # A SQLite file on the server is no studio source (it could be the app's own database).
    local = {**data, "name": "local", "location": "sqlite:////etc/shop.db"}
    assert client.post("/studio/corner/catalog/sources", local).status_code == 400
    assert not ImportSource.objects.filter(name="local").exists()


def test_schedule_sync_and_delete_a_source(store, owner, no_embedding, django_capture_on_commit_callbacks, tmp_path,
                                           settings):

    settings.CATALOG_STUDIO_ALLOW_SQLITE = True
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    fill_source(sa.create_engine(url))
    client = Client()
    client.force_login(owner)
    response = client.post("/studio/corner/catalog/sources", {
        "name": "shop db", "kind": "sql", "location": url, "mapping_text": json.dumps(FLAT_MAPPING),
        "schedule": "off"})
    assert response.status_code == 302, response.content[:2000]
    source = ImportSource.objects.get(store=store)
    assert source.next_due_at is None
    client.post(f"/studio/corner/catalog/sources/{source.pk}/schedule", {"schedule": "hourly"})
    source.refresh_from_db()
    assert source.schedule == "hourly" and source.next_due_at > timezone.now() + timedelta(minutes=59)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/studio/corner/catalog/sources/{source.pk}/sync")
    source.refresh_from_db()
    assert source.last_run.status == "succeeded", source.last_run.message
    page = client.get("/studio/corner/catalog/").content.decode()
    counts = source.last_run.counts
    assert f"{counts['added']} added, 0 updated, 0 archived" in page and counts["added"] >= 2

    client.post(f"/studio/corner/catalog/sources/{source.pk}/delete")
    assert not ImportSource.objects.filter(pk=source.pk).exists()
    assert ImportRun.objects.filter(pk=source.last_run_id).exists()  # the history stays


def test_the_product_preview_is_the_chats_retrieval(store, owner):
    from catalog.embeddings import embed_products

    product = Product.objects.create(store=store, handle="trail-mug", title="Trail Mug", product_type="Mugs")
    Variant.objects.create(store=store, product=product, sku="MUG-1", price="12.50", currency="USD",
                           inventory_quantity=4)
    other = Product.objects.create(store=store, handle="head-torch", title="Head Torch", product_type="Lights")
    Variant.objects.create(store=store, product=other, sku="TORCH-1", price="29.00", currency="USD")
    embed_products(store)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studio/corner/catalog/products/{product.pk}/").content.decode()
    assert "This product is among the cards" in page and 'data-sku="MUG-1"' in page and "12.50" in page
    page = client.get(f"/studio/corner/catalog/products/{product.pk}/", {"q": "a head torch"}).content.decode()
    assert "is not among the cards" in page and 'data-sku="TORCH-1"' in page


def test_a_run_is_followed_until_its_products_are_embedded(store, owner):
    run = ImportRun.objects.create(store=store, format="json", source="f.json", status="succeeded",
                                   phase="embedding", processed=3, total=3, embedded=1, to_embed=4)
    client = Client()
    client.force_login(owner)
    state = client.get(f"/studio/corner/catalog/runs/{run.pk}/").json()
    assert (state["status"], state["phase"], state["finished"]) == ("succeeded", "embedding", False)
    # The embedding phase's own progress, not the finished import's 3 / 3.
    assert (state["done"], state["total"], state["percent"]) == (1, 4, 25)
    assert state["label"] == "imported; embedding for search 1 / 4"
    assert "imported; embedding for search 1 / 4" in client.get("/studio/corner/catalog/").content.decode()
    ImportRun.objects.filter(pk=run.pk).update(phase="", embedded=4)
    state = client.get(f"/studio/corner/catalog/runs/{run.pk}/").json()
    assert (state["finished"], state["done"], state["total"], state["percent"], state["label"]) == (
        True, 3, 3, 100, "succeeded")


@pytest.mark.parametrize("kind,location,hosts,reason", [
    ("json", "http://127.0.0.1:8000/feed.json", [], "inside the server"),
    ("csv", "http://169.254.169.254/latest/meta-data/", [], "inside the server"),
    ("json", "http://localhost/feed.json", [], "inside the server"),
    ("json", "http://127.0.0.1%3A8000/metrics", [], "percent-encoded"),
    ("sql", "postgresql+psycopg://postgres@127.0.0.1:5432/shop", [], "Database sources are off on this server"),
    ("sql", "postgresql+psycopg://postgres@10.0.0.5/shop", ["db.example.com"], "not among the database servers"),
    ("sql", "postgresql+psycopg://postgres@/shop?host=127.0.0.1", ["db.example.com"], "?host= is not allowed"),
    ("sql", "postgresql+psycopg://postgres@/shop", ["db.example.com"], "names no database server"),
])
def test_a_source_cannot_point_inside_the_servers_network(store, owner, settings, kind, location, hosts, reason):
    settings.CATALOG_SQL_HOSTS = hosts
    client = Client()
    client.force_login(owner)
    mapping = json.dumps(FLAT_MAPPING) if kind == "sql" else ""
    response = client.post("/studio/corner/catalog/sources", {
        "name": "inside", "kind": kind, "location": location, "mapping_text": mapping, "schedule": "off"})
    assert response.status_code == 400 and reason in response.content.decode()
    assert not ImportSource.objects.filter(store=store).exists()


def test_the_form_says_when_database_sources_are_off(store, owner, settings):
    client = Client()
    client.force_login(owner)
    settings.CATALOG_SQL_HOSTS = []
    assert "Database (SQL) sources are off on this server" in client.get("/studio/corner/catalog/").content.decode()
    settings.CATALOG_SQL_HOSTS = ["db.example.com"]
    assert "sources are off" not in client.get("/studio/corner/catalog/").content.decode()


def test_an_upload_of_only_a_byte_order_mark_is_refused_as_empty(store, owner):
    client = Client()
    client.force_login(owner)
    empty = SimpleUploadedFile("catalog.csv", b"\xef\xbb\xbf", content_type="text/csv")
    response = client.post("/studio/corner/catalog/upload", {"file": empty})
    assert response.status_code == 400 and b"The file is empty." in response.content
    assert not ImportRun.objects.exists()


def test_a_json_upload_nested_100000_deep_fails_its_run_with_the_reason(store, owner, no_embedding,
                                                                        django_capture_on_commit_callbacks):
    client = Client()
    client.force_login(owner)
    deep = SimpleUploadedFile("deep.json", b"[" * 100_000 + b"]" * 100_000, content_type="application/json")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/studio/corner/catalog/upload", {"file": deep})
    assert response.status_code == 302
    run = ImportRun.objects.get(store=store)
    assert run.status == "failed" and run.message == "the JSON is nested more than 100 levels deep"
    assert "nested more than 100 levels deep" in client.get("/studio/corner/catalog/").content.decode()


def test_a_mapping_nested_100000_deep_is_a_form_error(store, owner, settings):
    settings.CATALOG_SQL_HOSTS = ["db.example.com"]
    client = Client()
    client.force_login(owner)
    response = client.post("/studio/corner/catalog/sources", {
        "name": "deep", "kind": "sql", "location": "postgresql+psycopg://shop@db.example.com/shop",
        "mapping_text": "[" * 100_000 + "]" * 100_000, "schedule": "off"})
    assert response.status_code == 400 and b"not valid JSON" in response.content


def test_the_import_banner_follows_the_runs_state(store, owner):
    """While the run goes, the banner says it runs (the page's script replaces it from the progress endpoint);
    once it is over, the same banner says how it ended: never "started" after the end."""
    run = ImportRun.objects.create(store=store, format="shopify", source="feed.csv", status="running", total=10,
                                   processed=4, phase="writing")
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studio/corner/catalog/?run={run.pk}").content.decode()
    banner = page.split('id="run-banner"')[1].split("</li>")[0]
    assert f'data-run="{run.pk}"' in banner
    assert f"Import #{run.pk} of feed.csv is running: running 4 / 10 (writing)." in banner
    assert client.get("/studio/corner/catalog/").content.decode().count('id="run-banner"') == 0  # only for ?run=

    ImportRun.objects.filter(pk=run.pk).update(status="failed", message="the file has no header row")
    progress = client.get(f"/studio/corner/catalog/runs/{run.pk}/").json()
    assert (progress["banner_level"], progress["banner"]) == (
        "error", f"Import #{run.pk} of feed.csv failed: the file has no header row")
    page = client.get(f"/studio/corner/catalog/?run={run.pk}").content.decode()
    assert 'class="msg-error"' in page.split('id="run-banner"')[0][-40:] + page.split('id="run-banner"')[1][:30]
