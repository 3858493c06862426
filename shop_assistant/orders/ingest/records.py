"""What every order source is parsed into before it touches the database, and the value parsers they share.

The catalog's generic pieces are used as they are (``SourceError``, ``RowError``, ``RowProblem``, ``parse_price``):
one implementation of reading an amount or reporting a row."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from datetime import timezone as dt_timezone
from decimal import Decimal

from django.utils.dateparse import parse_date, parse_datetime

from catalog.ingest.records import RowError, RowProblem, SourceError, parse_price

__all__ = ["LineRecord", "OrderRecord", "ParsedOrders", "RowError", "RowProblem", "SourceError", "parse_price"]

FULFILLMENT = {
    "": "unfulfilled", "unfulfilled": "unfulfilled", "pending": "unfulfilled", "unshipped": "unfulfilled",
    "null": "unfulfilled", "partial": "partial", "partially_fulfilled": "partial", "fulfilled": "fulfilled",
    "shipped": "fulfilled", "in_transit": "fulfilled", "in transit": "fulfilled", "delivered": "delivered",
    "cancelled": "cancelled", "canceled": "cancelled", "restocked": "cancelled",
}  # fmt: skip


@dataclass
class LineRecord:
    title: str
    quantity: int
    price: Decimal
    variant: str = ""
    sku: str = ""
    on_sale: bool = False


@dataclass
class OrderRecord:
    number: str
    email: str
    placed_at: datetime
    where: str = ""
    financial_status: str = ""
    fulfillment_status: str = "unfulfilled"
    fulfilled_at: datetime | None = None
    delivered_at: datetime | None = None
    cancelled_at: datetime | None = None
    expected_on: date | None = None
    shipping_method: str = ""
    carrier: str = ""
    tracking_number: str = ""
    tracking_url: str = ""
    currency: str = ""
    lines: list[LineRecord] = field(default_factory=list)


@dataclass
class ParsedOrders:
    orders: list[OrderRecord] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)


def text(value: object) -> str:
    return "" if value is None else str(value).strip()


def order_number(value: object) -> str:
    """"#1001" and "1001" are the same order; the shopper types either."""
    number = text(value).lstrip("#").strip()
    if not number:
        raise RowProblem("missing order number")
    return number


def email(value: object) -> str:
    address = text(value).lower()
    if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", address):
        raise RowProblem(f"missing or invalid email {text(value)!r}")
    return address


def moment(value: object, what: str, required: bool = False) -> datetime | None:
    """A date-time as stores write it ("2026-12-02 10:15:23 -0500", ISO 8601, a date alone); naive is UTC."""
    if isinstance(value, datetime):
        parsed: datetime | None = value
    elif isinstance(value, date):
        parsed = datetime.combine(value, time(12))
    else:
        raw = text(value)
        if not raw:
            if required:
                raise RowProblem(f"missing {what}")
            return None
        raw = re.sub(r"\s+([+-]\d{2}:?\d{2}|Z)$", r"\1", raw)  # Shopify's "... -0500"
        parsed = parse_datetime(raw)
        if parsed is None:
            day = parse_date(raw)
            parsed = datetime.combine(day, time(12)) if day else None
        if parsed is None:
            raise RowProblem(f"unparsable {what} {raw!r}")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt_timezone.utc)


def day(value: object, what: str) -> date | None:
    found = moment(value, what)
    return found.date() if found else None


def fulfillment(value: object) -> str:
    raw = text(value).lower()
    if raw not in FULFILLMENT:
        raise RowProblem(f"unknown fulfillment status {text(value)!r} (expected one of: unfulfilled, partial, "
                         f"fulfilled, delivered, cancelled)")
    return FULFILLMENT[raw]


def quantity(value: object) -> int:
    raw = text(value) or "1"
    if not raw.isdigit() or int(raw) < 1:
        raise RowProblem(f"unparsable line quantity {raw!r}")
    return int(raw)


def flag(value: object) -> bool:
    return text(value).lower() in ("1", "true", "yes", "y", "sale", "on sale")


def settle(record: OrderRecord) -> OrderRecord:
    """Statuses the dates imply: a delivery date means delivered, a cancellation date cancelled."""
    if record.cancelled_at:
        record.fulfillment_status = "cancelled"
    elif record.delivered_at:
        record.fulfillment_status = "delivered"
    elif record.fulfilled_at and record.fulfillment_status == "unfulfilled":
        record.fulfillment_status = "fulfilled"
    return record
