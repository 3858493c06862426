"""Whether a store's catalog changed: one read that the in-process indexes (``search``, ``passages``) compare.

Each index remembers the stamp it was built from and is rebuilt when the stamp differs, so a change made anywhere
(this process, a Celery worker, the admin, another node) is seen by the next question. The stamp is one SQL
statement: the row counts and latest ``updated_at`` of the store's products, variants and documents, and its
products' latest ``embedded_at``, and the count and latest edit of its search synonyms (``synonyms``).

A question's planning reads it once (``one_read``): retrieval, the passages and the opening then see one
consistent catalog for the cost of one query, where each of them used to read its own (six aggregate queries
per message, most of its database time).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection

from .models import Product, SearchSynonym, Store, StoreDocument, Variant


@dataclass(frozen=True)
class CatalogStamp:
    """What changes when the catalog does (counts catch deletions; ``updated_at`` edits; ``embedded_at`` new
    vectors). Each index compares only the parts it is built from."""

    products: tuple[Any, ...]  # (count, latest updated_at, latest embedded_at)
    variants: tuple[Any, ...]  # (count, latest updated_at)
    documents: tuple[Any, ...]  # (count, latest updated_at)
    synonyms: tuple[Any, ...] = ()  # (count, latest updated_at) of the store's search synonyms


_local = threading.local()


def _column(model: type, field: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(field).column)


def _aggregate(model: type, fields: tuple[str, ...], store: Store | None) -> tuple[str, list[Any]]:
    columns = ", ".join(f"MAX({_column(model, field)})" for field in fields)
    where = f" WHERE {_column(model, 'store')} = %s" if store is not None else ""
    table = connection.ops.quote_name(model._meta.db_table)
    return f"SELECT COUNT(*), {columns} FROM {table}{where}", [store.pk] if store is not None else []


def read_stamp(store: Store | None) -> CatalogStamp:
    """The stamp of ``store``'s catalog (None: every store's), in one query; inside ``one_read()`` the scope's
    first read of it."""
    held = getattr(_local, "held", None)
    key = store.pk if store is not None else None
    if held is not None and key in held:
        return held[key]
    parts = [
        _aggregate(Product, ("updated_at", "embedded_at"), store),
        _aggregate(Variant, ("updated_at",), store),
        _aggregate(StoreDocument, ("updated_at",), store),
        _aggregate(SearchSynonym, ("updated_at",), store),
    ]
    sql = "SELECT * FROM " + ", ".join(f"({query}) AS part{index}" for index, (query, _) in enumerate(parts))
    with connection.cursor() as cursor:
        cursor.execute(sql, [param for _, params in parts for param in params])
        row = cursor.fetchone()
    stamp = CatalogStamp(
        products=tuple(row[0:3]), variants=tuple(row[3:5]), documents=tuple(row[5:7]), synonyms=tuple(row[7:9])
    )
    if held is not None:
        held[key] = stamp
    return stamp


@contextmanager
def one_read() -> Iterator[None]:
    """Within it, on this thread, each store's stamp is read at most once: one question's planning sees one
    catalog. A nested scope shares the outer one's reads."""
    if getattr(_local, "held", None) is not None:
        yield
        return
    _local.held = {}
    try:
        yield
    finally:
        _local.held = None
