"""Ingestion from a store's own SQL database through SQLAlchemy: a SQLite file and a scratch Postgres database."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from catalog.ingest import SourceError, apply_catalog, read_source
from catalog.ingest.sql import validate_mapping
from catalog.models import Product, ProductImage, Store, StoreDocument, Variant

pytestmark = pytest.mark.django_db

MAPPING = {
    "products": {
        "table": "shop_products",
        "key": "id",
        "columns": {
            "handle": "slug", "title": "name", "description_html": "body", "vendor": "brand",
            "product_type": "category", "tags": "tags", "status": "published",
        },
    },
    "variants": {
        "table": "shop_variants",
        "product_key": "product_id",
        "columns": {"sku": "sku", "price": "price", "compare_at_price": "list_price", "inventory_quantity": "stock"},
        "options": {"Size": "size", "Colour": "colour"},
    },
    "images": {"table": "shop_images", "product_key": "product_id", "columns": {"src": "url", "position": "pos"}},
    "documents": {"table": "pages", "columns": {"kind": "kind", "title": "title", "body": "body"}},
}

# One row per variant, grouped by handle: the shape of a single denormalised query.
FLAT_MAPPING = {
    "products": {
        "query": (
            "SELECT p.slug, p.name, p.brand, v.sku, v.size, v.price, v.stock "
            "FROM shop_products p JOIN shop_variants v ON v.product_id = p.id ORDER BY v.id"
        ),
        "columns": {"handle": "slug", "title": "name", "vendor": "brand", "sku": "sku", "price": "price",
                    "inventory_quantity": "stock"},
        "options": {"Size": "size"},
    }
}


def fill_source(engine: sa.Engine) -> None:
    """A small shop database, with the kind of mess real ones have (prices stored as text)."""
    meta = sa.MetaData()
    products = sa.Table(
        "shop_products", meta,
        sa.Column("id", sa.Integer, primary_key=True), sa.Column("slug", sa.String(100)),
        sa.Column("name", sa.String(200)), sa.Column("body", sa.Text), sa.Column("brand", sa.String(100)),
        sa.Column("category", sa.String(100)), sa.Column("tags", sa.String(200)), sa.Column("published", sa.Boolean),
    )
    variants = sa.Table(
        "shop_variants", meta,
        sa.Column("id", sa.Integer, primary_key=True), sa.Column("product_id", sa.Integer),
        sa.Column("sku", sa.String(50)), sa.Column("size", sa.String(20)), sa.Column("colour", sa.String(20)),
        sa.Column("price", sa.String(20)), sa.Column("list_price", sa.Numeric(10, 2)), sa.Column("stock", sa.Integer),
    )
    images = sa.Table(
        "shop_images", meta,
        sa.Column("id", sa.Integer, primary_key=True), sa.Column("product_id", sa.Integer),
        sa.Column("url", sa.String(300)), sa.Column("pos", sa.Integer),
    )
    pages = sa.Table(
        "pages", meta,
        sa.Column("id", sa.Integer, primary_key=True), sa.Column("kind", sa.String(20)),
        sa.Column("title", sa.String(100)), sa.Column("body", sa.Text),
    )
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(products.insert(), [
            {"id": 1, "slug": "wool-scarf", "name": "Wool Scarf", "body": "<p>Warm <b>merino</b>.</p>",
             "brand": "Knitwise", "category": "Scarves", "tags": "wool,winter", "published": True},
            {"id": 2, "slug": "rain-boots", "name": "Rain Boots", "body": "", "brand": "Puddle",
             "category": "Shoes", "tags": "", "published": False},
            {"id": 3, "slug": None, "name": "Nameless", "body": "", "brand": "", "category": "", "tags": "",
             "published": True},
        ])
        conn.execute(variants.insert(), [
            {"id": 1, "product_id": 1, "sku": "SC-GRY", "size": None, "colour": "Grey", "price": "35.00",
             "list_price": Decimal("40.00"), "stock": 3},
            {"id": 2, "product_id": 1, "sku": "SC-RED", "size": None, "colour": "Red", "price": "n/a",
             "list_price": None, "stock": 1},
            {"id": 3, "product_id": 2, "sku": "RB-38", "size": "38", "colour": None, "price": "59.90",
             "list_price": None, "stock": 0},
            {"id": 4, "product_id": 2, "sku": "RB-39", "size": "39", "colour": None, "price": "59.90",
             "list_price": None, "stock": -4},
            {"id": 5, "product_id": 2, "sku": "RB-40", "size": "40", "colour": None, "price": "61",
             "list_price": None, "stock": 6},
            {"id": 6, "product_id": 99, "sku": "GHOST", "size": None, "colour": None, "price": "1",
             "list_price": None, "stock": 1},
        ])
        conn.execute(images.insert(), [
            {"id": 1, "product_id": 1, "url": "https://img.example/scarf.jpg", "pos": 1},
            {"id": 2, "product_id": 2, "url": "https://img.example/boots.jpg", "pos": 1},
        ])
        conn.execute(pages.insert(), [{"id": 1, "kind": "shipping", "title": "Shipping", "body": "Ships in 2 days."}])


def assert_imported(store: Store, result) -> None:
    reasons = {(e["where"], e["reason"]) for e in result.errors}
    assert reasons == {
        ("products row 3", "missing handle"),
        ("variants row 2", "unparsable price 'n/a'"),
        ("variants row 4", "negative inventory -4"),
        ("variants row 6", "no product with key 99"),
    }
    assert result.summary["products"] == {"created": 2, "updated": 0, "unchanged": 0, "failed": 1}
    assert result.summary["variants"] == {"created": 3, "updated": 0, "unchanged": 0, "failed": 3}
    scarf = Product.objects.get(store=store, handle="wool-scarf")
    assert (scarf.title, scarf.vendor, scarf.product_type, scarf.tags, scarf.status) == (
        "Wool Scarf", "Knitwise", "Scarves", "wool, winter", "active",
    )
    assert scarf.description == "Warm merino."
    assert scarf.option_names == ["Size", "Colour"]
    grey = Variant.objects.get(store=store, sku="SC-GRY")
    assert (grey.option1, grey.option2, grey.price, grey.compare_at_price, grey.inventory_quantity) == (
        "", "Grey", Decimal("35.00"), Decimal("40.00"), 3,
    )
    boots = Product.objects.get(store=store, handle="rain-boots")
    assert boots.status == "draft"
    assert sorted(boots.variants.values_list("sku", "option1", "price")) == [
        ("RB-38", "38", Decimal("59.90")), ("RB-40", "40", Decimal("61.00")),
    ]
    assert ProductImage.objects.filter(product__store=store).count() == 2
    assert StoreDocument.objects.get(store=store, kind="shipping").body == "Ships in 2 days."


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="sql-test", name="SQL test")


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    fill_source(engine)
    engine.dispose()
    return url


def test_sqlite_tables_through_a_mapping(store, sqlite_url):
    result = apply_catalog(store, read_source("sql", sqlite_url, mapping=validate_mapping(MAPPING)))
    assert_imported(store, result)
    again = apply_catalog(store, read_source("sql", sqlite_url, mapping=MAPPING))
    assert again.summary["products"] == {"created": 0, "updated": 0, "unchanged": 2, "failed": 1}
    assert again.summary["variants"]["unchanged"] == 3


def test_sqlite_single_query_one_row_per_variant(store, sqlite_url):
    result = apply_catalog(store, read_source("sql", sqlite_url, mapping=validate_mapping(FLAT_MAPPING)))
    reasons = {(e["where"], e["reason"]) for e in result.errors}
    # Rows of the query in variant order: row 2 is the scarf's bad price, row 4 the boots' negative stock.
    assert reasons == {("products row 2", "unparsable price 'n/a'"), ("products row 4", "negative inventory -4")}
    assert set(Product.objects.filter(store=store).values_list("handle", flat=True)) == {"wool-scarf", "rain-boots"}
    assert Variant.objects.filter(store=store).count() == 3


def test_bad_mappings_and_sources_are_refused(sqlite_url):
    with pytest.raises(SourceError, match='need "handle"'):
        validate_mapping({"products": {"table": "x", "columns": {"title": "name", "price": "p"}}})
    with pytest.raises(SourceError, match="unknown fields"):
        columns = {"handle": "a", "title": "b", "price": "c", "colour": "d"}
        validate_mapping({"products": {"table": "x", "columns": columns}})
    with pytest.raises(SourceError, match="no table 'missing'"):
        read_source("sql", sqlite_url, mapping={**MAPPING, "products": {**MAPPING["products"], "table": "missing"}})
    broken = {**MAPPING, "variants": {**MAPPING["variants"], "columns": {"price": "cost"}}}
    with pytest.raises(SourceError, match="no column 'cost'"):
        read_source("sql", sqlite_url, mapping=broken)


@pytest.mark.services
def test_postgres_scratch_database(store, postgres_url):
    server = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    name = f"catalog_ingest_{uuid.uuid4().hex[:10]}"
    with server.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        url = sa.engine.make_url(postgres_url).set(database=name)
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        fill_source(engine)
        engine.dispose()
        result = apply_catalog(
            store, read_source("sql", url.render_as_string(hide_password=False), mapping=validate_mapping(MAPPING))
        )
        assert_imported(store, result)
    finally:
        with server.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        server.dispose()
