"""Shopify CSV ingestion against the real sample exports and hand-made broken files."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from catalog.ingest import apply_catalog, read_source
from catalog.models import Product, ProductImage, Store, Variant

from .conftest import SAMPLE_FILES, count_shopify_export

pytestmark = pytest.mark.django_db


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="csv-test", name="CSV test", currency="EUR")


def ingest(store: Store, path) -> object:
    return apply_catalog(store, read_source("shopify", str(path)))


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_sample_export_ingests_with_exact_counts_and_rerun_is_unchanged(store, shopify_samples_dir, name):
    path = shopify_samples_dir / name
    expected = count_shopify_export(path)

    first = ingest(store, path)
    assert first.errors == []
    assert first.summary["products"] == {"created": expected.products, "updated": 0, "unchanged": 0, "failed": 0}
    assert first.summary["variants"] == {"created": expected.variants, "updated": 0, "unchanged": 0, "failed": 0}
    assert Product.objects.filter(store=store).count() == expected.products
    assert Variant.objects.filter(store=store).count() == expected.variants
    assert ProductImage.objects.filter(product__store=store).count() == expected.images
    # The export has no SKUs: each variant gets one made from its handle and options, unique in the store.
    skus = list(Variant.objects.filter(store=store).values_list("sku", flat=True))
    assert len(set(skus)) == len(skus) and all(skus)

    second = ingest(store, path)
    assert second.errors == []
    assert second.summary["products"] == {"created": 0, "updated": 0, "unchanged": expected.products, "failed": 0}
    assert second.summary["variants"] == {"created": 0, "updated": 0, "unchanged": expected.variants, "failed": 0}
    assert second.summary["images"]["created"] == second.summary["images"]["updated"] == 0
    assert second.summary["missing_products"] == []


def test_sample_fields_are_parsed(store, shopify_samples_dir):
    ingest(store, shopify_samples_dir / "jewelery.csv")
    bracelet = Product.objects.get(store=store, handle="chain-bracelet")
    assert bracelet.title == "7 Shakra Bracelet"
    assert bracelet.vendor == "Company 123" and bracelet.product_type == "Bracelet" and bracelet.tags == "Beads"
    assert bracelet.option_names == ["Color"]
    variants = list(bracelet.variants.order_by("position"))
    assert [(v.option1, v.price, v.compare_at_price, v.inventory_quantity) for v in variants] == [
        ("Blue", Decimal("42.99"), Decimal("44.99"), 1),
        ("Black", Decimal("42.99"), Decimal("44.99"), 0),
    ]
    assert [v.in_stock for v in variants] == [True, False]
    assert {v.currency for v in variants} == {"EUR"}  # the CSV has no currency: the store's
    assert variants[0].image_src.endswith("navy-blue-chakra-bracelet_925x.jpg")

    # A body with quoted newlines and HTML: the HTML is kept, the text has one line per list item.
    pendant = Product.objects.get(store=store, handle="choker-with-gold-pendant")
    assert "<li>14k yellow gold</li>" in pendant.description_html
    assert "- 14k yellow gold" in pendant.description.splitlines()
    assert "- Lobster clasp" in pendant.description.splitlines()
    assert '12" with 2.5" extender' in pendant.description

    # Single-variant products have no options ("Title" / "Default Title" in the export).
    bangle = Product.objects.get(store=store, handle="bangle-bracelet")
    assert bangle.option_names == []
    assert [(v.option1, v.sku) for v in bangle.variants.all()] == [("", "bangle-bracelet")]
    # Image-only continuation rows add images, not variants.
    crane = Product.objects.get(store=store, handle="origami-crane-necklace")
    assert crane.variants.count() == 1
    assert list(crane.images.values_list("position", flat=True)) == [1, 2, 3, 4]


def _write_csv(path, header: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerows(rows)


def _header(shopify_samples_dir) -> list[str]:
    with (shopify_samples_dir / "apparel.csv").open(newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def _product_row(handle: str, title: str = "", price: str = "10", qty: str = "1", **extra) -> dict:
    row = {"Handle": handle, "Title": title, "Variant Price": price, "Variant Inventory Qty": qty}
    row["Variant Inventory Policy"] = "deny"
    if title:
        row.update({"Vendor": "Vendor", "Published": "true", "Option1 Name": "Title", "Option1 Value": "Default Title"})
    row.update(extra)
    return row


def test_broken_rows_are_reported_with_line_numbers_and_the_rest_imports(store, shopify_samples_dir, tmp_path):
    header = _header(shopify_samples_dir)
    rows = [
        # line 2-3: the body holds a quoted newline, so the next record starts on line 4
        _product_row("alpha-shirt", "Alpha Shirt", "10", **{"Body (HTML)": "<p>Soft.</p>\n<p>Cotton.</p>",
                                                            "Option1 Name": "Size", "Option1 Value": "S"}),
        _product_row("alpha-shirt", price="11", **{"Option1 Value": "M"}),  # line 4
        _product_row("alpha-shirt", price="abc", **{"Option1 Value": "L"}),  # line 5: unparsable price
        _product_row("", "Lost Product", "5"),  # line 6: no handle
        _product_row("beta-hat", "Beta Hat", "12", qty="-3"),  # line 7: negative inventory
        _product_row("gamma-bag", "Gamma Bag", "$1,299.00"),  # line 8: fine, with a currency sign
        _product_row("delta-cap", "Delta Cap", "19,99"),  # line 9: ambiguous decimal comma
        _product_row("epsilon-mug", "", "8"),  # line 10: a product's first row without a title
    ]
    path = tmp_path / "broken.csv"
    _write_csv(path, header, rows)

    result = ingest(store, path)

    reasons = {(e["line"], e["reason"]) for e in result.errors}
    assert (5, "unparsable price 'abc'") in reasons
    assert (6, "missing handle") in reasons
    assert (7, "negative inventory -3") in reasons
    assert (9, "unparsable price '19,99'") in reasons
    assert (10, "missing title (the first row of a product must have one)") in reasons
    assert all(e["where"] == f"line {e['line']}" for e in result.errors)
    by_line = {e["line"]: e for e in result.errors}
    assert by_line[5]["handle"] == "alpha-shirt" and by_line[7]["handle"] == "beta-hat"

    assert set(Product.objects.filter(store=store).values_list("handle", flat=True)) == {"alpha-shirt", "gamma-bag"}
    shirt = Product.objects.get(store=store, handle="alpha-shirt")
    assert [(v.option1, v.price) for v in shirt.variants.order_by("position")] == [("S", 10), ("M", 11)]
    assert shirt.description == "Soft.\nCotton."
    assert Variant.objects.get(store=store, product__handle="gamma-bag").price == Decimal("1299.00")
    assert result.summary["products"] == {"created": 2, "updated": 0, "unchanged": 0, "failed": 4}
    assert result.summary["variants"] == {"created": 3, "updated": 0, "unchanged": 0, "failed": 4}


def test_not_a_shopify_file_is_refused_as_a_whole(store, tmp_path):
    from catalog.ingest import SourceError

    path = tmp_path / "other.csv"
    path.write_text("name,price\nshirt,10\n")
    with pytest.raises(SourceError, match="Handle"):
        ingest(store, path)


def test_reimport_changes_only_what_changed_and_deletes_nothing(store, shopify_samples_dir, tmp_path):
    source = shopify_samples_dir / "apparel.csv"
    ingest(store, source)
    untouched = Product.objects.get(store=store, handle="floral-white-top")
    untouched_variant = untouched.variants.get()
    stamps = (untouched.updated_at, untouched_variant.updated_at)

    with source.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    edited = []
    for row in rows:
        if row["Handle"] == "led-high-tops":
            continue  # dropped from the new export
        if row["Handle"] == "ocean-blue-shirt":
            row["Variant Price"] = "55"
        if row["Handle"] == "classic-varsity-top" and row["Option1 Value"] == "Large":
            row["Variant Inventory Qty"] = "7"
        edited.append(row)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header)
    writer.writeheader()
    writer.writerows(edited)
    path = tmp_path / "apparel-edited.csv"
    path.write_text(out.getvalue(), encoding="utf-8")

    result = ingest(store, path)
    expected = count_shopify_export(source)
    assert result.errors == []
    assert result.summary["products"] == {
        "created": 0, "updated": 2, "unchanged": expected.products - 3, "failed": 0,
    }
    assert result.summary["variants"] == {
        "created": 0, "updated": 2, "unchanged": expected.variants - 3, "failed": 0,
    }
    assert result.summary["missing_products"] == ["led-high-tops"]
    assert Product.objects.filter(store=store, handle="led-high-tops").exists()  # reported, not deleted
    assert Variant.objects.get(product__store=store, product__handle="ocean-blue-shirt").price == Decimal("55.00")
    large = Variant.objects.get(store=store, product__handle="classic-varsity-top", option1="Large")
    assert large.inventory_quantity == 7
    untouched.refresh_from_db()
    untouched_variant.refresh_from_db()
    assert (untouched.updated_at, untouched_variant.updated_at) == stamps
