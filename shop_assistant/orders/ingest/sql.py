"""A store's own database as the order source, read through SQLAlchemy with a mapping of its columns to ours::

    {"orders": {"table": "orders", "key": "id",
                "columns": {"number": "order_no", "email": "customer_email", "placed_at": "created",
                            "fulfillment_status": "state", "fulfilled_at": "shipped_at", "carrier": "carrier",
                            "tracking_url": "tracking_link", ...}},
     "lines": {"table": "order_items", "order_key": "order_id",
               "columns": {"title": "product_name", "quantity": "qty", "price": "unit_price", ...}}}

Each section takes a "table" (optionally "schema") or a read-only "query". Read-only twice over: the transaction
is set read-only where the database has such a thing (PostgreSQL, MySQL; SQLite's ``query_only``) and rolled back
when closed. A store owner's source (``restricted``) connects only where the operator's allow-list
(``catalog.outbound.check_sql_url``) lets it, checked here, as it connects. Every mapped column that the source
lacks is reported, each on its own (``MappingError.problems``), not only the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from catalog.ingest.sql import read_from

from .jsonfeed import order_from
from .records import LineRecord, ParsedOrders, RowError, RowProblem, SourceError
from . import records as r

ORDER_FIELDS = {"number", "email", "financial_status", "fulfillment_status", "placed_at", "fulfilled_at",
                "delivered_at", "cancelled_at", "expected_on", "shipping_method", "carrier", "tracking_number",
                "tracking_url", "currency"}  # fmt: skip
LINE_FIELDS = {"title", "variant", "sku", "quantity", "price", "compare_at_price", "on_sale"}
REQUIRED = {"orders": ("number", "email", "placed_at"), "lines": ("title", "price")}


@dataclass(frozen=True)
class ColumnProblem:
    section: str
    field: str
    column: str
    reason: str

    def __str__(self) -> str:
        return f"{self.section}.{self.field} -> {self.column!r}: {self.reason}"


class MappingError(SourceError):
    """Mapped columns the source does not have: one problem per column."""

    def __init__(self, problems: list[ColumnProblem]) -> None:
        self.problems = problems
        super().__init__("the mapping does not fit the database: " + "; ".join(map(str, problems)))


def validate_mapping(mapping: Any) -> dict:
    """The mapping's shape, before connecting: every unknown or missing field named."""
    if not isinstance(mapping, dict) or not isinstance(mapping.get("orders"), dict):
        raise SourceError('the mapping needs an "orders" section')
    unknown_sections = set(mapping) - {"orders", "lines"}
    if unknown_sections:
        raise SourceError(f"unknown mapping sections: {sorted(unknown_sections)}")
    problems = []
    for name, section in mapping.items():
        fields = ORDER_FIELDS if name == "orders" else LINE_FIELDS
        if not isinstance(section, dict) or ("table" in section) == ("query" in section):
            raise SourceError(f'mapping section "{name}" needs exactly one of "table" or "query"')
        columns = section.get("columns", {})
        if not isinstance(columns, dict) or not all(isinstance(v, str) and v for v in columns.values()):
            raise SourceError(f'"columns" of "{name}" must map our field names to column names')
        problems += [ColumnProblem(name, f, columns[f], f"unknown field (allowed: {', '.join(sorted(fields))})")
                     for f in sorted(set(columns) - fields)]
        problems += [ColumnProblem(name, f, "", "required field not mapped") for f in REQUIRED[name] if f not in columns]
    if "lines" in mapping:
        if "order_key" not in mapping["lines"] or "key" not in mapping["orders"]:
            raise SourceError('with a "lines" section, "orders" needs "key" and "lines" needs "order_key"')
    if problems:
        raise MappingError(problems)
    return mapping


def _selected(conn: sa.Connection, name: str, section: dict, extra: list[str]) -> sa.CursorResult:
    """The section's rows, after checking that every mapped column is there (all missing ones reported)."""
    mapped = section.get("columns", {})
    wanted = list(dict.fromkeys([*mapped.values(), *extra]))
    if "query" in section:
        result = conn.execute(sa.text(section["query"]))
        available = set(result.keys())
        where = "the query"
    else:
        try:
            table = sa.Table(section["table"], sa.MetaData(), schema=section.get("schema"), autoload_with=conn)
        except sa.exc.NoSuchTableError:
            raise SourceError(f'no table {section["table"]!r} in the source database') from None
        available = set(table.c.keys())
        where = f"table {section['table']!r}"
    problems = [ColumnProblem(name, field, column, f"{where} has no such column")
                for field, column in mapped.items() if column not in available]
    problems += [ColumnProblem(name, "(key)", column, f"{where} has no such column")
                 for column in extra if column not in available and column not in mapped.values()]
    if problems:
        raise MappingError(problems)
    if "query" in section:
        return result
    order = list(table.primary_key.columns) or [table.c[c] for c in wanted]
    return conn.execute(sa.select(*[table.c[c] for c in wanted]).order_by(*order))


def _named(row: Mapping[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    return {field: row[column] for field, column in columns.items()}


def read_sql_orders(url: str, mapping: dict, *, restricted: bool = False) -> ParsedOrders:
    """Read the orders through ``mapping``, read-only (``catalog.ingest.sql.read_from`` says what ``restricted``
    means)."""
    validate_mapping(mapping)
    return read_from(url, lambda conn: _read(conn, mapping), restricted=restricted, read_only=True)


def _line_problems(conn: sa.Connection, mapping: dict) -> list[ColumnProblem]:
    if "lines" not in mapping:
        return []
    try:
        _selected(conn, "lines", mapping["lines"], [mapping["lines"]["order_key"]]).close()
    except MappingError as exc:
        return exc.problems
    except SourceError:
        return []  # a missing table: reported when the orders' columns are fixed
    return []


def _read(conn: sa.Connection, mapping: dict) -> ParsedOrders:
    parsed = ParsedOrders()
    o_section = mapping["orders"]
    key = o_section.get("key")
    by_key = {}
    try:
        order_rows = _selected(conn, "orders", o_section, [key] if key else [])
    except MappingError as exc:
        # The lines' columns are checked too, so that one test of the connection names every column to fix.
        raise MappingError(exc.problems + _line_problems(conn, mapping)) from None
    for number, row in enumerate(order_rows.mappings(), 1):
        where = f"orders row {number}"
        try:
            record = order_from(_named(row, o_section["columns"]), where)
        except RowProblem as problem:
            parsed.errors.append(RowError(number, where, str(problem)))
            continue
        parsed.orders.append(record)
        if key:
            by_key[row[key]] = record
    if "lines" not in mapping:
        return parsed
    l_section = mapping["lines"]
    for number, row in enumerate(_selected(conn, "lines", l_section, [l_section["order_key"]]).mappings(), 1):
        where = f"lines row {number}"
        order = by_key.get(row[l_section["order_key"]])
        if order is None:
            parsed.errors.append(RowError(number, where, f"no order with key {row[l_section['order_key']]!r}"))
            continue
        values = _named(row, l_section["columns"])
        try:
            price = r.parse_price(values.get("price"), "line price")
            compare = r.parse_price(values.get("compare_at_price"), "line compare-at price", required=False)
            order.lines.append(LineRecord(
                title=r.text(values.get("title")), variant=r.text(values.get("variant")), sku=r.text(values.get("sku")),
                quantity=r.quantity(values.get("quantity")), price=price,
                on_sale=r.flag(values.get("on_sale")) or bool(compare and compare > price)))
        except RowProblem as problem:
            parsed.errors.append(RowError(number, where, str(problem), handle=order.number))
    return parsed
