"""Shared fixtures.

Service fixtures (`postgres_url`, `redis_url`) hand a test a real server. When it does not answer, the test
fails under CI (CI is set) and is skipped with the reason elsewhere: CI must never hide a missing service.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHOPIFY_SAMPLES_DIR = REPO_ROOT / "catalog" / "samples" / "shopify"


def service_unavailable(what: str) -> None:
    message = f"{what} is not reachable"
    if os.environ.get("CI"):
        pytest.fail(f"{message}, and CI needs it (start it as .ci/run does)", pytrace=False)
    pytest.skip(f"{message}; start it to run this test")


def _answers(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database for tests (db 15 unless TEST_REDIS_URL says otherwise)."""
    url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    if not _answers(url, 6379):
        service_unavailable(f"Redis at {url}")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A PostgreSQL server URL (SQLAlchemy form) for tests that create their own scratch database."""
    url = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    if not _answers(url, 5432):
        service_unavailable(f"PostgreSQL at {url}")
    return url


@pytest.fixture(scope="session")
def shopify_samples_dir() -> Path:
    """Shopify's public sample product exports, carried in the repository (see their readme.md)."""
    path = SHOPIFY_SAMPLES_DIR
    if not path.is_dir():
        pytest.fail(f"sample exports not found at {path}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """Before the test database is created (once, in the pytest process): the database is recreated every
    session, and a WAL left beside it by a killed run (SQLite runs in WAL mode) would be read as part of the new
    file. Not in settings: the worker and daphne subprocesses load settings too, and deleting the live
    database's WAL under them breaks it ("disk I/O error")."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3") and db.get("TEST", {}).get("NAME"):
        for suffix in ("-wal", "-shm"):
            Path(db["TEST"]["NAME"] + suffix).unlink(missing_ok=True)

