"""Which pages may open a websocket: the Origin header against scheme, host and port.

Two policies, one per socket:
- the site itself (``own_origin``): the socket's own scheme (ws: http, wss: https), a host in ALLOWED_HOSTS, and
  the request's own ``Host`` host:port (without a Host header, the scheme's default port). The staff console
  has only this: it acts with the agent's session cookie, so any other page that could open it could act as
  the agent.
- the chat (``origin_allowed``): the site itself, or one of settings.WIDGET_ALLOWED_ORIGINS, or one of the
  store's own widget origins: each an exact ``scheme://host[:port]``, ``scheme://.example.com`` for the
  subdomains of example.com on that scheme and port, or ``*`` for any.

A connection that fails its socket's policy, or sends no Origin, is refused with 403 before the websocket opens
(``OriginGate``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def site_hosts() -> list[str]:
    """The hosts this site answers to (ALLOWED_HOSTS; the local ones in DEBUG when it is empty)."""
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return hosts


def allowed_origins() -> list[str]:
    """The site's hosts and the site-wide widget origins (settings)."""
    return site_hosts() + list(getattr(settings, "WIDGET_ALLOWED_ORIGINS", []))


def parse_origin(value: str) -> tuple[str, str, int] | None:
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
    wanted = parse_origin(pattern.replace("://.", "://", 1) if subdomains else pattern)
    if wanted is None:
        return False
    scheme, host, port = origin
    if (scheme, port) != (wanted[0], wanted[2]):
        return False
    return host == wanted[1] or (subdomains and host.endswith("." + wanted[1]))


def own_origin(origin_header: str | None, host_header: str | None, request_scheme: str = "http") -> bool:
    """Whether the page is this site's own. ``request_scheme``: http or https, as the socket was reached
    (daphne's --proxy-headers behind TLS)."""
    origin = parse_origin(origin_header) if origin_header else None
    if origin is None:
        return False
    scheme, host, port = origin
    # "*" in ALLOWED_HOSTS is left to the widget rules: as a site host it would make any Host header "ours".
    hosts = [h for h in site_hosts() if "://" not in h and h != "*"]
    if not validate_host(host if ":" not in host else f"[{host}]", hosts):
        return False
    own = _host_port(host_header, scheme) if host_header else (host, DEFAULT_PORTS[scheme])
    return scheme == request_scheme and own == (host, port)


def origin_allowed(
    origin_header: str | None, host_header: str | None, store_origins: list[str], request_scheme: str = "http"
) -> bool:
    """The chat's rule: the site itself, a site-wide widget origin, or one of the store's (``store_origins``)."""
    if not origin_header:
        return "*" in allowed_origins()
    origin = parse_origin(origin_header)
    if origin is None:
        return False
    if own_origin(origin_header, host_header, request_scheme):
        return True
    patterns = [p for p in allowed_origins() if "://" in p or p == "*"] + store_origins
    return any(_matches_pattern(origin, pattern) for pattern in patterns)


@dataclass(frozen=True)
class Handshake:
    """What an origin policy is given: the handshake's headers that matter, and the scope for the rest."""

    origin: str | None
    host: str | None
    scheme: str  # http or https
    scope: dict[str, Any]


Policy = Callable[[Handshake], Awaitable[bool]]


async def own_origin_policy(handshake: Handshake) -> bool:
    return own_origin(handshake.origin, handshake.host, handshake.scheme)


class OriginGate:
    """ASGI middleware: refuse the websocket (HTTP 403) unless ``policy`` allows the handshake."""

    def __init__(self, application: Any, policy: Policy = own_origin_policy) -> None:
        self.application = application
        self.policy = policy

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
        scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
        if await self.policy(Handshake(headers.get("origin"), headers.get("host"), scheme, scope)):
            return await self.application(scope, receive, send)
        # As channels' OriginValidator: wait for the handshake, then close before accepting (HTTP 403).
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close"})
