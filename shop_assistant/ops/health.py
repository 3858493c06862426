"""Readiness: can this process answer a shopper right now, and if not, why.

``check_all`` returns one entry per dependency: the engine (loaded and answering a one-token request), the
database (it takes a write, not only a read), the chat's spool (the file a message goes to when the database
is down can be written), the channel layer (a message round trip) and the Celery broker (a connection). Each is
bounded by a timeout so a hung dependency makes the check fail, not hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

CHECK_TIMEOUT = 5.0
# How long the database check waits for a write (a lock held by another writer): a write that cannot finish in
# this long makes /readyz 503. Under CHECK_TIMEOUT, so the reason is the lock, not "no answer".
WRITE_PROBE_SECONDS = 3.0
ENGINE_CACHE_SECONDS = 5.0  # a probe every second must not add a request every second under load

_engine_probe: tuple[float, Check] | None = None


@dataclass
class Check:
    ok: bool
    reason: str = ""
    ms: float = 0.0


async def _timed(coro: Any) -> Check:
    started = time.perf_counter()
    try:
        check = await asyncio.wait_for(coro, CHECK_TIMEOUT)
    except asyncio.TimeoutError:
        check = Check(False, f"no answer in {CHECK_TIMEOUT:.0f} s")
    except Exception as exc:  # noqa: BLE001 - the reason is the point
        check = Check(False, f"{type(exc).__name__}: {exc}")
    check.ms = round((time.perf_counter() - started) * 1000, 1)
    return check


async def check_engine() -> Check:
    global _engine_probe
    from inference import SamplingParams

    from shop_assistant.runtime import engine_service

    if _engine_probe is not None and time.monotonic() - _engine_probe[0] < ENGINE_CACHE_SECONDS:
        return _engine_probe[1]
    engine = engine_service.running_engine()
    if engine is None:
        error = getattr(engine_service, "_load_error", None)
        if error is not None:
            return Check(False, f"the model failed to load: {type(error).__name__}: {error}")
        loader = getattr(engine_service, "_loader", None)
        return Check(False, "the model is loading" if loader is not None and loader.is_alive() else "not started")
    if not engine.is_running():
        return Check(False, "the engine thread has stopped")
    tokenizer = engine.tokenizer
    token = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    deltas = [
        d async for d in engine.stream(f"readyz-{uuid.uuid4().hex}", [int(token or 0)], SamplingParams(max_tokens=1))
    ]
    finish = deltas[-1].finish_reason if deltas else None
    check = Check(finish in ("stop", "length"), "" if finish in ("stop", "length") else f"probe ended with {finish}")
    _engine_probe = (time.monotonic(), check)
    return check


def _database() -> Check:
    """A write that changes nothing, rolled back: a read-only database (SQLite file or ``query_only``, a
    PostgreSQL standby or ``default_transaction_read_only``) answers ``SELECT 1`` and refuses every write."""
    from django.db import connection, transaction
    from django.db.migrations.recorder import MigrationRecorder
    from django.db.models import F

    try:
        with _short_lock_wait(connection), transaction.atomic():
            if connection.vendor == "postgresql":  # the same bound on a lock or a stuck server
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL statement_timeout = {int(WRITE_PROBE_SECONDS * 1000)}")
            # A table every Django database has; no row has id -1, yet the UPDATE needs write access to run.
            MigrationRecorder.Migration.objects.filter(id=-1).update(app=F("app"))
            transaction.set_rollback(True)
    except Exception as exc:
        if (connection.vendor == "sqlite" and "locked" in str(exc)) or "statement timeout" in str(exc):
            # Another connection has held the write lock this long: every shopper's message would wait as long
            # (a write that cannot finish stalls the conversations), so this process is not ready.
            return Check(False, f"a write did not finish in {WRITE_PROBE_SECONDS:g} s (the database is locked "
                                f"or stuck): {exc}")
        reason = database_unavailable(exc)
        if reason is None:
            raise
        return Check(False, f"{reason}: {exc}")
    return Check(True, f"{connection.vendor}, writable")


@contextlib.contextmanager
def _short_lock_wait(connection: Any) -> Iterator[None]:
    """SQLite waits up to its busy timeout (30 s) for the write lock; the probe gives up after
    ``WRITE_PROBE_SECONDS``."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        (previous,) = cursor.fetchone()
        cursor.execute(f"PRAGMA busy_timeout = {int(WRITE_PROBE_SECONDS * 1000)}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {int(previous)}")


def database_unavailable(exc: BaseException) -> str | None:
    """Why ``exc`` means the database cannot take writes now (down, read-only, locked); None when it is
    anything else (a bug, bad data), which should stay an error of its own."""
    from django.db import InterfaceError, InternalError, OperationalError

    text = str(exc).lower()
    cause = exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if sqlstate == "25006" or "read-only" in text or "readonly" in text:  # 25006: read_only_sql_transaction
        return "the database is read-only"
    if isinstance(exc, (OperationalError, InterfaceError)):
        return "the database is unavailable"
    if isinstance(exc, InternalError) and sqlstate and sqlstate.startswith("57P"):  # admin shutdown, crash
        return "the database is unavailable"
    return None


async def check_database() -> Check:
    return await sync_to_async(_database, thread_sensitive=False)()


def _spool() -> Check:
    from shop_assistant.chat.log import spool

    try:
        spool.check()
    except OSError as exc:
        # With the database down too, a shopper's messages would be lost (they are told so, see chat-protocol).
        return Check(False, f"the chat spool cannot be written: {exc}")
    return Check(True, str(spool.path()))


async def check_spool() -> Check:
    return await sync_to_async(_spool, thread_sensitive=False)()


async def check_channel_layer() -> Check:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return Check(False, "no channel layer configured")
    channel = await layer.new_channel("readyz")
    await layer.send(channel, {"type": "readyz.ping"})
    message = await layer.receive(channel)
    return Check(message.get("type") == "readyz.ping", type(layer).__name__)


def _broker() -> Check:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return Check(True, "eager: tasks run in this process")
    from shop_assistant.celery import app

    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2, timeout=2)
    return Check(True, "connected")


async def check_broker() -> Check:
    return await sync_to_async(_broker, thread_sensitive=False)()


async def check_all() -> dict[str, dict[str, Any]]:
    names = ("engine", "database", "spool", "channel_layer", "broker")
    layer_check = check_channel_layer()
    if getattr(settings, "REDIS_URL", ""):
        # channels-redis's receive retries forever in this project (layers.py): ping Redis itself first.
        layer_check = _redis_then(layer_check)
    results = await asyncio.gather(
        _timed(check_engine()),
        _timed(check_database()),
        _timed(check_spool()),
        _timed(layer_check),
        _timed(check_broker()),
    )
    return {name: asdict(result) for name, result in zip(names, results, strict=True)}


async def _redis_then(layer_check: Any) -> Check:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
    try:
        await client.ping()
    except BaseException:
        layer_check.close()
        raise
    finally:
        await client.aclose()
    return await layer_check
