"""The client's address (and scheme) behind a reverse proxy, believed only from the proxies the operator trusts.

``X-Forwarded-For`` is written by whoever sends the request: a shopper can send ``X-Forwarded-For: 198.51.100.7``
and, if it were believed, take any address it likes (a new one every few login tries defeats the lockout; a new
one per socket defeats the per-address limits). So the header counts only when the TCP peer is one of
``settings.TRUSTED_PROXIES`` (networks), and it is read from the right: each trusted hop vouches for the address
before it, and the first address that is not a trusted proxy is the client. The shipped nginx is the first proxy
and sets the header to ``$remote_addr`` alone (deploy/nginx.conf), so a header the client sent never gets through.

``TrustedProxyMiddleware`` rewrites the ASGI scope's ``client`` (and ``scheme`` from ``X-Forwarded-Proto``) for
HTTP and websockets alike, before Django and Channels see it: django-axes' lockout (``REMOTE_ADDR``), the chat's
per-address limits (``chat.admission.client_ip``) and the logs all read the one address decided here. daphne's
own ``--proxy-headers`` believes any peer and takes the left-most address; ``shop_assistant.serve`` refuses it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``TRUSTED_PROXIES``' entries as networks (an address alone is a network of one); ValueError names a bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or network (such as 10.0.0.5 or 172.16.0.0/12)") from None
    return tuple(networks)


@lru_cache(maxsize=8)
def _networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(values)


def trusted_networks() -> tuple[Network, ...]:
    from django.conf import settings

    return _networks(tuple(getattr(settings, "TRUSTED_PROXIES", ())))


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [2001:db8::1]:443
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # 203.0.113.7:5000
        value = value.partition(":")[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    # An IPv4 client seen through a dual-stack socket (::ffff:203.0.113.7) is that IPv4 address.
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def is_trusted(address: str, networks: tuple[Network, ...]) -> bool:
    parsed = _address(address)
    return parsed is not None and any(parsed in network for network in networks)


def client_address(peer: str, forwarded_for: str | None, networks: tuple[Network, ...]) -> str:
    """The client's address: ``peer`` unless it is a trusted proxy, then the right-most address of
    ``forwarded_for`` that is not one (an entry that is not an address ends the walk: the hop after it lied or
    was misconfigured, so the last address a trusted hop vouched for stands)."""
    if not forwarded_for or not is_trusted(peer, networks):
        return peer
    client = peer
    for entry in reversed(forwarded_for.split(",")):
        address = _address(entry)
        if address is None:
            break
        client = str(address)
        if not any(address in network for network in networks):
            break
    return client


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    values = [value.decode("latin-1") for key, value in scope.get("headers", []) if key.lower() == name]
    return ",".join(values) if values else None  # a header sent twice is one list, in order (RFC 9110 5.3)


class TrustedProxyMiddleware:
    """ASGI middleware: the scope's ``client`` and ``scheme`` as the trusted proxies say (see the module)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            scope = self.resolve(scope)
        return await self.application(scope, receive, send)

    @staticmethod
    def resolve(scope: dict[str, Any]) -> dict[str, Any]:
        peer_host = scope["client"][0]
        networks = trusted_networks()
        if not is_trusted(str(peer_host), networks):
            return scope
        scope = dict(scope)
        forwarded = _header(scope, b"x-forwarded-for")
        client = client_address(str(peer_host), forwarded, networks)
        if client != peer_host:
            scope["client"] = [client, 0]  # the client's port is the proxy's business
        proto = (_header(scope, b"x-forwarded-proto") or "").split(",")[-1].strip().lower()
        if proto in ("http", "https"):
            secure = proto == "https"
            scope["scheme"] = ("wss" if secure else "ws") if scope["type"] == "websocket" else proto
        return scope
