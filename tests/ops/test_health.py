"""/readyz with the database read-only or the chat's spool unwritable: a read (``SELECT 1``) is not enough.

The faults are real: the database itself refuses the writes (tests/conftest.py ``read_only_database``) and the
spool folder cannot be created (``unwritable_spool``); the engine is the real one, so a 503 has no other cause.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from tests.chat.conftest import chat_engine  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


async def _readyz() -> tuple[int, dict]:
    response = await AsyncClient().get("/readyz")
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


async def test_readyz_reports_a_spool_that_cannot_be_written(chat_engine, unwritable_spool, db):  # noqa: F811
    status, body = await _readyz()
    assert status == 503
    spool = body["checks"]["spool"]
    assert spool["ok"] is False and "spool cannot be written" in spool["reason"]
    assert "spool:" in body["reason"] and body["checks"]["database"]["ok"] is True
