"""/healthz (liveness), /readyz (readiness; its reasons for staff or the bearer token) and /metrics (Prometheus, staff
or bearer token)."""

from __future__ import annotations

import hmac

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from shop_assistant.runtime import metrics

from . import health


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving HTTP; says nothing about its dependencies (that is /readyz)."""
    return JsonResponse({"ok": True})


async def readyz(request: HttpRequest) -> JsonResponse:
    """Ready or not, and which check failed; the reasons (file paths, the database's error text) only for staff
    or the metrics token, as /metrics: anyone may ask a load balancer's question, not learn the server's insides."""
    checks = await health.check_all()
    ready = all(check["ok"] for check in checks.values())
    failing = [name for name, check in checks.items() if not check["ok"]]
    if await sync_to_async(_may_read_metrics)(request):
        body: dict = {"ready": ready, "checks": checks}
        if not ready:
            body["reason"] = "; ".join(f"{name}: {checks[name]['reason']}" for name in failing)
    else:
        body = {"ready": ready, "checks": {name: {"ok": check["ok"]} for name, check in checks.items()}}
        if not ready:
            body["reason"] = "not ready: " + ", ".join(failing)
    return JsonResponse(body, status=200 if ready else 503)


def _may_read_metrics(request: HttpRequest) -> bool:
    """Staff, or ``Authorization: Bearer <METRICS_TOKEN>``: who may read /metrics and /readyz's reasons."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return True
    token = getattr(settings, "METRICS_TOKEN", "")
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header[len("Bearer ") :].strip().encode(), token.encode())
    return False


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _may_read_metrics(request):
        response = HttpResponse("staff login or a bearer token required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    from prometheus_client import CONTENT_TYPE_LATEST

    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
