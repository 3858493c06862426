"""The studio's orders page (shop_assistant/studio/order_views.py): owners upload a Shopify orders CSV or a JSON
feed, save their database as the source with its column mapping, test the connection, and see the freshness."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from shop_assistant.orders.models import Order, OrderImport, OrderSource
from tests.orders.test_ingest import MAPPING, SHOPIFY_CSV, fill_source

from .conftest import make_user

import sqlalchemy as sa


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def sqlite_url(tmp_path, settings) -> str:
    settings.CATALOG_STUDIO_ALLOW_SQLITE = True
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    fill_source(engine)
    engine.dispose()
    return url


def test_only_the_stores_owners_see_and_use_the_orders_page(store, owner, agent):
    assert _client(owner).get("/studio/corner/orders/").status_code == 200
    assert _client(agent).get("/studio/corner/orders/").status_code == 403
    upload = SimpleUploadedFile("orders.csv", SHOPIFY_CSV.encode(), content_type="text/csv")
    assert _client(agent).post("/studio/corner/orders/upload", {"file": upload}).status_code == 403
    assert not Order.objects.exists()


def test_an_upload_imports_the_orders_and_the_page_shows_when_and_how_many(store, owner):
    client = _client(owner)
    upload = SimpleUploadedFile("orders_export.csv", SHOPIFY_CSV.encode(), content_type="text/csv")
    response = client.post("/studio/corner/orders/upload", {"file": upload})
    assert response.status_code == 302
    assert sorted(Order.objects.filter(store=store).values_list("number", flat=True)) == ["1001", "1002"]
    last = OrderImport.objects.get(store=store)
    assert (last.created, last.updated, last.failed, last.source) == (2, 0, 1, "orders_export.csv")
    page = client.get("/studio/corner/orders/").content.decode()
    assert 'id="freshness"' in page and "2 added" in page and "1 refused" in page
    assert "not-an-email" in page or "line 5" in page  # the refused row, named
    feed = {"orders": [{"number": "1001", "email": "sam@example.com", "placed_at": "2026-11-28T10:00:00Z",
                        "fulfillment_status": "delivered", "lines": [{"title": "Boots", "price": "159.00"}]}]}
    client.post("/studio/corner/orders/upload",
                {"file": SimpleUploadedFile("feed.json", json.dumps(feed).encode(), content_type="application/json")})
    assert OrderImport.objects.filter(store=store).latest("created_at").updated == 1
    assert Order.objects.get(store=store, number="1001").fulfillment_status == "delivered"


def test_an_unreadable_upload_is_a_form_error(store, owner):
    response = _client(owner).post("/studio/corner/orders/upload",
                                   {"file": SimpleUploadedFile("orders.csv", b"Handle,Title\nx,y\n")})
    assert response.status_code == 400 and b"not a Shopify orders export" in response.content
    assert not Order.objects.exists()


def test_a_sql_source_is_saved_tested_and_imported_without_showing_its_password(store, owner, sqlite_url):
    client = _client(owner)
    saved = client.post("/studio/corner/orders/source", {"location": sqlite_url, "mapping_text": json.dumps(MAPPING)})
    assert saved.status_code == 302, saved.content[:2000]
    source = OrderSource.objects.get(store=store)
    assert source.mapping == MAPPING
    tested = client.post("/studio/corner/orders/source/test", follow=True).content.decode()
    assert "Connected: 2 orders read" in tested
    assert not Order.objects.exists()  # a test writes nothing
    client.post("/studio/corner/orders/source/import")
    assert sorted(Order.objects.filter(store=store).values_list("number", flat=True)) == ["3001", "3002"]
    page = client.get("/studio/corner/orders/").content.decode()
    assert "2 added" in page


def test_a_mapping_that_does_not_fit_is_reported_per_column_by_the_test(store, owner, sqlite_url):
    client = _client(owner)
    broken = json.loads(json.dumps(MAPPING))
    broken["orders"]["columns"]["email"] = "e_mail"
    broken["lines"]["columns"]["price"] = "cost"
    client.post("/studio/corner/orders/source", {"location": sqlite_url, "mapping_text": json.dumps(broken)})
    page = client.post("/studio/corner/orders/source/test", follow=True).content.decode()
    assert "orders.email -&gt; &#x27;e_mail&#x27;" in page and "lines.price -&gt; &#x27;cost&#x27;" in page


def test_a_source_outside_the_operators_list_is_refused_and_no_password_is_shown(store, owner, settings):
    settings.CATALOG_SQL_HOSTS = ["db.example.com"]
    client = _client(owner)
    refused = client.post("/studio/corner/orders/source", {
        "location": "postgresql+psycopg://shop@evil.example.net/shop", "mapping_text": json.dumps(MAPPING)})
    assert refused.status_code == 400 and not OrderSource.objects.exists()
    client.post("/studio/corner/orders/source", {
        "location": "postgresql+psycopg://shop@db.example.com/shop", "password": "s3cret-pw",
        "mapping_text": json.dumps(MAPPING)})
    assert "s3cret-pw" in OrderSource.objects.get(store=store).location
    assert b"s3cret-pw" not in client.get("/studio/corner/orders/").content


def test_the_import_schedule_is_saved_with_its_next_time(store, owner, agent, sqlite_url):
    client = _client(owner)
    assert client.post("/studio/corner/orders/source/schedule", {"schedule": "hourly"}, follow=True).status_code == 200
    assert not OrderSource.objects.exists()  # nothing saved to schedule yet
    client.post("/studio/corner/orders/source", {"location": sqlite_url, "mapping_text": json.dumps(MAPPING)})
    assert _client(agent).post("/studio/corner/orders/source/schedule", {"schedule": "daily"}).status_code == 403
    page = client.post("/studio/corner/orders/source/schedule", {"schedule": "hourly"}, follow=True).content.decode()
    source = OrderSource.objects.get(store=store)
    assert source.schedule == "hourly" and source.next_due_at is not None
    assert "Order imports: every hour." in page and 'value="hourly" selected' in page
    client.post("/studio/corner/orders/source/schedule", {"schedule": "never"})
    assert OrderSource.objects.get(store=store).schedule == "hourly"


def test_the_webhook_secret_is_shown_once_and_rotated(store, owner, agent, settings):
    from shop_assistant.orders.models import OrderWebhook, WebhookDelivery

    settings.CATALOG_FEED_ALLOWED_NETWORKS = []
    client = _client(owner)
    assert _client(agent).post("/studio/corner/orders/webhook", {"url": "https://93.184.215.14/hook"}).status_code == 403
    made = client.post("/studio/corner/orders/webhook", {"url": "https://93.184.215.14/hook"})
    webhook = OrderWebhook.objects.get(store=store)
    assert made.status_code == 200 and webhook.secret in made.content.decode()
    page = client.get("/studio/corner/orders/").content.decode()
    assert webhook.secret not in page and "https://93.184.215.14/hook" in page  # never shown again
    rotated = client.post("/studio/corner/orders/webhook/rotate").content.decode()
    new = OrderWebhook.objects.get(store=store).secret
    assert new != webhook.secret and new in rotated and webhook.secret not in rotated
    # Changing the URL keeps the secret (and does not show it).
    changed = client.post("/studio/corner/orders/webhook", {"url": "https://93.184.215.15/hook"}, follow=True)
    assert OrderWebhook.objects.get(store=store).secret == new and new not in changed.content.decode()
    # The last deliveries, with their outcome.
    WebhookDelivery.objects.create(store=store, event="order_request.accepted", url="https://93.184.215.15/hook",
                                   payload={}, status="failed", attempts=5, response_status=503, error="HTTP 503 <b>x</b>")
    page = client.get("/studio/corner/orders/").content.decode()
    assert "order_request.accepted" in page and "HTTP 503 &lt;b&gt;x&lt;/b&gt;" in page
    client.post("/studio/corner/orders/webhook/remove")
    assert not OrderWebhook.objects.exists()


def test_a_webhook_inside_the_servers_network_is_refused_when_saved(store, owner, settings):
    from shop_assistant.orders.models import OrderWebhook

    settings.CATALOG_FEED_ALLOWED_NETWORKS = []
    refused = _client(owner).post("/studio/corner/orders/webhook", {"url": "http://127.0.0.1:8080/hook"})
    assert refused.status_code == 400 and not OrderWebhook.objects.exists()
    assert "an address inside the server&#x27;s own network; a webhook must be on the public internet" in refused.content.decode()
    settings.CATALOG_FEED_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    assert _client(owner).post("/studio/corner/orders/webhook", {"url": "http://127.0.0.1:8080/hook"}).status_code == 200
