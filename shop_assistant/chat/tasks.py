"""Celery tasks that write the chat log.

Run eagerly in the embedded default, by a worker process in the full stack. Callers go through
``shop_assistant.chat.recording.record_message``, which writes directly when the broker cannot be reached.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from . import recording


@shared_task(name="chat.log_message", acks_late=True, ignore_result=True)
def log_message(payload: dict[str, Any]) -> str:
    # Idempotent (keyed by the message id), so an acks_late redelivery writes the same row again, not a copy.
    return str(recording.write_message(payload).pk)
