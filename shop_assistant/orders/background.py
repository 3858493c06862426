"""Running the orders' Celery tasks off the caller's request: ``queue`` sends a task by name once the caller's
transaction commits (the worker must find the rows). With the embedded defaults (no Redis: Celery runs tasks
eagerly, in the caller) it runs the eager task on this process's own background thread instead, so that an
agent's decision never waits on a slow webhook or mail server (``ORDERS_TASKS_IN_THREAD``, on by default; tests
turn it off to run the tasks in line). The tasks themselves are in ``tasks`` (registered by the app's ``ready``).
"""

from __future__ import annotations

import logging
import queue as queues
import threading

from celery import current_app
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
