"""The demo storefront page: the store's products from catalog rows, and the widget's one script tag."""

from __future__ import annotations

from decimal import Decimal

from django.test import Client

from catalog.models import Product, Store, Variant


def make_store() -> Store:
    store = Store.objects.create(slug="shop", name="Corner <Shop>", base_url="https://corner.example")
    boots = Product.objects.create(store=store, handle="trail-boot", title="Trail Boot")
    Variant.objects.create(store=store, product=boots, sku="TB-41", option1="41", price=Decimal("89.50"),
                           currency="EUR", inventory_quantity=3)
    Variant.objects.create(store=store, product=boots, sku="TB-42", option1="42", price=Decimal("92.00"),
                           currency="EUR", inventory_quantity=0)
    hat = Product.objects.create(store=store, handle="sun-hat", title="Sun Hat")
    Variant.objects.create(store=store, product=hat, sku="SH-1", price=Decimal("15.00"), currency="EUR",
                           inventory_quantity=0)
    Product.objects.create(store=store, handle="old", title="Retired Thing", status=Product.Status.ARCHIVED)
    return store


def test_storefront_lists_active_products_with_catalog_prices(db):
    make_store()
    page = Client().get("/").content.decode()
    assert "Corner &lt;Shop&gt;" in page  # escaped
    assert "Trail Boot" in page and "from 89.50 EUR" in page and "In stock" in page
    assert "Sun Hat" in page and "15.00 EUR" in page and "Sold out" in page
    assert "Retired Thing" not in page
    assert 'href="https://corner.example/products/trail-boot"' in page
    assert '<script src="/static/widget/widget.js" data-store="shop" async></script>' in page


def test_storefront_never_links_a_non_http_url(db):
    store = make_store()
    Store.objects.filter(pk=store.pk).update(base_url="javascript:alert(1)//")
    page = Client().get("/").content.decode()
    assert "javascript:" not in page
    assert "Trail Boot" in page


def test_storefront_without_a_store_says_how_to_load_one(db):
    page = Client().get("/").content.decode()
    assert "load the demo store" in page
    assert "widget.js" not in page


def test_healthz(db):
    response = Client().get("/healthz")
    assert response.status_code == 200 and response.json()["ok"] is True
