"""``order_status``: where the shopper's order is ("Order #1002 shipped on Dec 2 with UPS, tracking: ..., expected
Dec 6."), and for a parcel that has not arrived, what that status means, with the store's sentence on tracking."""

from __future__ import annotations

from pydantic import Field

from shop_assistant.orders import replies

from ..composition import TRACKING_QUESTION, Composition, tracking_quotes
from .order_access import OrderArguments, answered, order_for
from .registry import Context, register


class OrderStatusArguments(OrderArguments):
    not_arrived: bool = Field(False, description="the shopper says the parcel has not arrived")


@register(
    "order_status",
    "A question about the shopper's own order: where it is, its status, when it arrives, a parcel that has not arrived.",
    OrderStatusArguments,
    examples=(("where's my parcel??", {}), ("has order 5521 shipped yet?", {"order_number": "5521"}),
              ("my package never arrived, order 1002, email jo@example.com",
               {"order_number": "1002", "email": "jo@example.com", "not_arrived": True})),
)
def order_status(context: Context, arguments: OrderStatusArguments) -> Composition:
    access = order_for(context, "order_status", arguments.order_number, arguments.email)
    if access.order is None:
        return access.composition
    if not arguments.not_arrived:
        return answered(access, replies.status(access.order))
    # The store's sentence on tracking, asked in words that find it whatever the shopper wrote.
    quotes = tracking_quotes(context.retrieve(context.store, TRACKING_QUESTION))
    return answered(access, replies.not_arrived(access.order), quotes)
