"""What the chat says about an order, composed from its row (never from a model), in the active language.

Disclosed: status, dates, carrier, tracking link, items. Never the address or payment (not even imported).
"""

from __future__ import annotations

from datetime import date, datetime

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from .models import Order, OrderLine

NEED_NUMBER = gettext_noop("What's your order number, and the email address on the order? I need both to look it up.")
NEED_EMAIL = gettext_noop("What's the email address on order #{number}? I need it to check that the order is yours.")
# The same words for a wrong email and a number that does not exist: nothing says whether an order exists.
NOT_FOUND = gettext_noop(
    "I couldn't find an order with that number and email address. Please check both (the email is the one your "
    "order confirmation went to), or ask for a person."
)
LIMITED = gettext_noop("I can't look up more orders in this chat right now. Please try again later, or ask for a person.")
PLACED = gettext_noop("Order #{number} was placed on {date} and hasn't shipped yet.")
SHIPPED = gettext_noop("Order #{number} shipped on {date}")
WITH_CARRIER = gettext_noop(" with {carrier}")
TRACKING = gettext_noop(", tracking: {url}")
EXPECTED = gettext_noop(", expected {date}")
DELIVERED = gettext_noop("Order #{number} was delivered on {date}.")
CANCELLED = gettext_noop("Order #{number} was cancelled on {date}.")
STILL_COMING = gettext_noop("It's still within its expected delivery date, so it should arrive soon.")
LATE = gettext_noop("It's past its expected delivery date. A person from our team can look into it: ask for a person.")
DELIVERED_MISSING = gettext_noop(
    "The carrier marked it as delivered. If you can't find it, a person from our team can help: ask for a person."
)
NOT_SHIPPED_YET = gettext_noop("It hasn't shipped yet; you'll get a tracking link by email when it does.")
ITEMS = gettext_noop("Order #{number} has: {items}.")
# A return, an exchange or a cancellation is a request that agents decide (``OrderRequest``): each reply that
# sends one says what was asked for, then ``UNTIL_DECIDED`` (``requested``), one sentence for the three.
RETURN_REQUESTED = gettext_noop("I've sent a return request for {items} from order #{number} to our team.")
EXCHANGE_REQUESTED = gettext_noop("I've sent an exchange request for {items} from order #{number}{wanted} to our team.")
CANCEL_REQUESTED = gettext_noop("Order #{number} hasn't shipped yet, so I've asked our team to cancel it.")
UNTIL_DECIDED = gettext_noop("A person will confirm it here in this chat; nothing changes on your order until then.")
FOR_WANTED = gettext_noop(" (for {wanted})")
ASK_WANTED = gettext_noop("Which size or colour would you like instead of {items} from order #{number}?")
ALREADY_CANCELLED = gettext_noop("Order #{number} is already cancelled.")
CANNOT_CANCEL = gettext_noop(
    "Order #{number} already shipped on {date}, so it can't be cancelled. Once it arrives you can return it instead."
)
NOT_DELIVERED_YET = gettext_noop("Order #{number} hasn't been delivered yet; you can start a return once it arrives.")
NOT_SHIPPED_RETURN = gettext_noop(
    "Order #{number} hasn't shipped yet, so there is nothing to return; I can ask our team to cancel it instead."
)
# The policy's sentence that decides is the answer's quote (``quotes``: shown under the reply with the document's
# title, in the widget, its history, the console and the transcripts); the reply points at it and does not
# repeat it, so the shopper reads it once.
OUTSIDE_WINDOW = gettext_noop(
    "Order #{number} was delivered on {date}, {days} days ago, which is outside our returns policy's window, so I "
    "can't start a return for it here; a person from our team can take a look: ask for a person."
)
EXCLUDED = gettext_noop("{item} can't be returned under our returns policy.")


def requested(sentence: str, **values: str) -> str:
    """The reply that sends a request to agents: ``sentence`` (one of the ``*_REQUESTED``) formatted with
    ``values``, then what happens next."""
    return f"{_(sentence).format(**values)} {_(UNTIL_DECIDED)}"


def day(value: datetime | date) -> str:
    if isinstance(value, datetime):
        value = timezone.localtime(value).date() if timezone.is_aware(value) else value.date()
    return date_format(value, "M j")


def line_text(line: OrderLine) -> str:
    name = f"{line.title} ({line.variant})" if line.variant else line.title
    return name


def items_text(lines: list[OrderLine], currency: str) -> str:
    return "; ".join(f"{line.quantity} × {line_text(line)}, {line.price} {currency}".rstrip() for line in lines)


def status(order: Order) -> str:
    """"Order #1002 shipped on Dec 2 with UPS, tracking: https://..., expected Dec 6." and the like."""
    number = order.number
    if order.fulfillment_status == Order.Fulfillment.CANCELLED:
        return _(CANCELLED).format(number=number, date=day(order.cancelled_at or order.placed_at))
    if order.fulfillment_status == Order.Fulfillment.DELIVERED:
        return _(DELIVERED).format(number=number, date=day(order.delivered_at or order.fulfilled_at or order.placed_at))
    if not order.shipped:
        return _(PLACED).format(number=number, date=day(order.placed_at))
    text = _(SHIPPED).format(number=number, date=day(order.fulfilled_at or order.placed_at))
    if order.carrier or order.shipping_method:
        text += _(WITH_CARRIER).format(carrier=order.carrier or order.shipping_method)
    if order.tracking_url or order.tracking_number:
        text += _(TRACKING).format(url=order.tracking_url or order.tracking_number)
    if order.expected_on:
        text += _(EXPECTED).format(date=day(order.expected_on))
    return text + "."


def not_arrived(order: Order) -> str:
    """Status, then what that means for a parcel the shopper has not received."""
    if order.fulfillment_status == Order.Fulfillment.DELIVERED:
        extra = _(DELIVERED_MISSING)
    elif not order.shipped:
        extra = _(NOT_SHIPPED_YET) if order.fulfillment_status != Order.Fulfillment.CANCELLED else ""
    elif order.expected_on and order.expected_on < timezone.localdate():
        extra = _(LATE)
    elif order.expected_on:
        extra = _(STILL_COMING)
    else:
        extra = ""
    return f"{status(order)} {extra}".strip()


def items(order: Order) -> str:
    return _(ITEMS).format(number=order.number, items=items_text(list(order.lines.all()), order.currency))
