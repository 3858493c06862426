"""A page that says the database cannot take writes now (503), instead of a 500 traceback; and staff pages that no
browser or proxy keeps (``StaffPagesNoStoreMiddleware``).

A read-only or unreachable database breaks every page that writes: a staff login (session, last_login, the
login throttle's records), the studio, the console. That is an outage of a dependency, not a bug, so the
answer is 503 with ``Retry-After`` and a page that says so; other errors stay 500s.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin

from shop_assistant.api.service import ApiError

from .health import database_unavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 30


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        reason = database_unavailable(exception)
        if reason is None:
            return None
        logger.error("%s %s: %s (%s: %s)", request.method, request.path, reason, type(exception).__name__, exception)
        if request.path.startswith("/v1/") or "application/json" in request.headers.get("Accept", ""):
            error = ApiError(503, f"{reason}; try again shortly", "database_unavailable", "server_error")
            response: HttpResponse = JsonResponse(error.body(), status=503)
        else:
            body = render_to_string("503.html", {"reason": reason}, request=request)
            response = HttpResponse(body, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


# Where staff work: conversations, customers' details, the store's settings and keys. A shared or public computer,
# or a proxy's cache, must not keep a copy of these pages after the agent logs out (issue 39).
STAFF_PATH_PREFIXES = ("/admin/", "/console/", "/studio/", "/accounts/")


class StaffPagesNoStoreMiddleware(MiddlewareMixin):
    """``Cache-Control: no-store`` (Django's never-cache headers) on every response under the staff paths,
    whatever view, decorator or error produced it: one place, so a new staff page cannot forget it."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if request.path.startswith(STAFF_PATH_PREFIXES):
            add_never_cache_headers(response)
        return response
