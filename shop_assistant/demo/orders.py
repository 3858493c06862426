"""The demo store's orders: a few of each case the chat handles, dated from the day they are loaded, read through
the JSON order feed's own importer. Emails are example.com addresses; nothing here is anyone's."""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from catalog.models import Store
from shop_assistant.orders.ingest import apply_orders, read_orders
from shop_assistant.orders.models import Order

UPS = "https://www.ups.com/track?tracknum=1Z999AA10123456784"
USPS = "https://tools.usps.com/go/TrackConfirmAction?tLabels=9400111899223856928499"


def _line(title: str, sku: str, price: str, variant: str = "", quantity: int = 1, compare: str | None = None) -> dict:
    return {"title": title, "sku": sku, "price": price, "variant": variant, "quantity": quantity,
            **({"compare_at_price": compare} if compare else {})}


def demo_orders_feed() -> dict:
    now = timezone.now()

    def ago(days: float) -> str:
        return (now - timedelta(days=days)).isoformat()

    def ahead(days: int) -> str:
        return (timezone.localdate() + timedelta(days=days)).isoformat()

    boots = _line("Trailblazer Waterproof Hiking Boots", "DO-TB-9", "159.00", "US 9")
    return {"orders": [
        {"number": "1001", "email": "alex@example.com", "placed_at": ago(46), "fulfilled_at": ago(44), "delivered_at": ago(40),
         "carrier": "UPS", "tracking_url": UPS, "currency": "USD",
         "lines": [boots, _line("Merino Hiking Socks (3-Pack)", "DO-MS-M", "24.00", "M", 2)]},
        {"number": "1002", "email": "jordan@example.com", "placed_at": ago(3), "fulfilled_at": ago(2), "expected_on": ahead(3),
         "carrier": "UPS", "shipping_method": "Standard", "tracking_number": "1Z999AA10123456784", "tracking_url": UPS,
         "currency": "USD", "lines": [_line("Men's Stormshell Rain Jacket", "DO-SSM-M-BLK", "189.00", "M / Black")]},
        {"number": "1003", "email": "sam@example.com", "placed_at": ago(9), "fulfilled_at": ago(8), "delivered_at": ago(5),
         "carrier": "USPS", "tracking_url": USPS, "currency": "USD",
         "lines": [boots, _line("Featherlight Down Vest", "DO-FDV-M", "109.00", "M", compare="129.00"),
                   _line("Cascade Fleece Jacket", "DO-CF-M-FOR", "79.00", "M / Forest")]},
        {"number": "1004", "email": "riley@example.com", "placed_at": ago(0.1), "currency": "USD",
         "lines": [_line("Beam 400 Rechargeable Headlamp", "DO-B400", "44.95"), _line("Titanium Camp Mug 450 ml", "DO-TCM", "27.00")]},
        {"number": "1005", "email": "casey@example.com", "placed_at": ago(11), "fulfilled_at": ago(10), "expected_on": ahead(-4),
         "carrier": "USPS", "tracking_url": USPS, "currency": "USD", "lines": [_line("Summit 40L Backpack", "DO-S40-SLT", "149.00", "Slate")]},
        {"number": "1006", "email": "sam@example.com", "placed_at": ago(15), "fulfilled_at": ago(14), "delivered_at": ago(12),
         "carrier": "FedEx", "currency": "USD",
         "lines": [_line("Ridgeline 2-Person Tent", "DO-RT2-SAGE", "249.00", "Sage", compare="279.00")]},
    ]}


def load_demo_orders(store: Store) -> int:
    """The demo orders, once: a store that has orders keeps its own. How many were added."""
    if Order.objects.filter(store=store).exists():
        return 0
    parsed = read_orders("json", "demo orders", text=json.dumps(demo_orders_feed()))
    if parsed.errors:
        raise RuntimeError(f"the demo orders have errors: {parsed.errors[:3]}")
    return apply_orders(store, parsed).created
