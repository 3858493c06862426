"""The process-wide inference engine.

One ``inference.AsyncLLM`` per process (daphne runs one), created once and shared by every websocket connection:
that is what lets sessions of one store share the system prompt's KV blocks. Loading the model takes seconds, so
it happens on a worker thread: started in the background when the web process starts (``shop_assistant.startup``,
``ENGINE_AUTOSTART``), or on first use; an ``await aget_engine()`` never blocks the event loop while it loads.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from inference.worker.model_packages import PACKAGED_MODELS

if TYPE_CHECKING:
    from inference import AsyncLLM

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_engine: AsyncLLM | None = None
_overrides: dict[str, Any] = {}
_load_error: BaseException | None = None
_loader: threading.Thread | None = None
# Engine priorities (vLLM's: lower runs first, and may preempt higher). A shopper's answer goes before /v1
# requests: it takes a seat or KV memory from a running API sequence and prefills without the API's decodes in its
# step, so one heavy API key cannot hold a shopper's first token back (issue 39).
# A plan goes first of all: the shopper sees nothing until it is done, while a running answer's opening is already on
# screen (its continuation waits a step).
PLAN_PRIORITY = -1
CHAT_PRIORITY = 0
API_PRIORITY = 1


class EngineUnavailableError(RuntimeError):
    """The engine failed to load; every chat answer ends with an error until the process restarts."""


def engine_config_kwargs(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """settings.ENGINE (None means the engine's own default) with ``overrides`` on top."""
    kwargs = {key: value for key, value in settings.ENGINE.items() if value is not None}
    kwargs.update(overrides or {})
    packaged = PACKAGED_MODELS.get(str(kwargs.get("model")))
    if packaged is not None and "max_model_len" not in kwargs:
        kwargs["max_model_len"] = packaged.max_model_len
    if packaged is not None and "quantization" not in kwargs:
        kwargs["quantization"] = packaged.quantization
    on_cpu = kwargs.get("device", "cpu") == "cpu"
    if packaged is not None and on_cpu and packaged.cpu_max_num_batched_tokens and "max_num_batched_tokens" not in kwargs:
        kwargs["max_num_batched_tokens"] = packaged.cpu_max_num_batched_tokens
    return kwargs


def configure(**overrides: Any) -> None:
    """Engine settings for this process on top of settings.ENGINE (tests: small cache); before the first load."""
    with _lock:
        if _engine is not None:
            logger.warning("engine already running; configure(%s) applies from the next start", overrides)
        _overrides.clear()
        _overrides.update(overrides)


def get_engine() -> AsyncLLM:
    """The engine, loading it on this thread if nobody has yet. Blocking: call it from a thread, not the loop."""
    global _engine, _load_error
    if _engine is not None:
        return _engine
    with _lock:
        if _engine is None:
            if _load_error is not None:
                raise EngineUnavailableError("the model failed to load; see the log") from _load_error
            from inference import AsyncLLM

            kwargs = engine_config_kwargs(_overrides)
            logger.info("starting the inference engine: %s", kwargs)
            try:
                _engine = AsyncLLM(**kwargs)
            except BaseException as exc:
                _load_error = exc
                logger.exception("the inference engine failed to start")
                raise EngineUnavailableError("the model failed to load; see the log") from exc
            logger.info("inference engine ready")
        return _engine


async def aget_engine() -> AsyncLLM:
    """The engine from async code: loads it on a worker thread the first time, never on the event loop."""
    if _engine is not None:
        return _engine
    return await asyncio.to_thread(get_engine)


def model_name() -> str:
    """The name the model is served under, the one place it is decided (/v1 and /metrics read it here):
    ``API_MODEL_NAME``, or the model folder's name (vLLM's ``served_model_name``, which its metrics carry as
    ``model_name``), or the bundled model's name when ``ENGINE_MODEL`` is unset."""
    configured = settings.API.get("model_name")
    if configured:
        return configured
    config = getattr(getattr(_engine, "engine", None), "config", None)
    model = getattr(config, "model", None) or settings.ENGINE.get("model")
    if model:
        return Path(str(model)).name
    from inference.worker.loader import BUNDLED_MODEL_NAME  # here: the loader imports torch

    return BUNDLED_MODEL_NAME


def running_engine() -> AsyncLLM | None:
    """The engine if it has been started, without starting it (stats pages, health checks)."""
    return _engine


def start_in_background() -> None:
    """Begin loading now, so the first shopper does not wait for the model (idempotent)."""
    global _loader
    with _lock:
        if _engine is not None or (_loader is not None and _loader.is_alive()):
            return

        def load() -> None:
            try:
                get_engine()
            except EngineUnavailableError:
                pass  # already logged; requests will report it

        _loader = threading.Thread(target=load, name="engine-loader", daemon=True)
        _loader.start()


def shutdown() -> None:
    """Stop the engine thread (tests, process exit). The next get_engine() starts a new one."""
    global _engine, _load_error
    with _lock:
        engine, _engine, _load_error = _engine, None, None
    if engine is not None:
        engine.shutdown()
