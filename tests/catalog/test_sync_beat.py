"""A scheduled sync under a real ``celery beat`` and worker against Redis and the test database: nothing here
queues the sync; beat's catalog-scheduled-syncs entry (checking every second through CATALOG_SYNC_CHECK_SECONDS)
finds the source due and the worker imports it, then embeds the new products. The source is a feed on this
machine, which the worker may fetch only because the operator's setting (read from its environment) allows
127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import ImportRun, ImportSource, Product, Store
from tests.conftest import REPO_ROOT
from tests.test_celery_worker import worker  # noqa: F401  (a real worker on Redis and this database)

from .test_outbound import FeedServer

DEADLINE = 240  # seconds: the worker loads the embedding model on a shared CI machine
PRODUCTS = [{"handle": f"beat-{i}", "title": title, "price": "9.50", "sku": f"BEAT-{i}"}
            for i, title in enumerate(["Wool Scarf", "Rain Boots", "Camp Mug"])]


@pytest.fixture
def feed(monkeypatch):
    """Served from this process; the worker started after it inherits the setting that allows it."""
    monkeypatch.setenv("CATALOG_FEED_ALLOWED_NETWORKS", "127.0.0.1/32")
    server = FeedServer("127.0.0.1", PRODUCTS)
    yield server.url("/feed.json")
    server.close()


@pytest.fixture
def beat(worker, tmp_path):  # noqa: F811
    env = {**worker, "CATALOG_SYNC_CHECK_SECONDS": "1"}
    log = open(tmp_path / "beat.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "shop_assistant", "beat", "-l", "INFO",
         "-s", str(tmp_path / "beat-schedule"), "--pidfile", str(tmp_path / "beat.pid")],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    yield tmp_path / "beat.log"
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.mark.services
def test_beat_runs_a_due_scheduled_sync_on_a_real_worker(feed, beat, tmp_path):
    store = Store.objects.create(slug="beat-test", name="Beat test")
    source = ImportSource.objects.create(
        store=store, name="shop feed", kind=ImportSource.Kind.JSON, location=feed,
        schedule=ImportSource.Schedule.HOURLY, next_due_at=timezone.now() - timedelta(seconds=5),
    )
    deadline = time.monotonic() + DEADLINE
    run = None
    while time.monotonic() < deadline:
        run = ImportRun.objects.filter(import_source=source).first()
        if run is not None and run.finished and "embeddings" in run.summary:
            break
        time.sleep(1)
    assert run is not None, "beat never queued the sync:\n" + beat.read_text()[-3000:]
    assert run.status == ImportRun.Status.SUCCEEDED, run.message
    assert "embeddings" in run.summary, f"the worker never embedded the products (run #{run.pk})"
    assert run.counts["added"] == len(PRODUCTS)
    assert Product.objects.filter(store=store, embedding__isnull=False).count() == run.counts["added"]
    source.refresh_from_db()
    assert source.last_run_id == run.pk
    assert source.next_due_at > timezone.now() + timedelta(minutes=55)  # next one in an hour, not every second
    time.sleep(3)  # a few more beat ticks: still only the one sync
    assert ImportRun.objects.filter(import_source=source).count() == 1
    assert "catalog.run_scheduled_syncs" in beat.read_text()
