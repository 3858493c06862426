"""Celery tasks of the orders: the owner's webhook, the outcome by email to a shopper who left, scheduled imports.
Thin: the work is in ``webhooks``, ``notify`` and ``imports``; ``background.queue`` sends the first two.
"""

from __future__ import annotations

from celery import shared_task

from .imports import run_due_imports
from .notify import send_outcome_email
from .webhooks import deliver


@shared_task(name="orders.deliver_webhook", ignore_result=True)
def deliver_webhook(delivery_id: int) -> None:
    deliver(delivery_id)


@shared_task(name="orders.email_outcome", ignore_result=True)
def email_outcome(request_id: int, language: str) -> None:
    send_outcome_email(request_id, language)


@shared_task(name="orders.run_scheduled_imports")
def run_scheduled_imports() -> list[int]:
    """Celery beat's entry (settings.CELERY_BEAT_SCHEDULE): import the order sources that are due."""
    return run_due_imports()
