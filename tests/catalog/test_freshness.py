"""catalog.freshness: the catalog's stamp moves with every change, in one query, read once per planning scope."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import freshness
from catalog.models import Product, Store, StoreDocument, Variant

pytestmark = pytest.mark.django_db


@pytest.fixture
def store() -> Store:
    store = Store.objects.create(slug="corner", name="Corner Shop")
    product = Product.objects.create(store=store, handle="mug", title="Blue Mug")
    Variant.objects.create(store=store, product=product, sku="MUG-1", price=Decimal("9.00"))
    StoreDocument.objects.create(store=store, kind="returns", title="Returns", body="Return within 14 days.")
    return store


def test_one_query_gives_the_whole_stamp(store):
    with CaptureQueriesContext(connection) as queries:
        stamp = freshness.read_stamp(store)
    assert len(queries) == 1
    assert (stamp.products[0], stamp.variants[0], stamp.documents[0]) == (1, 1, 1)


@pytest.mark.parametrize("change", ["product", "variant", "document", "new product", "deleted document"])
def test_every_kind_of_change_moves_the_stamp(store, change):
    before = freshness.read_stamp(store)
    if change == "product":
        Product.objects.get(store=store).save()  # a title edit, a new description: updated_at moves
    elif change == "variant":
        variant = Variant.objects.get(store=store)
        variant.price = Decimal("7.00")
        variant.save()
    elif change == "document":
        StoreDocument.objects.get(store=store).save()
    elif change == "new product":
        Product.objects.create(store=store, handle="cup", title="Cup")
    else:
        StoreDocument.objects.filter(store=store).delete()
    assert freshness.read_stamp(store) != before


def test_other_stores_changes_leave_the_stamp_alone(store):
    before = freshness.read_stamp(store)
    other = Store.objects.create(slug="other", name="Other Shop")
    Product.objects.create(store=other, handle="mug", title="Mug")
    assert freshness.read_stamp(store) == before


def test_a_scope_reads_each_store_once_and_a_later_read_sees_what_changed_meanwhile(store):
    with freshness.one_read():
        with CaptureQueriesContext(connection) as queries:
            first = freshness.read_stamp(store)
            Product.objects.create(store=store, handle="cup", title="Cup")
            with freshness.one_read():  # nested: the outer scope's read
                assert freshness.read_stamp(store) == first
            assert freshness.read_stamp(store) == first  # one question sees one catalog
        assert sum("COUNT(*)" in query["sql"] for query in queries.captured_queries) == 1
    assert freshness.read_stamp(store) != first  # the next question sees the new product
