"""The ingest_catalog and load_demo_store commands, the Celery tasks (eager) and the admin upload form."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import sqlalchemy as sa
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from catalog import ingest
from catalog.embeddings import DIMENSIONS, embed_products
from catalog.models import ImportRun, Product, Store
from catalog.tasks import embed_store_products, ingest_catalog

from .conftest import count_shopify_export
from .test_ingest_sql import MAPPING, fill_source

pytestmark = pytest.mark.django_db


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="cmd-test", name="Command test")


def run_command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_ingest_command_prints_progress_and_summary(store, shopify_samples_dir):
    path = shopify_samples_dir / "jewelery.csv"
    expected = count_shopify_export(path)
    out, err = run_command("ingest_catalog", str(path), "--store", store.slug, "--no-embed")

    assert f"products: {expected.products} created, 0 updated, 0 unchanged, 0 failed" in out
    assert f"variants: {expected.variants} created, 0 updated, 0 unchanged, 0 failed" in out
    assert "importing" in err and f"{expected.products}/{expected.products}" in err and "100%" in err
    run = ImportRun.objects.get(store=store)
    assert (run.status, run.format) == ("succeeded", "shopify")
    assert (run.processed, run.total) == (expected.products, expected.products)
    assert run.summary["products"]["created"] == expected.products

    # --background goes through the Celery task (eager here, as without REDIS_URL) and follows the run's row.
    out, err = run_command("ingest_catalog", str(path), "--store", store.slug, "--no-embed", "--background")
    assert f"products: 0 created, 0 updated, {expected.products} unchanged, 0 failed" in out
    assert "REDIS_URL is not set" in err
    assert ImportRun.objects.filter(store=store, status="succeeded").count() == 2


def test_ingest_command_embeds_and_handles_sql_with_a_mapping_file(store, tmp_path, embedding_model):
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    fill_source(engine)
    engine.dispose()
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps(MAPPING))

    out, _ = run_command("ingest_catalog", url, "--store", store.slug, "--mapping", str(mapping))

    assert "products: 2 created" in out
    assert "variants row 2: unparsable price 'n/a' [wool-scarf SC-RED]" in out
    assert "embeddings: 2 computed, 0 unchanged" in out
    run = ImportRun.objects.get(store=store)
    assert run.format == "sql" and run.summary["embeddings"]["embedded"] == 2
    assert all(len(bytes(p.embedding)) == DIMENSIONS * 4 for p in Product.objects.filter(store=store))


def test_ingest_command_refuses_what_it_cannot_do(store, tmp_path):
    with pytest.raises(CommandError, match="cannot tell the format"):
        run_command("ingest_catalog", str(tmp_path / "catalog.txt"), "--store", store.slug)
    with pytest.raises(CommandError, match="no store 'nope'"):
        run_command("ingest_catalog", "x.csv", "--store", "nope")
    with pytest.raises(CommandError, match="needs --mapping"):
        run_command("ingest_catalog", "sqlite:///x.db", "--store", store.slug)
    with pytest.raises(CommandError, match="cannot read"):
        run_command("ingest_catalog", str(tmp_path / "missing.csv"), "--store", store.slug, "--no-embed")
    assert ImportRun.objects.get(store=store).status == "failed"


def test_celery_task_records_progress_and_summary(store, shopify_samples_dir, monkeypatch):
    path = shopify_samples_dir / "home-and-garden.csv"
    expected = count_shopify_export(path)
    run = ImportRun.objects.create(store=store, format="shopify", source=str(path))
    states = []
    original = ingest_catalog.update_state
    monkeypatch.setattr(ingest_catalog, "update_state", lambda **kw: (states.append(kw), original(**kw)))
    rows_seen = []
    real_report = ingest.execute_run

    def execute_and_watch(run_arg, progress=None, operator=False):
        def watch(phase, done, total):
            # The row is written before the callback: what the admin would read at this moment.
            rows_seen.append(ImportRun.objects.values_list("phase", "processed", "total").get(pk=run_arg.pk))
            progress(phase, done, total)

        return real_report(run_arg, progress=watch, operator=operator)

    monkeypatch.setattr("catalog.tasks.execute_run", execute_and_watch)
    monkeypatch.setattr(ingest, "PROGRESS_WRITE_INTERVAL", 0.0)

    # A file of this server: only the operator's command (ingest_catalog --background) queues such a run.
    result = ingest_catalog.delay(run.pk, embed=False, operator=True).get()

    run.refresh_from_db()
    assert run.status == "succeeded" and run.task_id and run.started_at and run.finished_at
    assert (run.processed, run.total) == (expected.products, expected.products)
    assert run.summary["products"]["created"] == expected.products
    assert run.summary["variants"]["created"] == expected.variants
    assert result["summary"] == run.summary
    writing = [row for row in rows_seen if row[0] == "writing"]
    assert [row[1] for row in writing] == list(range(expected.products + 1))
    assert {row[2] for row in writing} == {expected.products}
    assert states and all(s["state"] == "PROGRESS" for s in states)
    assert states[-1]["meta"] == {
        "run_id": run.pk, "phase": "writing", "done": expected.products, "total": expected.products,
    }


def test_celery_task_marks_an_unreadable_source_failed(store, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[1, 2")
    run = ImportRun.objects.create(store=store, format="json", source=str(path))
    result = ingest_catalog.delay(run.pk, operator=True).get()
    run.refresh_from_db()
    assert run.status == "failed" and "invalid JSON" in run.message
    assert result["status"] == "failed"


def test_embedding_task_skips_unchanged_products(store, embedding_model):
    products = [
        {"handle": f"item-{i}", "title": title, "price": "5", "sku": f"I{i}"}
        for i, title in enumerate(["Red kite", "Wooden yo-yo", "Chess set"])
    ]
    ingest.apply_catalog(store, ingest.read_source("json", "", text=json.dumps(products)))

    first = embed_store_products.delay(store.pk).get()
    assert (first["embedded"], first["unchanged"]) == (3, 0)
    kite = Product.objects.get(store=store, handle="item-0")
    vector = np.frombuffer(bytes(kite.embedding), dtype=np.float32)
    assert vector.shape == (DIMENSIONS,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    assert embed_store_products.delay(store.pk).get()["embedded"] == 0

    kite.title = "Red stunt kite"
    kite.save()
    again = embed_store_products.delay(store.pk).get()
    assert (again["embedded"], again["unchanged"]) == (1, 2)
    kite.refresh_from_db()
    assert not np.array_equal(np.frombuffer(bytes(kite.embedding), dtype=np.float32), vector)


def test_embedding_progress_is_written_to_the_run(store, embedding_model, monkeypatch):
    """The studio's page reads the run row: after the import, it follows the products being embedded."""
    products = [{"handle": f"lamp-{i}", "title": f"Desk lamp {i}", "price": "20", "sku": f"L{i}"} for i in range(5)]
    ingest.apply_catalog(store, ingest.read_source("json", "", text=json.dumps(products)))
    run = ImportRun.objects.create(store=store, format="json", source="lamps.json", status="succeeded",
                                   processed=5, total=5)
    rows = []

    def embed_in_pairs(store_arg, *, force, progress):
        def watch(done, total):
            progress(done, total)
            run_row = ImportRun.objects.get(pk=run.pk)
            rows.append((run_row.phase, run_row.embedded, run_row.to_embed, run_row.percent, run_row.label))

        return embed_products(store_arg, force=force, progress=watch, batch_size=2)

    monkeypatch.setattr("catalog.tasks.embed_products", embed_in_pairs)
    monkeypatch.setattr("catalog.tasks.PROGRESS_WRITE_INTERVAL", 0.0)
    embed_store_products.delay(store.pk, run_id=run.pk).get()

    assert rows == [
        ("embedding", 0, 5, 0, "imported; embedding for search 0 / 5"),
        ("embedding", 2, 5, 40, "imported; embedding for search 2 / 5"),
        ("embedding", 4, 5, 80, "imported; embedding for search 4 / 5"),
        ("", 5, 5, 100, "succeeded"),
    ]
    run.refresh_from_db()
    assert run.summary["embeddings"]["embedded"] == 5 and (run.processed, run.total) == (5, 5)


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("boss", password="x-very-secret-1")
    client.force_login(user)
    return client


