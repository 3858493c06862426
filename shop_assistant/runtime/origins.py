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
(``OriginGate``). The pattern matching, and the rule that a missing Origin passes only where ``*`` is allowed,
are Channels' own ``OriginValidator``'s (``OriginRules`` subclasses it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import ParseResult, urlparse, urlsplit

from channels.security.websocket import OriginValidator
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


class OriginRules(OriginValidator):
    """The Origin rules for one handshake: this site's own origin (``own_origin``, which needs the request's
    Host and scheme: Channels' AllowedHostsOriginValidator would take a host name on any scheme and port), and,
    for the chat, the widget origins (``widget_origins``: None for the console, which has none)."""

    def __init__(
        self, host_header: str | None, request_scheme: str = "http", widget_origins: list[str] | None = None
    ) -> None:
        # The parent's allowed_origins decide whether a missing Origin passes ("*" among them): the site-wide
        # settings only, never a store's list.
        super().__init__(None, allowed_origins() if widget_origins is not None else [])
        self.host_header = host_header
        self.request_scheme = request_scheme
        self.widget_origins = widget_origins

    def validate_origin(self, parsed_origin: ParseResult | None) -> bool:
        if parsed_origin is None:  # no Origin header; valid_origin lets it here only when "*" is allowed
            return True
        if parse_origin(parsed_origin.geturl()) is None:  # not http(s) with a host (null, ftp:, a bad port)
            return False
        if own_origin(parsed_origin.geturl(), self.host_header, self.request_scheme):
            return True
        if self.widget_origins is None:
            return False
        # Site hosts without a scheme are the site's own, judged above; the parent would match them by name alone.
        patterns = [p for p in [*self.allowed_origins, *self.widget_origins] if "://" in p or p == "*"]
        return any(pattern == "*" or self._matches(parsed_origin, pattern) for pattern in patterns)

    def _matches(self, parsed_origin: ParseResult, pattern: str) -> bool:
        try:
            return self.match_allowed_origin(parsed_origin, pattern)
        except ValueError:  # a pattern with a port that is not a number
            return False

    def allows(self, origin_header: str | None) -> bool:
        """Whether a page at ``origin_header`` may open this socket."""
        return self.valid_origin(urlparse(origin_header) if origin_header else None)


def origin_allowed(
    origin_header: str | None, host_header: str | None, store_origins: list[str], request_scheme: str = "http"
) -> bool:
    """The chat's rule: the site itself, a site-wide widget origin, or one of the store's (``store_origins``)."""
    return OriginRules(host_header, request_scheme, store_origins).allows(origin_header)


# The widget origins of the store a chat handshake names (from its scope); the console has none.
StoreOrigins = Callable[[dict[str, Any]], Awaitable[list[str]]]


class OriginGate:
    """ASGI middleware: refuse the websocket (HTTP 403) unless the handshake's ``OriginRules`` allow it.

    The rules are built per handshake (its Host and scheme, the store it names, settings as they are now).
    Refused, it closes before accepting, as Channels' ``WebsocketDenier`` does, but without a consumer: a
    refused handshake never reaches the channel layer.
    """

    def __init__(self, application: Any, store_origins: StoreOrigins | None = None) -> None:
        self.application = application
        self.store_origins = store_origins

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
        scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
        widget = await self.store_origins(scope) if self.store_origins is not None else None
        if OriginRules(headers.get("host"), scheme, widget).allows(headers.get("origin")):
            return await self.application(scope, receive, send)
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close"})
