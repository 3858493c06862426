"""``/v1/``: OpenAI-compatible endpoints. Thin: parsing and bodies live in ``service``, keys in ``auth``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from shop_assistant.chat import engine as engine_service
from shop_assistant.chat import metrics

from . import auth, service
from .service import ApiError


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
    except ApiError as error:
        return _error(error, endpoint)
    metrics.API_REQUESTS.labels(endpoint=endpoint, status="200").inc()
    salt = key.store.cache_salt
    if parsed.stream:
        response = StreamingHttpResponse(service.stream_events(engine, parsed, salt), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
        return response
    return JsonResponse(await service.complete(engine, parsed, salt))


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    return await _generate(request, "chat", "chat_completions")


@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponse:
    return await _generate(request, "text", "completions")
