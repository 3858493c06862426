"""/readyz with the database read-only or the chat's spool unwritable: a read (``SELECT 1``) is not enough.

The faults are real: the database itself refuses the writes (tests/conftest.py ``read_only_database``) and the
spool folder cannot be created (``unwritable_spool``); the engine is the real one, so a 503 has no other cause.
"""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from shop_assistant.ops import health
from tests.chat.conftest import chat_engine, hold_write_lock  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


TOKEN = "readyz-test-token"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN  # the reasons are for staff or the token (an anonymous probe gets words)


async def _readyz() -> tuple[int, dict]:
    response = await AsyncClient().get("/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
    return response.status_code, response.json()


async def test_readyz_is_503_while_the_database_refuses_writes(chat_engine, read_only_database, settings, tmp_path):  # noqa: F811
    settings.CHAT_SPOOL_DIR = tmp_path / "spool"
    status, body = await _readyz()
    assert status == 200, body  # the control: everything answers
    assert body["checks"]["database"]["ok"] is True and "writable" in body["checks"]["database"]["reason"]

    await sync_to_async(read_only_database.start)()
    status, body = await _readyz()
    assert status == 503 and body["ready"] is False
    database = body["checks"]["database"]
    assert database["ok"] is False and "read-only" in database["reason"]
    assert "database: the database is read-only" in body["reason"]
    assert body["checks"]["spool"]["ok"] is True  # the spool would take the messages meanwhile
    assert {name for name, check in body["checks"].items() if not check["ok"]} == {"database"}


async def test_readyz_reports_a_spool_that_cannot_be_written(chat_engine, unwritable_spool, transactional_db):  # noqa: F811
    status, body = await _readyz()
    assert status == 503
    spool = body["checks"]["spool"]
    assert spool["ok"] is False and "spool cannot be written" in spool["reason"]
    assert "spool:" in body["reason"] and body["checks"]["database"]["ok"] is True


async def test_readyz_is_503_while_another_process_holds_the_write_lock(chat_engine, transactional_db, settings,  # noqa: F811
                                                                       tmp_path):
    """Before: 200 "sqlite, writable (busy)" for as long as the lock was held (150 s in the probe), while no
    shopper's message could be stored (issue 39, item 5). SQLite: the file's write lock; PostgreSQL: a lock on the
    table the probe writes, which its statement_timeout bounds."""
    settings.CHAT_SPOOL_DIR = tmp_path / "spool"
    assert (await _readyz())[0] == 200  # the control
    lock = await sync_to_async(hold_write_lock)("EXCLUSIVE", table="django_migrations")
    try:
        started = time.monotonic()
        status, body = await _readyz()
        waited = time.monotonic() - started
        assert status == 503 and body["checks"]["database"]["ok"] is False, body
        assert "did not finish in 3 s" in body["checks"]["database"]["reason"]
        assert waited < health.CHECK_TIMEOUT + 1, waited
    finally:
        await sync_to_async(lock.close)()
    status, body = await _readyz()
    assert status == 200, body