def test_admin_upload_runs_the_import(store, admin_client, shopify_samples_dir, django_capture_on_commit_callbacks):
    path = shopify_samples_dir / "apparel.csv"
    expected = count_shopify_export(path)
    form = admin_client.get(reverse("admin:catalog_importrun_add"))
    assert form.status_code == 200 and b'enctype="multipart/form-data"' in form.content

    upload = SimpleUploadedFile("apparel.csv", path.read_bytes(), content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("admin:catalog_importrun_add"), {"store": store.pk, "file": upload})
    assert response.status_code == 302, response.content.decode()[:2000]

    run = ImportRun.objects.get(store=store)
    assert run.status == "succeeded" and run.source == "apparel.csv" and run.created_by.username == "boss"
    assert Product.objects.filter(store=store).count() == expected.products
    page = admin_client.get(response["Location"])
    assert page.status_code == 200
    assert f"products {expected.products} created" in page.content.decode()


def test_admin_upload_lists_bad_rows(store, admin_client, django_capture_on_commit_callbacks):
    text = "Handle,Title,Variant Price\nmug,Mug,7\ncup,Cup,seven\n"
    upload = SimpleUploadedFile("mugs.csv", text.encode(), content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("admin:catalog_importrun_add"), {"store": store.pk, "file": upload})
    run = ImportRun.objects.get(store=store)
    assert run.errors[0]["line"] == 3 and run.errors[0]["reason"] == "unparsable price 'seven'"
    page = admin_client.get(response["Location"]).content.decode()
    assert "<td>line 3</td><td>cup</td><td></td><td>unparsable price &#x27;seven&#x27;</td>" in page


