"""``/v1/``: OpenAI-compatible endpoints. Thin: parsing and bodies live in ``service``, keys in ``auth``."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from shop_assistant.runtime import engine_service
from shop_assistant.runtime import metrics

from . import auth, service
from .errors import ApiError

logger = logging.getLogger(__name__)


def _error(error: ApiError, endpoint: str) -> JsonResponse:
    metrics.API_REQUESTS.labels(endpoint=endpoint, status=str(error.status)).inc()
    response = JsonResponse(error.body(), status=error.status)
    for name, value in error.headers.items():
        response[name.replace("_", "-")] = value
    return response


async def models_view(request: HttpRequest) -> HttpResponse:
    try:
        await auth.authorize(request)
    except ApiError as error:
        return _error(error, "models")
    metrics.API_REQUESTS.labels(endpoint="models", status="200").inc()
    return JsonResponse(service.models_body())


async def _generate(request: HttpRequest, kind: str, endpoint: str) -> HttpResponse:
    if request.method != "POST":
        return _error(ApiError(405, "use POST", "method_not_allowed"), endpoint)
    try:
        key = await auth.authorize(request)
        try:
            body: Any = json.loads(request.body)
        except (ValueError, RecursionError):
            raise ApiError(400, "the body is not valid JSON", "invalid_json") from None
        try:
            engine = await engine_service.aget_engine()
        except engine_service.EngineUnavailableError as exc:
            raise ApiError(503, str(exc), "engine_unavailable", "server_error") from None
        parsed = await asyncio.to_thread(service.parse, body, kind, engine)
        deltas = await service.open_deltas(engine, parsed, key.store.cache_salt)
    except ApiError as error:
        return _error(error, endpoint)
    if parsed.stream:
        # Everything that can be refused was refused by parse(): once the 200 goes out, the status is final.
        metrics.API_REQUESTS.labels(endpoint=endpoint, status="200").inc()
        response = StreamingHttpResponse(service.stream_events(parsed, deltas), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
        return response
    try:
        body = await service.complete(parsed, deltas)
    except ApiError as error:
        return _error(error, endpoint)
    except Exception:
        # An OpenAI-style body and a 500 in /metrics rather than Django's traceback page counted as a 200.
        logger.exception("%s request %s failed", endpoint, parsed.id)
        return _error(ApiError(500, "the request failed on the server", "internal_error", "server_error"), endpoint)
    metrics.API_REQUESTS.labels(endpoint=endpoint, status="200").inc()
    return JsonResponse(body)


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    return await _generate(request, "chat", "chat_completions")


@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponse:
    return await _generate(request, "text", "completions")
