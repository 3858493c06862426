"""``order_cancel``: cancelling the shopper's order. An unfulfilled one becomes a cancellation request for agents;
a shipped one cannot be cancelled, and the reply says so and offers a return. Before the order is verified, the
store's own sentence on cancelling is quoted with the request for the number and email."""

from __future__ import annotations

from django.utils.translation import gettext as _

from shop_assistant.orders import replies
from shop_assistant.orders.conversations import Requested
from shop_assistant.orders.models import Order, OrderRequest

from ..composition import Composition
from .order_access import OrderArguments, answered, order_for
from .registry import Context, register

CANCEL_QUESTION = "Can I change or cancel my order?"  # a search of the store's documents, not shown


class OrderCancelArguments(OrderArguments):
    pass  # the order tools' arguments alone (a docstring would enter the planner's schema)


@register(
    "order_cancel",
    "The shopper wants to cancel their own order.",
    OrderCancelArguments,
    examples=(("please cancel order 1004", {"order_number": "1004"}), ("can I still cancel my order?", {})),
)
def order_cancel(context: Context, arguments: OrderCancelArguments) -> Composition:
    access = order_for(context, "order_cancel", arguments.order_number, arguments.email)
    order = access.order
    if order is None:
        asked = access.composition
        quotes = context.retrieve(context.store, CANCEL_QUESTION).quotes[:1]
        if quotes:  # what the store says about cancelling, quoted under the question for the number (once)
            asked.quotes = quotes
        return asked
    if order.fulfillment_status == Order.Fulfillment.CANCELLED:
        return answered(access, _(replies.ALREADY_CANCELLED).format(number=order.number))
    if order.shipped:
        reply = _(replies.CANNOT_CANCEL).format(number=order.number, date=replies.day(order.fulfilled_at or order.placed_at))
        return answered(access, reply)
    request = Requested(OrderRequest.Kind.CANCEL, order.pk, (), "", context.text)
    return answered(access, replies.requested(replies.CANCEL_REQUESTED, number=order.number), effects=[request])
