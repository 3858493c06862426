"""A JSON feed of orders: ``{"orders": [...]}`` or a bare list, each order with its ``lines``.

Fields: number, email, financial_status, fulfillment_status, placed_at, fulfilled_at, delivered_at, cancelled_at,
expected_on, shipping_method, carrier, tracking_number, tracking_url, currency; lines: title, variant, sku,
quantity, price, on_sale (or compare_at_price above the price).
"""

from __future__ import annotations

import json

from . import records as r
from .records import LineRecord, OrderRecord, ParsedOrders, RowError, RowProblem, SourceError


def line_from(item: dict) -> LineRecord:
    if not isinstance(item, dict):
        raise RowProblem("a line is not an object")
    price = r.parse_price(item.get("price"), "line price")
    compare = r.parse_price(item.get("compare_at_price"), "line compare-at price", required=False)
    title = r.text(item.get("title"))
    if not title:
        raise RowProblem("a line has no title")
    return LineRecord(title=title, variant=r.text(item.get("variant")), sku=r.text(item.get("sku")),
                      quantity=r.quantity(item.get("quantity")), price=price,
                      on_sale=r.flag(item.get("on_sale")) or bool(compare and compare > price))


def order_from(item: dict, where: str) -> OrderRecord:
    """One order from a mapping of our field names (the JSON feed's and the SQL mapping's)."""
    record = OrderRecord(
        number=r.order_number(item.get("number")), email=r.email(item.get("email")), where=where,
        placed_at=r.moment(item.get("placed_at"), "placed_at", required=True),
        financial_status=r.text(item.get("financial_status")).lower(),
        fulfillment_status=r.fulfillment(item.get("fulfillment_status")),
        fulfilled_at=r.moment(item.get("fulfilled_at"), "fulfilled_at"),
        delivered_at=r.moment(item.get("delivered_at"), "delivered_at"),
        cancelled_at=r.moment(item.get("cancelled_at"), "cancelled_at"),
        expected_on=r.day(item.get("expected_on"), "expected_on"),
        shipping_method=r.text(item.get("shipping_method")), carrier=r.text(item.get("carrier")),
        tracking_number=r.text(item.get("tracking_number")), tracking_url=r.text(item.get("tracking_url")),
        currency=r.text(item.get("currency")).upper()[:3],
    )
    return r.settle(record)


def parse_json_orders(content: str) -> ParsedOrders:
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise SourceError(f"not valid JSON: {exc}") from None
    items = data.get("orders") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise SourceError('a JSON order feed is {"orders": [...]} or a list of orders')
    parsed = ParsedOrders()
    for index, item in enumerate(items, 1):
        where = f"orders[{index}]"
        try:
            if not isinstance(item, dict):
                raise RowProblem("not an object")
            record = order_from(item, where)
            record.lines = [line_from(line) for line in item.get("lines") or []]
            parsed.orders.append(record)
        except RowProblem as problem:
            parsed.errors.append(RowError(index, where, str(problem), handle=r.text(item.get("number") if isinstance(item, dict) else "")))
    return parsed
