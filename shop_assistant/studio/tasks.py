"""The studio's background work: scoring a prompt version (eager, in the request, in the embedded default)."""

from __future__ import annotations

from celery import shared_task

from . import scoring


@shared_task(name="studio.score_version", ignore_result=True)
def score_version(version_id: int, force: bool = False) -> None:
    """Score a version (and the published version if it has no score) on the store's evaluation questions."""
    scoring.score_for_publish(version_id, force=force)


def start_scoring(version_id: int, force: bool = False) -> None:
    """Queue the scoring; in the embedded default (eager Celery) it has run when this returns."""
    scoring.mark_running(version_id)
    score_version.delay(version_id, force)
