"""The spool: chat messages waiting for the database, in a local file, replayed once writes work again.

A message that neither Celery nor a direct write could store is appended here (``append``, fsynced); it is written
after the next successful write, by the web process's replay thread (``start_replayer``), or by
``manage.py replay_chat_spool``. Every write is idempotent (keyed by the message id), so a replay never makes a copy.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections
from django.db.utils import DataError

from shop_assistant.runtime import metrics

from .writes import write_message

logger = logging.getLogger(__name__)


def path() -> Path:
    return Path(settings.CHAT_SPOOL_DIR) / "messages.jsonl"


@contextmanager
def _lock(suffix: str = ".lock", blocking: bool = True) -> Iterator[bool]:
    """An exclusive lock across processes on this machine (the worker and daphne); yields whether it was taken
    (always, when ``blocking``).

    ``.lock`` guards the file (appending, rewriting: moments); ``.replay`` lets one replay run at a time. A
    replay writes to the database without holding ``.lock``: a database that hangs must not stop a message
    from being spooled, which is what the spool is for."""
    spool = path()
    spool.parent.mkdir(parents=True, exist_ok=True)
    with open(spool.with_suffix(suffix), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def append(payload: dict[str, Any]) -> None:
    """Append the payload durably (fsync) to the spool; OSError when the spool cannot be written."""
    line = json.dumps(payload, ensure_ascii=True) + "\n"
    with _lock():
        with open(path(), "a", encoding="ascii") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
    metrics.SPOOLED.inc()


def check() -> None:
    """Raise OSError unless a message could be spooled now: opens what ``append`` opens, writes nothing."""
    with _lock():
        with open(path(), "a", encoding="ascii"):
            pass


def depth() -> int:
    """Messages waiting in the spool."""
    try:
        with open(path(), "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except (FileNotFoundError, NotADirectoryError):  # no spool file can exist there: nothing waits
        return 0


metrics.SPOOL_DEPTH.set_function(depth)


def _lines() -> list[str]:
    try:
        return [line for line in path().read_text(encoding="ascii").splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def replay() -> int:
    """Write the spooled messages, oldest first; stops at the first database error and keeps the rest.

    A line the database refuses for good (integrity, bad data) moves to ``rejected.jsonl`` next to the spool,
    so it neither blocks the others nor disappears. Returns how many were written (0 while another replay runs).
    """
    written = 0
    with _lock(".replay", blocking=False) as mine:
        if not mine:
            return 0
        with _lock():
            lines = _lines()
        done = 0  # lines handled (written or set aside), from the top
        for line in lines:
            payload = json.loads(line)
            try:
                write_message(payload)
            except (IntegrityError, DataError) as exc:
                logger.error("spooled chat message %s refused by the database: %s", payload.get("id"), exc)
                with open(path().with_name("rejected.jsonl"), "a", encoding="ascii") as rejected:
                    rejected.write(line + "\n")
            except DatabaseError as exc:
                logger.warning("replaying the chat spool stopped, database still unavailable: %s", exc)
                break
            else:
                written += 1
            done += 1
        if done:
            with _lock():
                # Only appends happened meanwhile (one replay at a time): the file still starts with ``lines``.
                remaining = _lines()[done:]
                spool = path()
                tmp = spool.with_suffix(".tmp")
                tmp.write_text("".join(line + "\n" for line in remaining), encoding="ascii")
                os.replace(tmp, spool)  # atomic: a crash mid-replay leaves the old file; rewrites are idempotent
    if written:
        logger.info("replayed %d spooled chat messages", written)
    return written


_replayer: threading.Thread | None = None


def start_replayer(interval: float = 10.0) -> None:
    """A daemon thread that replays the spool every ``interval`` seconds while it holds anything (idempotent)."""
    global _replayer
    if _replayer is not None and _replayer.is_alive():
        return

    def loop() -> None:
        while True:
            time.sleep(interval)
            try:
                if depth():
                    close_old_connections()
                    replay()
            except Exception:  # noqa: BLE001 - the loop must outlive any one failure
                logger.exception("chat spool replay failed")

    _replayer = threading.Thread(target=loop, name="chat-spool-replayer", daemon=True)
    _replayer.start()
