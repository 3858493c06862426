"""Shared fixtures.

Service fixtures (`postgres_url`, `redis_url`) hand a test a real server. When it does not answer, the test
fails under CI (CI is set) and is skipped with the reason elsewhere: CI must never hide a missing service.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHOPIFY_SAMPLES_DIR = REPO_ROOT / "catalog" / "samples" / "shopify"


def screenshot_dir(folder: str) -> Path:
    """Where a browser walk saves its pictures: docs/<folder> with SAVE_SCREENSHOTS=1 (to refresh the docs), else a
    scratch folder, so that running the tests leaves the working tree as it was. Either way the pictures are taken."""
    if os.environ.get("SAVE_SCREENSHOTS"):
        path = REPO_ROOT / "docs" / folder
    else:
        path = Path(tempfile.gettempdir()) / "shop-assistant-screenshots" / folder
    path.mkdir(parents=True, exist_ok=True)
    return path


# What makes a test a database test: pytest-django's fixtures that open the test database (a fixture of ours that
# needs one, such as `store`, brings `db` into the test's fixture closure), or its `django_db` marker.
DATABASE_FIXTURES = frozenset({
    "db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server",
    "django_db_setup",
})


def uses_database(item: pytest.Item) -> bool:
    """The test opens the test database, directly or through one of its fixtures."""
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))) or item.get_closest_marker("django_db") is not None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests", action="store_true",
        help="run only the tests that open the database (CI's PostgreSQL pass: the others ran in the first pass, and "
             "the backend cannot change them)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--database-tests"):
        return
    keep, dropped = [], []
    for item in items:
        (keep if uses_database(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


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



# --- faults: a database that refuses writes, a spool that cannot be written -----------------------------------


class _ReadOnly:
    """Puts each raw database connection in the database's own read-only mode whenever Django makes a cursor on
    it, in any thread (the chat writes from worker threads), and back at the end. The database itself then
    refuses the writes with its own error: SQLite ``PRAGMA query_only`` ("attempt to write a readonly
    database"), PostgreSQL read-only transactions ("cannot execute INSERT in a read-only transaction", SQLSTATE
    25006)."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.turned: list = []

    def turn(self, wrapper) -> None:
        raw = wrapper.connection
        if raw is None:
            return
        if not any(raw is seen for seen in self.turned):
            self.turned.append(raw)
        if self.vendor == "sqlite":
            raw.execute("PRAGMA query_only = ON")  # a flag of the connection, not undone by a rollback
            return
        import psycopg

        # PostgreSQL undoes a SET with the transaction it was made in, so it is made again for every cursor:
        # outside a transaction as the session's default, at the start of one for that transaction.
        with raw.cursor() as cursor:
            if raw.autocommit:
                cursor.execute("SET default_transaction_read_only = on")
            elif raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                cursor.execute("SET TRANSACTION READ ONLY")  # opens the transaction, read-only

    def restore(self) -> None:
        for raw in self.turned:
            try:
                if self.vendor == "sqlite":
                    raw.execute("PRAGMA query_only = OFF")
                    continue
                if not raw.autocommit:
                    raw.rollback()
                with raw.cursor() as cursor:
                    cursor.execute("SET default_transaction_read_only = off")
                if not raw.autocommit:
                    raw.commit()
            except Exception:  # noqa: BLE001 - a connection closed since is no longer read-only either
                pass


@pytest.fixture
def read_only_database(transactional_db):
    """``read_only_database.start()``: the test database refuses every write from then until the test ends;
    reads still work."""
    from django.db import connection
    from django.db.backends.base.base import BaseDatabaseWrapper

    faults = _ReadOnly(connection.vendor)
    original = BaseDatabaseWrapper._cursor

    def cursor(self, name=None):
        made = original(self, name)
        faults.turn(self)
        return made

    def start() -> None:
        BaseDatabaseWrapper._cursor = cursor

    faults.start = start
    try:
        yield faults
    finally:
        BaseDatabaseWrapper._cursor = original
        faults.restore()


@pytest.fixture
def unwritable_spool(settings, tmp_path):
    """CHAT_SPOOL_DIR where no file can be created. Below a regular file rather than a chmod'd folder: the tests
    may run as root, which a mode does not stop."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    settings.CHAT_SPOOL_DIR = blocker / "spool"
    settings.CHAT_WRITE_RETRIES = 2
    return settings.CHAT_SPOOL_DIR
