"""Celery tasks of the orders: the owner's webhook, the outcome by email to a shopper who left, scheduled imports.
Thin: the work is in ``webhooks``, ``notify`` and ``imports``.

``queue`` sends a task once the caller's transaction commits (the worker must find the rows). With the embedded
defaults (no Redis: Celery runs tasks eagerly, in the caller) it runs the eager task on this process's own
background thread instead, so that an agent's decision never waits on a slow webhook or mail server
(``ORDERS_TASKS_IN_THREAD``, on by default when tasks are eager; tests turn it off to run them in line).
"""

from __future__ import annotations

import logging
import queue as queues
import threading

from celery import current_app, shared_task
from django.conf import settings
from django.db import close_old_connections, transaction

logger = logging.getLogger(__name__)

_pending: queues.Queue[tuple[str, tuple]] = queues.Queue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _work() -> None:
    while True:
        name, args = _pending.get()
        try:
            current_app.tasks[name].apply(args=args)
        except Exception:  # noqa: BLE001 - the thread must outlive any one task
            logger.exception("orders task %s%s failed", name, args)
        finally:
            close_old_connections()
            _pending.task_done()


def _start_thread() -> None:
    global _thread
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="orders-tasks", daemon=True)
            _thread.start()


def queue(name: str, *args: object) -> None:
    """Run the task ``name`` after the current transaction commits: on a worker, or on the background thread."""

    def send() -> None:
        if settings.CELERY_TASK_ALWAYS_EAGER and settings.ORDERS_TASKS_IN_THREAD:
            _pending.put((name, args))
            _start_thread()
        else:
            current_app.tasks[name].delay(*args)

    transaction.on_commit(send)


def wait_idle() -> None:
    """Block until the background thread has run every task queued so far (tests, management commands)."""
    _pending.join()


@shared_task(name="orders.deliver_webhook", ignore_result=True)
def deliver_webhook(delivery_id: int) -> None:
    from .webhooks import deliver

    deliver(delivery_id)


@shared_task(name="orders.email_outcome", ignore_result=True)
def email_outcome(request_id: int, language: str) -> None:
    from .notify import send_outcome_email

    send_outcome_email(request_id, language)


@shared_task(name="orders.run_scheduled_imports")
def run_scheduled_imports() -> list[int]:
    """Celery beat's entry (settings.CELERY_BEAT_SCHEDULE): import the order sources that are due."""
    from .imports import run_due_imports

    return run_due_imports()
