"""JSON catalog ingestion, upsert semantics and the demo catalog file."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from shop_assistant.demo.store import CATALOG_PATH
from catalog.ingest import SourceError, apply_catalog, read_source
from catalog.ingest.jsonfeed import parse_json_catalog
from catalog.models import Product, Store, StoreDocument, Variant

pytestmark = pytest.mark.django_db


def catalog() -> dict:
    return {
        "products": [
            {
                "handle": "canvas-tote",
                "title": "Canvas Tote",
                "description_html": "<p>A sturdy tote.</p><ul><li>Organic cotton</li></ul>",
                "vendor": "Bagworks",
                "product_type": "Bags",
                "tags": ["cotton", "tote"],
                "options": ["Color"],
                "variants": [
                    {"sku": "TOTE-NAT", "options": {"Color": "Natural"}, "price": "18.00", "inventory_quantity": 4},
                    {"sku": "TOTE-BLK", "options": {"Color": "Black"}, "price": 18, "inventory_quantity": 0,
                     "inventory_policy": "continue", "compare_at_price": "22.50"},
                ],
                "images": ["https://img.example/tote.jpg"],
            },
            {
                "handle": "enamel-pin",
                "title": "Enamel Pin",
                "description": "A tiny pin.",
                "price": "6.5",
                "sku": "PIN-1",
                "inventory_quantity": 40,
                "currency": "usd",
            },
        ],
        "documents": [{"kind": "returns", "title": "Returns", "body": "30 days, no questions asked."}],
    }


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="json-test", name="JSON test", currency="EUR")


def ingest(store: Store, data) -> object:
    return apply_catalog(store, parse_json_catalog(json.dumps(data, indent=2)))


def test_json_catalog_is_ingested(store):
    result = ingest(store, catalog())
    assert result.errors == []
    assert result.summary["products"]["created"] == 2
    assert result.summary["variants"]["created"] == 3
    assert result.summary["documents"]["created"] == 1

    tote = Product.objects.get(store=store, handle="canvas-tote")
    assert tote.tags == "cotton, tote" and tote.option_names == ["Color"]
    assert tote.description == "A sturdy tote.\n- Organic cotton"
    black = Variant.objects.get(store=store, sku="TOTE-BLK")
    assert (black.option1, black.price, black.compare_at_price, black.currency) == (
        "Black", Decimal("18.00"), Decimal("22.50"), "EUR",
    )
    assert not black.in_stock and black.backorder  # policy "continue": sold while the count is zero, not on hand
    pin = Variant.objects.get(store=store, sku="PIN-1")
    assert (pin.price, pin.currency, pin.product.description) == (Decimal("6.50"), "USD", "A tiny pin.")
    assert StoreDocument.objects.get(store=store, kind="returns").body == "30 days, no questions asked."


def test_upsert_changes_only_what_changed(store):
    ingest(store, catalog())
    pin = Product.objects.get(store=store, handle="enamel-pin")
    pin_stamp = pin.updated_at
    natural = Variant.objects.get(store=store, sku="TOTE-NAT")
    natural_stamp = natural.updated_at

    data = catalog()
    data["products"][0]["variants"][1]["price"] = "16.00"  # one variant's price
    data["products"][0]["variants"].append({"sku": "TOTE-RED", "options": {"Color": "Red"}, "price": "18.00"})
    data["documents"][0]["body"] = "60 days."
    result = ingest(store, data)

    assert result.errors == []
    assert result.summary["products"] == {"created": 0, "updated": 1, "unchanged": 1, "failed": 0}
    assert result.summary["variants"] == {"created": 1, "updated": 1, "unchanged": 2, "failed": 0}
    assert result.summary["documents"] == {"created": 0, "updated": 1, "unchanged": 0}
    assert Variant.objects.get(store=store, sku="TOTE-BLK").price == Decimal("16.00")
    pin.refresh_from_db()
    natural.refresh_from_db()
    assert pin.updated_at == pin_stamp and natural.updated_at == natural_stamp

    # A catalog without the pin and without the red variant: both reported, neither deleted.
    data["products"] = data["products"][:1]
    data["products"][0]["variants"] = data["products"][0]["variants"][:2]
    result = ingest(store, data)
    assert result.summary["missing_products"] == ["enamel-pin"]
    assert result.summary["missing_variants"] == ["canvas-tote: TOTE-RED"]
    assert Variant.objects.filter(store=store).count() == 4


def test_bad_products_are_reported_with_their_line(store):
    data = catalog()
    data["products"].insert(1, {"title": "No Handle", "price": "3"})
    data["products"].append({"handle": "bad-stock", "title": "Bad Stock", "price": "3", "inventory_quantity": -2})
    data["products"][0]["variants"][0]["price"] = "twelve"
    text = json.dumps(data, indent=2)

    result = apply_catalog(store, parse_json_catalog(text))

    lines = text.splitlines()
    reasons = {e["reason"]: e for e in result.errors}
    no_handle = reasons["missing handle"]
    assert '"title": "No Handle"' in lines[no_handle["line"]]  # the object opens one line above its title
    assert no_handle["where"].startswith("product 2 ")
    bad_price = reasons["unparsable price 'twelve'"]
    assert bad_price["sku"] == "TOTE-NAT" and '"sku": "TOTE-NAT"' in lines[bad_price["line"]]
    assert reasons["negative inventory -2"]["handle"] == "bad-stock"
    assert set(Product.objects.filter(store=store).values_list("handle", flat=True)) == {"canvas-tote", "enamel-pin"}
    assert result.summary["products"]["failed"] == 2
    assert result.summary["variants"] == {"created": 2, "updated": 0, "unchanged": 0, "failed": 2}


def test_duplicate_skus_and_options_are_refused(store):
    data = catalog()
    data["products"][1]["sku"] = "TOTE-NAT"  # taken by the tote in the same import
    data["products"][0]["variants"].append({"sku": "TOTE-2", "options": {"Color": "Black"}, "price": "1"})
    result = ingest(store, data)
    reasons = [e["reason"] for e in result.errors]
    assert any("same options (Black)" in r for r in reasons)
    assert any("SKU 'TOTE-NAT' is also used by product 'canvas-tote'" in r for r in reasons)
    assert not Product.objects.filter(store=store, handle="enamel-pin").exists()


def test_not_a_catalog_is_refused():
    with pytest.raises(SourceError, match="invalid JSON"):
        parse_json_catalog("{not json")
    with pytest.raises(SourceError, match="list of products"):
        parse_json_catalog('{"items": 3}')


def test_demo_catalog_file_is_valid(store):
    raw = json.loads(CATALOG_PATH.read_text())
    result = apply_catalog(store, read_source("json", str(CATALOG_PATH)))
    assert result.errors == []
    assert result.summary["products"]["created"] == len(raw["products"]) >= 25
    assert result.summary["variants"]["created"] == sum(len(p["variants"]) for p in raw["products"])
    assert set(StoreDocument.objects.filter(store=store).values_list("kind", flat=True)) == {
        "returns", "shipping", "warranty", "faq",
    }
