"""Order imports: a Shopify orders export, a JSON feed, and the store's own database (SQLite and PostgreSQL),
with per-column mapping errors and the operator's allow-list checked as the SQL source connects."""

from __future__ import annotations

import json
import uuid
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
import sqlalchemy as sa

from catalog.models import Store
from shop_assistant.orders.ingest import MappingError, SourceError, apply_orders, read_orders
from shop_assistant.orders.models import Order

pytestmark = pytest.mark.django_db

SHOPIFY_CSV = """Name,Email,Financial Status,Paid at,Fulfillment Status,Fulfilled at,Currency,Created at,Lineitem quantity,Lineitem name,Lineitem price,Lineitem compare at price,Lineitem sku,Shipping Method,Billing Address1,Payment Method,Tracking Company,Tracking Number,Tracking URL
#1001,Sam@Example.com,paid,2026-11-28 10:00:00 -0500,fulfilled,2026-12-02 09:30:00 -0500,USD,2026-11-28 09:58:00 -0500,1,Trailblazer Waterproof Hiking Boots - US 9,159.00,,DO-TB-9,Standard,1 Secret Street,Visa ending 4242,UPS,1Z999,https://track.example/1Z999
#1001,,,,,,,,2,Merino Hiking Socks (3-Pack) - M,24.00,30.00,DO-MS-M,,,,,,
#1002,jo@example.com,pending,,unfulfilled,,USD,2026-12-04 12:00:00 -0500,1,Beam 400 Rechargeable Headlamp,44.95,,DO-B400,Express,2 Hidden Road,Mastercard,,,
#1003,not-an-email,paid,,fulfilled,,USD,2026-12-01 12:00:00 -0500,1,Folding Camp Chair,49.00,,DO-FCC,Standard,,,,,
"""


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="orders-test", name="Orders test")


def test_a_shopify_orders_export_one_row_per_line_item(store):
    parsed = read_orders("shopify", "orders.csv", text=SHOPIFY_CSV)
    assert [(e.where, e.reason) for e in parsed.errors] == [("line 5", "missing or invalid email 'not-an-email'")]
    result = apply_orders(store, parsed)
    assert (result.created, result.updated, result.failed) == (2, 0, 1)
    shipped = Order.objects.get(store=store, number="1001")
    assert shipped.email == "sam@example.com" and shipped.fulfillment_status == "fulfilled"
    assert shipped.fulfilled_at == datetime(2026, 12, 2, 14, 30, tzinfo=timezone.utc)
    assert (shipped.carrier, shipped.tracking_number, shipped.tracking_url) == ("UPS", "1Z999", "https://track.example/1Z999")
    lines = list(shipped.lines.values_list("title", "variant", "quantity", "price", "on_sale"))
    assert lines == [("Trailblazer Waterproof Hiking Boots", "US 9", 1, Decimal("159.00"), False),
                     ("Merino Hiking Socks (3-Pack)", "M", 2, Decimal("24.00"), True)]
    # The export's address and payment columns are never stored anywhere.
    stored = json.dumps(list(Order.objects.filter(store=store).values()), default=str)
    assert "Secret Street" not in stored and "4242" not in stored
    assert Order.objects.get(store=store, number="1002").fulfillment_status == "unfulfilled"
    again = apply_orders(store, read_orders("shopify", "orders.csv", text=SHOPIFY_CSV))
    assert (again.created, again.updated) == (0, 2) and shipped.lines.count() == 2


def test_a_json_feed_with_delivery_and_expected_dates(store):
    feed = {"orders": [
        {"number": "#2001", "email": "a@example.com", "placed_at": "2026-11-01T10:00:00Z", "fulfillment_status": "shipped",
         "fulfilled_at": "2026-11-02", "delivered_at": "2026-11-05T15:00:00Z", "expected_on": "2026-11-06",
         "carrier": "USPS", "lines": [{"title": "Folding Camp Chair", "quantity": 1, "price": "49.00", "on_sale": True}]},
        {"number": "2002", "email": "b@example.com", "placed_at": "yesterday", "lines": []},
    ]}
    parsed = read_orders("json", "orders.json", text=json.dumps(feed))
    assert [e.reason for e in parsed.errors] == ["unparsable placed_at 'yesterday'"]
    apply_orders(store, parsed)
    order = Order.objects.get(store=store, number="2001")
    assert order.fulfillment_status == "delivered" and order.expected_on == date(2026, 11, 6)
    assert order.lines.get().on_sale
    with pytest.raises(SourceError, match="not valid JSON"):
        read_orders("json", "x.json", text="{nope")


MAPPING = {
    "orders": {"table": "shop_orders", "key": "id",
               "columns": {"number": "order_no", "email": "mail", "placed_at": "created", "fulfillment_status": "state",
                           "fulfilled_at": "shipped", "carrier": "carrier", "tracking_url": "track_link"}},
    "lines": {"table": "shop_order_items", "order_key": "order_id",
              "columns": {"title": "name", "variant": "size", "quantity": "qty", "price": "unit_price"}},
}


def fill_source(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE shop_orders (id INTEGER PRIMARY KEY, order_no TEXT, mail TEXT, created TEXT, "
                             "state TEXT, shipped TEXT, carrier TEXT, track_link TEXT, street TEXT, card TEXT)"))
        conn.execute(sa.text("CREATE TABLE shop_order_items (id INTEGER PRIMARY KEY, order_id INTEGER, name TEXT, "
                             "size TEXT, qty INTEGER, unit_price TEXT)"))
        conn.execute(sa.text(
            "INSERT INTO shop_orders VALUES (1, '3001', 'kim@example.com', '2026-12-01 10:00:00', 'shipped', "
            "'2026-12-02 08:00:00', 'UPS', 'https://track.example/3001', '9 Private Lane', '4111'), "
            "(2, '3002', 'lee@example.com', '2026-12-03 10:00:00', 'unfulfilled', NULL, NULL, NULL, NULL, NULL)"))
        conn.execute(sa.text("INSERT INTO shop_order_items VALUES (1, 1, 'Summit 40L Backpack', 'Slate', 1, '149.00'), "
                             "(2, 2, 'Titanium Camp Mug 450 ml', '', 2, '27.00'), (3, 9, 'Orphan', '', 1, '1.00')"))


