"""``order_items``: what is in the shopper's order (titles, variants, quantities, prices as paid)."""

from __future__ import annotations

from shop_assistant.orders import replies

from ..composition import Composition
from .order_access import OrderArguments, answered, order_for
from .registry import Context, register


class OrderItemsArguments(OrderArguments):
    pass  # the order tools' arguments alone (a docstring would enter the planner's schema)


@register(
    "order_items",
    "What the shopper bought in their own order: its items.",
    OrderItemsArguments,
    examples=(("what was in my order 1001?", {"order_number": "1001"}),),
)
def order_items(context: Context, arguments: OrderItemsArguments) -> Composition:
    access = order_for(context, "order_items", arguments.order_number, arguments.email)
    if access.order is None:
        return access.composition
    return answered(access, replies.items(access.order))
