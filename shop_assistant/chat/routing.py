"""Websocket routes, behind an Origin check that matches scheme, host and port.

An Origin is allowed when it is
- this site itself: an origin with the socket's own scheme (ws: http, wss: https), a host in ALLOWED_HOSTS,
  and the request's own ``Host`` host:port (without a Host header, the scheme's default port);
- one of settings.WIDGET_ALLOWED_ORIGINS, or one of the store's ``widget_allowed_origins`` (one per line; the
  store named by ``?store=``): each an exact ``scheme://host[:port]``, ``scheme://.example.com`` for the
  subdomains of example.com on that scheme and port, or ``*`` for any.
Anything else, and a connection without an Origin, is refused with 403 before the websocket opens.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import validate_host
from django.urls import path

from . import recording
from .consumers import ChatConsumer

DEFAULT_PORTS = {"http": 80, "https": 443}


def allowed_origins() -> list[str]:
    """The site's hosts (ALLOWED_HOSTS) and the site-wide widget origins (settings)."""
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return hosts + list(getattr(settings, "WIDGET_ALLOWED_ORIGINS", []))


def _origin(value: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) origin; None for anything else (``null``, ``ftp://``, garbage)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _host_port(host_header: str, scheme: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(f"//{host_header}")
        return (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        return None


def _matches_pattern(origin: tuple[str, str, int], pattern: str) -> bool:
    pattern = pattern.strip()
    if pattern == "*":
        return True
    subdomains = "://." in pattern
    wanted = _origin(pattern.replace("://.", "://", 1) if subdomains else pattern)
    if wanted is None:
        return False
    scheme, host, port = origin
    if (scheme, port) != (wanted[0], wanted[2]):
        return False
    return host == wanted[1] or (subdomains and host.endswith("." + wanted[1]))


def origin_allowed(
    origin_header: str | None, host_header: str | None, store_origins: list[str], request_scheme: str = "http"
) -> bool:
    """``request_scheme``: http or https, as the socket was reached (daphne's --proxy-headers behind TLS)."""
    if not origin_header:
        return "*" in allowed_origins()
    origin = _origin(origin_header)
    if origin is None:
        return False
    scheme, host, port = origin
    site_hosts = [h for h in allowed_origins() if "://" not in h and h != "*"]
    if validate_host(host if ":" not in host else f"[{host}]", site_hosts):
        own = _host_port(host_header, scheme) if host_header else (host, DEFAULT_PORTS[scheme])
        if scheme == request_scheme and own == (host, port):
            return True
    patterns = [p for p in allowed_origins() if "://" in p or p == "*"] + store_origins
    return any(_matches_pattern(origin, pattern) for pattern in patterns)


def _store_origins(slug: str | None) -> list[str]:
    store = recording.default_store(slug)
    return store.widget_allowed_origins.split() if store is not None else []


class StrictOriginValidator:
    """ASGI middleware: refuse the websocket (403) unless ``origin_allowed``."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        slug = (query.get("store") or [None])[-1]
        store_origins = await database_sync_to_async(_store_origins)(slug)
        scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
        if origin_allowed(headers.get("origin"), headers.get("host"), store_origins, scheme):
            return await self.application(scope, receive, send)
        # As channels' OriginValidator: wait for the handshake, then close before accepting (HTTP 403).
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close"})


websocket_urlpatterns: list = [
    path("ws/chat/", ChatConsumer.as_asgi()),
]