def assert_imported(store: Store, parsed) -> None:
    assert [(e.where, e.reason) for e in parsed.errors] == [("lines row 3", "no order with key 9")]
    apply_orders(store, parsed)
    shipped = Order.objects.get(store=store, number="3001")
    assert (shipped.fulfillment_status, shipped.carrier, shipped.tracking_url) == ("fulfilled", "UPS", "https://track.example/3001")
    assert list(shipped.lines.values_list("title", "variant", "price")) == [("Summit 40L Backpack", "Slate", Decimal("149.00"))]
    assert Order.objects.get(store=store, number="3002").lines.get().quantity == 2


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    fill_source(engine)
    engine.dispose()
    return url


def test_sqlite_through_a_mapping(store, sqlite_url):
    assert_imported(store, read_orders("sql", sqlite_url, mapping=MAPPING))


def test_every_missing_column_is_reported_on_its_own(sqlite_url):
    broken = {"orders": {**MAPPING["orders"], "columns": {**MAPPING["orders"]["columns"], "email": "e_mail",
                                                          "carrier": "shipper"}},
              "lines": MAPPING["lines"]}
    with pytest.raises(MappingError) as raised:
        read_orders("sql", sqlite_url, mapping=broken)
    assert [(p.section, p.field, p.column) for p in raised.value.problems] == [
        ("orders", "email", "e_mail"), ("orders", "carrier", "shipper")]
    assert "orders.email -> 'e_mail'" in str(raised.value) and "orders.carrier -> 'shipper'" in str(raised.value)
    with pytest.raises(MappingError) as raised:
        read_orders("sql", sqlite_url, mapping={"orders": {"table": "shop_orders", "columns": {"number": "order_no", "colour": "x"}}})
    assert {(p.field, p.reason.split(" (")[0]) for p in raised.value.problems} == {
        ("colour", "unknown field"), ("email", "required field not mapped"), ("placed_at", "required field not mapped")}


def test_the_lines_columns_are_reported_with_the_orders(sqlite_url):
    broken = {"orders": {**MAPPING["orders"], "columns": {**MAPPING["orders"]["columns"], "email": "e_mail"}},
              "lines": {**MAPPING["lines"], "columns": {**MAPPING["lines"]["columns"], "price": "cost"}}}
    with pytest.raises(MappingError) as raised:
        read_orders("sql", sqlite_url, mapping=broken)
    assert [(p.section, p.field, p.column) for p in raised.value.problems] == [
        ("orders", "email", "e_mail"), ("lines", "price", "cost")]


def test_the_source_is_read_only(store, sqlite_url):
    writing = {"orders": {"query": "DELETE FROM shop_orders RETURNING id AS order_no, 'x@example.com' AS mail, "
                                   "'2026-01-01' AS created",
                          "columns": {"number": "order_no", "email": "mail", "placed_at": "created"}}}
    with pytest.raises(SourceError, match="readonly|read-only|read only"):
        read_orders("sql", sqlite_url, mapping=writing)
    engine = sa.create_engine(sqlite_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM shop_orders")).scalar() == 2
    engine.dispose()


def test_a_store_owners_source_must_pass_the_operators_allow_list(sqlite_url, settings):
    settings.CATALOG_SQL_HOSTS = ["db.allowed.example:5432/shop"]
    settings.CATALOG_STUDIO_ALLOW_SQLITE = False
    with pytest.raises(SourceError, match="SQLite file on the server cannot be a studio source"):
        read_orders("sql", sqlite_url, mapping=MAPPING, restricted=True)
    with pytest.raises(SourceError, match="not among the database servers the operator allows"):
        read_orders("sql", "postgresql+psycopg://u:secret@10.0.0.5:5432/shop", mapping=MAPPING, restricted=True)
    settings.CATALOG_SQL_HOSTS = []
    with pytest.raises(SourceError, match="database sources are off") as raised:
        read_orders("sql", "postgresql+psycopg://u:secret@db.allowed.example/shop", mapping=MAPPING, restricted=True)
    assert "secret" not in str(raised.value)


@pytest.mark.services
def test_postgres_scratch_database_and_its_allow_list(store, postgres_url, settings):
    server = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    name = f"orders_ingest_{uuid.uuid4().hex[:10]}"
    with server.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        url = sa.engine.make_url(postgres_url).set(database=name)
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        fill_source(engine)
        engine.dispose()
        rendered = url.render_as_string(hide_password=False)
        settings.CATALOG_SQL_HOSTS = [f"{url.host}:{url.port or 5432}/{name}"]
        assert_imported(store, read_orders("sql", rendered, mapping=MAPPING, restricted=True))
        settings.CATALOG_SQL_HOSTS = [f"{url.host}:{url.port or 5432}/another"]
        with pytest.raises(SourceError, match="not among the database servers"):
            read_orders("sql", rendered, mapping=MAPPING, restricted=True)
        writing = {"orders": {"query": "DELETE FROM shop_orders RETURNING order_no, mail, created",
                              "columns": {"number": "order_no", "email": "mail", "placed_at": "created"}}}
        with pytest.raises(SourceError, match="read-only"):
            read_orders("sql", rendered, mapping=writing)
    finally:
        with server.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        server.dispose()
