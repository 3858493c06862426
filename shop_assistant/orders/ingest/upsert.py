"""Writing parsed orders: one order per (store, number), its lines replaced by the source's."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from catalog.models import Store

from ..models import Order, OrderLine
from .records import ParsedOrders

ORDER_COLUMNS = ("email", "financial_status", "fulfillment_status", "placed_at", "fulfilled_at", "delivered_at",
                 "cancelled_at", "expected_on", "shipping_method", "carrier", "tracking_number", "tracking_url",
                 "currency")  # fmt: skip


@dataclass
class OrdersResult:
    created: int = 0
    updated: int = 0
    failed: int = 0


@transaction.atomic
def apply_orders(store: Store, parsed: ParsedOrders) -> OrdersResult:
    result = OrdersResult(failed=len(parsed.errors))
    for record in parsed.orders:
        values = {name: getattr(record, name) for name in ORDER_COLUMNS}
        order, created = Order.objects.update_or_create(store=store, number=record.number, defaults=values)
        result.created += created
        result.updated += not created
        order.lines.all().delete()
        OrderLine.objects.bulk_create(
            OrderLine(order=order, position=i, title=line.title, variant=line.variant, sku=line.sku,
                      quantity=line.quantity, price=line.price, on_sale=line.on_sale)
            for i, line in enumerate(record.lines)
        )
    return result
