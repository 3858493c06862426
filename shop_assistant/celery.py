"""Celery app. With REDIS_URL unset, settings make every task run eagerly in-process."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")

app = Celery("shop_assistant")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="shop_assistant.health")
def health() -> dict:
    """Round trip through the broker and the database: what a worker's health check asks."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        (one,) = cursor.fetchone()
    return {"db": one == 1, "vendor": connection.vendor}
