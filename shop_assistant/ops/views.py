"""/healthz (liveness), /readyz (readiness with reasons) and /metrics (Prometheus, staff or bearer token)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from shop_assistant.runtime import metrics

from . import health


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving HTTP; says nothing about its dependencies (that is /readyz)."""
    return JsonResponse({"ok": True})


async def readyz(request: HttpRequest) -> JsonResponse:
    checks = await health.check_all()
    ready = all(check["ok"] for check in checks.values())
    body: dict = {"ready": ready, "checks": checks}
    if not ready:
        body["reason"] = "; ".join(f"{name}: {check['reason']}" for name, check in checks.items() if not check["ok"])
    return JsonResponse(body, status=200 if ready else 503)


def _may_read_metrics(request: HttpRequest) -> bool:
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
