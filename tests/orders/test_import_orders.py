"""python manage.py import_orders <store> <file | --sql URL --mapping FILE>: the operator's import, recorded as the
studio's freshness."""

from __future__ import annotations

import io
import json

import pytest
import sqlalchemy as sa
from django.core.management import CommandError, call_command

from catalog.models import Store
from shop_assistant.orders.models import Order, OrderImport

from .test_ingest import MAPPING, SHOPIFY_CSV, fill_source

pytestmark = pytest.mark.django_db


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="cmd-orders", name="Command orders")


def test_a_shopify_export_is_imported_and_recorded(store, tmp_path):
    path = tmp_path / "orders_export.csv"
    path.write_text(SHOPIFY_CSV)
    out = io.StringIO()
    call_command("import_orders", "cmd-orders", str(path), stdout=out)
    assert "2 added, 0 updated, 1 refused" in out.getvalue()
    assert sorted(Order.objects.filter(store=store).values_list("number", flat=True)) == ["1001", "1002"]
    assert OrderImport.objects.get(store=store).created == 2


def test_a_database_through_a_mapping(store, tmp_path):
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    fill_source(engine)
    engine.dispose()
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps(MAPPING))
    out = io.StringIO()
    call_command("import_orders", "cmd-orders", "--sql", url, "--mapping", str(mapping), stdout=out)
    assert sorted(Order.objects.filter(store=store).values_list("number", flat=True)) == ["3001", "3002"]


def test_mistakes_are_command_errors(store, tmp_path):
    with pytest.raises(CommandError, match="no store 'nope'"):
        call_command("import_orders", "nope", "x.csv")
    with pytest.raises(CommandError, match="needs --mapping"):
        call_command("import_orders", "cmd-orders", "--sql", "sqlite:///x.db")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(CommandError, match="empty"):
        call_command("import_orders", "cmd-orders", str(empty))
    assert OrderImport.objects.get(store=store).message  # the failure is recorded too
