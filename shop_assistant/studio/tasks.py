"""The studio's background work: scoring a prompt version (eager, in the request, in the embedded default)."""

from __future__ import annotations

from celery import shared_task

from . import scoring


@shared_task(name="studio.score_version", ignore_result=True)
def score_version(version_id: int) -> None:
    """Score a draft (and the published version if it has no score) on the store's evaluation questions."""
    scoring.score_for_publish(version_id)
