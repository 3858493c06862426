"""Shopify's orders CSV export: one row per line item; the order's own columns are on its first row, and rows of
one order share its ``Name`` (#1001). Address and payment columns are there in the export and are never read.

Tracking columns are not in every export (apps add them): ``Tracking Number``, ``Tracking Company`` or
``Carrier``, ``Tracking URL``, ``Delivered at``, ``Expected delivery``; each is read where present.
"""

from __future__ import annotations

import csv
from typing import TextIO

from . import records as r
from .records import LineRecord, OrderRecord, ParsedOrders, RowError, RowProblem, SourceError

REQUIRED = ("name", "email", "lineitem name", "lineitem quantity", "lineitem price")


def _line(get) -> LineRecord:
    name = r.text(get("lineitem name"))
    if not name:
        raise RowProblem("missing Lineitem name")
    title, _, variant = name.rpartition(" - ") if " - " in name else (name, "", "")
    compare = r.parse_price(get("lineitem compare at price"), "Lineitem compare at price", required=False)
    price = r.parse_price(get("lineitem price"), "Lineitem price")
    return LineRecord(
        title=title.strip(), variant=r.text(get("lineitem variant")) or variant.strip(), sku=r.text(get("lineitem sku")),
        quantity=r.quantity(get("lineitem quantity")), price=price,
        on_sale=bool(compare and price is not None and compare > price) or r.flag(get("lineitem on sale")),
    )


def _order(get, number: str, where: str) -> OrderRecord:
    record = OrderRecord(
        number=number, email=r.email(get("email")), where=where,
        placed_at=r.moment(get("created at") or get("paid at") or get("fulfilled at"), "Created at", required=True),
        financial_status=r.text(get("financial status")).lower(),
        fulfillment_status=r.fulfillment(get("fulfillment status")),
        fulfilled_at=r.moment(get("fulfilled at"), "Fulfilled at"),
        delivered_at=r.moment(get("delivered at"), "Delivered at"),
        cancelled_at=r.moment(get("cancelled at"), "Cancelled at"),
        expected_on=r.day(get("expected delivery"), "Expected delivery"),
        shipping_method=r.text(get("shipping method")),
        carrier=r.text(get("tracking company") or get("carrier")),
        tracking_number=r.text(get("tracking number")),
        tracking_url=r.text(get("tracking url")),
        currency=r.text(get("currency")).upper()[:3],
    )
    return r.settle(record)


def parse_shopify_orders(stream: TextIO) -> ParsedOrders:
    """Parse a Shopify orders export. ``stream`` must be opened with ``newline=""``."""
    reader = csv.reader(stream)
    try:
        header = next(reader)
    except StopIteration:
        raise SourceError("the file is empty") from None
    columns = {name.strip().lower(): i for i, name in enumerate(header)}
    missing = [name for name in REQUIRED if name not in columns]
    if missing:
        raise SourceError(f"not a Shopify orders export: no column {', '.join(repr(m.title()) for m in missing)}")
    parsed = ParsedOrders()
    by_number: dict[str, OrderRecord | None] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue

        def get(name: str, row=row) -> str:
            index = columns.get(name)
            return row[index] if index is not None and index < len(row) else ""

        where = f"line {line}"
        try:
            number = r.order_number(get("name"))
            if number not in by_number:
                by_number[number] = None
                by_number[number] = _order(get, number, where)
                parsed.orders.append(by_number[number])
            order = by_number[number]
            if order is None:
                continue  # its first row failed and was reported
            order.lines.append(_line(get))
        except RowProblem as problem:
            parsed.errors.append(RowError(line, where, str(problem), handle=r.text(get("name"))))
    return parsed
