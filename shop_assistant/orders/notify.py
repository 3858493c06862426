"""Telling the shopper how an agent decided their request: the sentence the widget shows, and the same by email
to the order's address when the shopper is gone (no connection open on the conversation when it is decided; the
console asks the open connections, ``chat.protocol.events.shopper_connected``).

The email goes through Django's email API (``EMAIL_BACKEND``, ``DEFAULT_FROM_EMAIL``: docs/operations.md) in a
Celery task (``orders.email_outcome``), never in the agent's request; it is written in the conversation's language
where the catalog in shop_assistant/locale has it (English otherwise), from fixed sentences and the agent's note,
never from a model. Only the order's own email address receives it: the address that verified the order, or the
one the store's records hold for it.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from . import background
from .models import OrderRequest

logger = logging.getLogger(__name__)

OUTCOMES = {
    (OrderRequest.Kind.RETURN, True): gettext_noop("Your return request for order #{number} was accepted."),
    (OrderRequest.Kind.RETURN, False): gettext_noop("Your return request for order #{number} was declined."),
    (OrderRequest.Kind.EXCHANGE, True): gettext_noop("Your exchange request for order #{number} was accepted."),
    (OrderRequest.Kind.EXCHANGE, False): gettext_noop("Your exchange request for order #{number} was declined."),
    (OrderRequest.Kind.CANCEL, True): gettext_noop("Your order #{number} is cancelled."),
    (OrderRequest.Kind.CANCEL, False): gettext_noop("Your request to cancel order #{number} was declined."),
}
SUBJECT = gettext_noop("{store}: your request for order #{number}")
FOOTER = gettext_noop("You asked for this in the chat on {store}'s website; the chat shows it too.")


def outcome_text(request: OrderRequest) -> str:
    """The outcome and the agent's note, in the active language: what the widget shows and the email says."""
    accepted = request.status == OrderRequest.Status.ACCEPTED
    return f"{_(OUTCOMES[(request.kind, accepted)]).format(number=request.order.number)} {request.note}".strip()


def queue_outcome_email(request: OrderRequest, language: str) -> None:
    """Email the outcome (in ``language``) once the caller's transaction commits, on a worker."""
    background.queue("orders.email_outcome", request.pk, language)


def send_outcome_email(request_id: int, language: str) -> bool:
    """Send the email of a decided request (once: a task run twice sends nothing the second time)."""
    request = OrderRequest.objects.select_related("order", "store").filter(pk=request_id).first()
    if request is None or request.status == OrderRequest.Status.PENDING or request.emailed_at is not None:
        return False
    address = request.order.email
    if not address:
        return False
    with translation.override(language or settings.LANGUAGE_CODE):
        store = request.store.name
        subject = _(SUBJECT).format(store=store, number=request.order.number)
        body = f"{outcome_text(request)}\n\n{_(FOOTER).format(store=store)}\n"
    # Marked before sending: a crash after the send must not mail the shopper again on the task's retry.
    if not OrderRequest.objects.filter(pk=request.pk, emailed_at__isnull=True).update(emailed_at=timezone.now()):
        return False
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address])
    except Exception:
        OrderRequest.objects.filter(pk=request.pk).update(emailed_at=None)  # not sent: may be tried again
        logger.exception("order request %s: the outcome email to the shopper failed", request.pk)
        raise
    return True
