"""Celery tasks: catalog import and product embeddings. Thin: the work is in catalog.ingest and catalog.embeddings.

Both report progress as Celery state PROGRESS (meta: run_id, phase, done, total) for whoever holds the task id,
and write it to the ImportRun row, which the admin reads without a result backend.
"""

from __future__ import annotations

import logging

from celery import shared_task

from .embeddings import embed_products
from .ingest import PROGRESS_WRITE_INTERVAL, every, execute_run
from .models import ImportRun, Store

logger = logging.getLogger(__name__)

STATE_INTERVAL = 0.5  # seconds between PROGRESS states


def _state_reporter(task, run_id: int | None):
    state_due = every(STATE_INTERVAL)

    def report(phase: str, done: int, total: int) -> None:
        if not state_due(done, total):
            return
        try:
            task.update_state(state="PROGRESS", meta={"run_id": run_id, "phase": phase, "done": done, "total": total})
        except Exception:  # noqa: BLE001 - a result backend hiccup must not fail an import
            logger.debug("could not store task progress", exc_info=True)

    return report


@shared_task(bind=True, name="catalog.ingest_catalog")
def ingest_catalog(self, run_id: int, embed: bool = True, operator: bool = False) -> dict:
    """Run the ImportRun ``run_id``; then queue the embedding of the store's new and changed products.

    ``operator``: queued by the operator's ``ingest_catalog --background``; the studio and the admin never set
    it, so their runs connect only where catalog.outbound allows (checked here, as the run connects)."""
    ImportRun.objects.filter(pk=run_id).update(task_id=self.request.id or "")
    run = ImportRun.objects.select_related("store").get(pk=run_id)
    result = execute_run(run, progress=_state_reporter(self, run_id), operator=operator)
    if result is None:
        return {"run_id": run_id, "status": run.status, "message": run.message}
    if embed:
        embed_store_products.delay(run.store_id, run_id=run_id)
    return {"run_id": run_id, "status": run.status, "summary": result.summary}


@shared_task(bind=True, name="catalog.embed_store_products")
def embed_store_products(self, store_id: int | None = None, run_id: int | None = None, force: bool = False) -> dict:
    """Embed the products of a store (all stores when ``store_id`` is None) whose text changed."""
    store = Store.objects.get(pk=store_id) if store_id is not None else None
    report = _state_reporter(self, run_id)

    write_due = every(PROGRESS_WRITE_INTERVAL)

    def progress(done: int, total: int) -> None:
        report("embedding", done, total)
        if run_id is None or not write_due(done, total):
            return
        ImportRun.objects.filter(pk=run_id).update(
            phase="embedding" if done < total else "", embedded=done, to_embed=total
        )

    try:
        outcome = embed_products(store, force=force, progress=progress)
    except Exception:
        # Pages follow a run until its embedding phase ends: a failed embedding must end it too.
        if run_id is not None:
            ImportRun.objects.filter(pk=run_id).update(phase="")
        raise
    if run_id is not None:
        run = ImportRun.objects.filter(pk=run_id).first()
        if run is not None:
            run.summary = {**run.summary, "embeddings": outcome}
            run.phase = ""
            run.save(update_fields=["summary", "phase"])
    return outcome


@shared_task(name="catalog.run_scheduled_syncs")
def run_scheduled_syncs() -> list[int]:
    """Celery beat's entry (settings.CELERY_BEAT_SCHEDULE): queue the syncs of the sources that are due."""
    from .sync import run_due_syncs

    return run_due_syncs()


@shared_task(name="catalog.embed_store_documents")
def embed_store_documents(store_id: int) -> int:
    """Embed the passages of a store's documents now (after a publish) rather than at the next shopper's question.

    The passage index is per process and rebuilt whenever a document changes (catalog.passages), so the next
    question always sees the published text; this moves the embedding cost off that question in the process
    that runs it (the web process itself with the embedded defaults' eager tasks). Returns the passage count.
    """
    from . import passages

    store = Store.objects.get(pk=store_id)
    return len(passages.store_index(store).passages)
