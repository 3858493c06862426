"""Order ingestion: a Shopify orders CSV, a JSON feed or the store's own database (SQLAlchemy, read-only).

- ``read_orders(fmt, source, *, text=None, mapping=None, restricted=False) -> ParsedOrders``
- ``apply_orders(store, parsed) -> OrdersResult``

The catalog's import decides how a source is read (a file, a feed URL through ``catalog.outbound``, an upload's
text); orders read theirs the same way, with the catalog's helpers.
"""

from __future__ import annotations

import io

from catalog.ingest import describe_source, read_text, sql_url

from .jsonfeed import parse_json_orders
from .records import ParsedOrders, SourceError
from .shopify import parse_shopify_orders
from .sql import MappingError, read_sql_orders, validate_mapping
from .upsert import OrdersResult, apply_orders

__all__ = ["MappingError", "OrdersResult", "ParsedOrders", "SourceError", "apply_orders", "read_orders",
           "validate_mapping"]


def read_orders(fmt: str, source: str, *, text: str | None = None, mapping: dict | None = None,
                restricted: bool = False) -> ParsedOrders:
    """Parse an order source (``fmt``: shopify, json or sql); ``text``, an upload's content, instead of reading
    ``source``. ``restricted``: a store owner's source, held to the operator's allow-list as it connects."""
    if fmt == "sql":
        if not mapping:
            raise SourceError("a SQL order source needs a mapping of columns to fields")
        return read_sql_orders(sql_url(source), mapping, restricted=restricted)
    content = text if text is not None else read_text(source, restricted)
    if not content.lstrip("\ufeff").strip():
        raise SourceError(f"{describe_source(source) or 'the file'} is empty")
    if fmt == "shopify":
        return parse_shopify_orders(io.StringIO(content.lstrip("\ufeff"), newline=""))
    if fmt == "json":
        return parse_json_orders(content)
    raise SourceError(f"unknown format {fmt!r} (shopify, json or sql)")
