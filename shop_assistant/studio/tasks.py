"""The studio's background work: scoring a prompt version, on this process's scoring thread.

Not a Celery task: a score is the live model answering the store's questions, and the web process is where the
model is (the engine runs in daphne). A worker running it would load a copy of the model of its own, and an eager
task (the embedded default) would answer every question inside the owner's request. Here the request only marks
the version as being scored and returns; the thread scores one version at a time, in the order asked, and the
studio's pages follow the version's ``score_state`` (``score.json``) until the score is in.

The thread starts with the first score asked for and dies with the process; a score it was computing when the
process stopped stays "running" until ``models.SCORE_STALE_AFTER`` and can then be asked for again.
"""

from __future__ import annotations

import logging
import queue
import threading

from django.db import close_old_connections, transaction

from . import scoring

logger = logging.getLogger(__name__)

_queue: queue.Queue[tuple[int, bool]] = queue.Queue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _work() -> None:
    while True:
        version_id, force = _queue.get()
        try:
            scoring.score_for_publish(version_id, force=force)
        except Exception as error:  # noqa: BLE001 - the thread must outlive any one score
            logger.exception("scoring version %s failed", version_id)
            scoring.mark_failed(version_id, error)
        finally:
            close_old_connections()
            _queue.task_done()


def start_scorer() -> threading.Thread:
    """The scoring thread, started once (idempotent)."""
    global _thread
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="studio-scoring", daemon=True)
            _thread.start()
        return _thread


def start_scoring(version_id: int, force: bool = False) -> None:
    """Score a version (and the published version if it has no score yet) in the background; returns at once.

    The version shows as being scored from now on; the thread takes it once the caller's transaction commits."""
    scoring.mark_running(version_id)

    def queue_it() -> None:
        _queue.put((version_id, force))
        start_scorer()

    transaction.on_commit(queue_it)


def wait_idle() -> None:
    """Block until every score asked for so far is done (management commands, tests)."""
    _queue.join()
