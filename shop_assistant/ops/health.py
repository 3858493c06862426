"""Readiness: can this process answer a shopper right now, and if not, why.

``check_all`` returns one entry per dependency: the engine (loaded and answering a one-token request), the
database, the channel layer (a message round trip) and the Celery broker (a connection). Each is bounded by a
timeout so a hung dependency makes the check fail, not hang.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

CHECK_TIMEOUT = 5.0
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

    from shop_assistant.chat import engine as engine_service

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
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return Check(True, connection.vendor)


async def check_database() -> Check:
    return await sync_to_async(_database, thread_sensitive=False)()


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
    names = ("engine", "database", "channel_layer", "broker")
    layer_check = check_channel_layer()
    if getattr(settings, "REDIS_URL", ""):
        # channels-redis's receive retries forever in this project (layers.py): ping Redis itself first.
        layer_check = _redis_then(layer_check)
    results = await asyncio.gather(
        _timed(check_engine()), _timed(check_database()), _timed(layer_check), _timed(check_broker())
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