def test_admin_refuses_a_form_without_a_source(store, admin_client):
    response = admin_client.post(reverse("admin:catalog_importrun_add"), {"store": store.pk})
    assert response.status_code == 200
    assert "Upload a file or give a database URL" in response.content.decode()
    assert not ImportRun.objects.exists()


def test_admin_imports_are_held_to_the_operators_lists(store, admin_client, settings):
    # Only the ingest_catalog command is the operator's: the admin's form is checked like the studio's.
    settings.CATALOG_SQL_HOSTS = ["db.example.com"]
    mapping = '{"products": {"query": "SELECT 1", "columns": {"handle": "a", "title": "b", "price": "c"}}}'
    response = admin_client.post(reverse("admin:catalog_importrun_add"), {
        "store": store.pk, "database_url": "postgresql+psycopg://postgres@/shop?host=127.0.0.1",
        "mapping_text": mapping})
    assert response.status_code == 200 and "?host= is not allowed" in response.content.decode()
    empty = SimpleUploadedFile("apparel.csv", b"\xef\xbb\xbf", content_type="text/csv")
    response = admin_client.post(reverse("admin:catalog_importrun_add"), {"store": store.pk, "file": empty})
    assert response.status_code == 200 and "The file is empty." in response.content.decode()
    assert not ImportRun.objects.exists()


def test_load_demo_store_is_idempotent_and_quiet_the_second_time(monkeypatch, embedding_model):
    from shop_assistant.prompts.models import published_prompt

    monkeypatch.delenv("DEMO_STAFF_PASSWORD", raising=False)
    out, _ = run_command("load_demo_store")
    assert "http://127.0.0.1:8000/admin/" in out
    password = out.split("(shown once): ")[1].split()[0]
    store = Store.objects.get(slug="demo")
    assert store.name == "Demo Outfitters"
    products = Product.objects.filter(store=store)
    assert products.count() >= 25 and not products.filter(embedding_hash="").exists()
    assert store.documents.count() == 4
    assert published_prompt(store) is not None
    staff = get_user_model().objects.get(username="staff")
    assert staff.is_staff and staff.is_superuser and staff.check_password(password)

    out, err = run_command("load_demo_store")
    assert out == "" and err == ""
    assert Product.objects.filter(store=store).count() == products.count()


def test_admin_pages_render(store, admin_client, shopify_samples_dir):
    from catalog.ingest import apply_catalog, read_source

    apply_catalog(store, read_source("shopify", str(shopify_samples_dir / "jewelery.csv")))
    product = Product.objects.get(store=store, handle="gemstone")
    for name in ("store", "product", "variant", "productimage", "storedocument", "importrun"):
        assert admin_client.get(reverse(f"admin:catalog_{name}_changelist")).status_code == 200, name
    page = admin_client.get(reverse("admin:catalog_product_change", args=[product.pk]))
    assert page.status_code == 200 and "Purple" in page.content.decode()


def test_embed_store_documents_builds_the_passage_index_of_the_published_text(store):
    from catalog import passages
    from catalog.models import StoreDocument
    from catalog.tasks import embed_store_documents

    document = StoreDocument.objects.create(
        store=store, kind="shipping", title="Shipping", body="We ship in 2 days. Express takes 1 day."
    )
    assert embed_store_documents.delay(store.pk).get() == 2
    index = passages.store_index(store)
    assert [p.text for p in index.passages] == ["We ship in 2 days.", "Express takes 1 day."]
    document.body = "We ship in 3 days."
    document.save()
    assert embed_store_documents.delay(store.pk).get() == 1
