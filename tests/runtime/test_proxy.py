"""The client's address behind a proxy (issue 39, item 4): X-Forwarded-For counts only from TRUSTED_PROXIES, read
from the right, so a client cannot pick its own address and walk past the login lockout or the per-address limits.

Through the project's ASGI application (``shop_assistant.asgi``: the middleware, then Django and django-axes) with
the TCP peer set as daphne sets it; the address each request was judged by is the one django-axes recorded.
"""

from __future__ import annotations

import re
import subprocess
import sys
from urllib.parse import urlencode

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from shop_assistant.runtime.proxy import TrustedProxyMiddleware, client_address, parse_networks
from tests.conftest import REPO_ROOT

SPOOFED = "198.51.100.7, 127.0.0.1"
LOOPBACK = parse_networks(["127.0.0.1/32", "::1/128"])


@pytest.fixture
def application(settings):
    # The app as daphne runs it, without loading the model (nothing here chats).
    settings.ENGINE_AUTOSTART = False
    from shop_assistant.asgi import application

    return application


async def request(app, method: str, path: str, peer: str, headers: dict[str, str], body: bytes = b"") -> dict:
    scope = {
        "type": "http", "http_version": "1.1", "method": method, "path": path, "raw_path": path.encode(),
        "query_string": b"", "scheme": "http", "server": ("testserver", 80), "client": [peer, 51000],
        "headers": [(b"host", b"testserver"), *((k.lower().encode(), v.encode()) for k, v in headers.items())],
    }
    comm = ApplicationCommunicator(app, scope)
    await comm.send_input({"type": "http.request", "body": body})
    start = await comm.receive_output(30)
    response = {"status": start["status"], "headers": start.get("headers", []), "body": b""}
    while True:
        chunk = await comm.receive_output(30)
        response["body"] += chunk.get("body", b"")
        if not chunk.get("more_body"):
            return response


async def wrong_login(app, peer: str, forwarded_for: str | None, password: str = "wrong-guess") -> int:
    """One admin login from ``peer`` (with its own CSRF cookie); the answer's status."""
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    page = await request(app, "GET", "/admin/login/", peer, headers)
    cookie = next(v.decode() for k, v in page["headers"] if k.lower() == b"set-cookie" and b"csrftoken=" in v)
    token = re.search(r"csrftoken=([^;]+)", cookie).group(1)
    body = urlencode({"username": "staff", "password": password, "csrfmiddlewaretoken": token,
                      "next": "/admin/"}).encode()
    answer = await request(app, "POST", "/admin/login/", peer, {
        **headers, "Cookie": f"csrftoken={token}", "Content-Type": "application/x-www-form-urlencoded",
    }, body)
    return answer["status"]


def recorded_addresses() -> list[str]:
    from axes.models import AccessAttempt

    return sorted(AccessAttempt.objects.values_list("ip_address", flat=True))


@pytest.fixture
def staff(transactional_db):
    return get_user_model().objects.create_superuser("staff", password="shop-assistant-demo")


async def test_an_untrusted_peer_keeps_its_own_address_whatever_it_forwards(application, staff):
    assert await wrong_login(application, "203.0.113.9", SPOOFED) == 200
    assert await database_sync_to_async(recorded_addresses)() == ["203.0.113.9"]


async def test_the_lockout_holds_when_the_client_rotates_x_forwarded_for(application, staff):
    statuses = [await wrong_login(application, "203.0.113.9", f"198.51.100.{i}, 127.0.0.1") for i in range(8)]
    assert statuses[:4] == [200] * 4 and set(statuses[4:]) == {429}, statuses
    # Locked for its real address: the right password with yet another header is refused too.
    assert await wrong_login(application, "203.0.113.9", "192.0.2.1", password="shop-assistant-demo") == 429


async def test_a_trusted_proxy_names_the_client(application, staff):
    # nginx (on loopback, trusted by default) says who its peer was: that address is locked out, not nginx's.
    statuses = [await wrong_login(application, "127.0.0.1", "198.51.100.7") for _ in range(5)]
    assert statuses == [200] * 4 + [429]
    assert set(await database_sync_to_async(recorded_addresses)()) == {"198.51.100.7"}
    # Another client behind the same proxy is not locked out by the first one's failures.
    assert await wrong_login(application, "127.0.0.1", "198.51.100.8") == 200


def test_the_address_is_read_from_the_right_and_stops_at_the_first_untrusted_hop():
    # What the client wrote before the trusted hops is its own claim; the hop nearest the proxies is the client.
    assert client_address("127.0.0.1", "198.51.100.7, 203.0.113.50", LOOPBACK) == "203.0.113.50"
    assert client_address("127.0.0.1", "198.51.100.7, 203.0.113.50, 127.0.0.1", LOOPBACK) == "203.0.113.50"
    assert client_address("203.0.113.9", SPOOFED, LOOPBACK) == "203.0.113.9"
    assert client_address("127.0.0.1", "not-an-address", LOOPBACK) == "127.0.0.1"
    assert client_address("127.0.0.1", "[2001:db8::1]:443", LOOPBACK) == "2001:db8::1"
    assert client_address("::ffff:127.0.0.1", "198.51.100.7", LOOPBACK) == "198.51.100.7"
    assert client_address("127.0.0.1", "198.51.100.7", ()) == "127.0.0.1"  # TRUSTED_PROXIES=none


async def test_a_websocket_scope_gets_the_same_address_and_its_scheme(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    seen: list[dict] = []

    async def app(scope, receive, send):
        seen.append(scope)

    middleware = TrustedProxyMiddleware(app)
    headers = [(b"x-forwarded-for", b"198.51.100.7"), (b"x-forwarded-proto", b"https")]
    await middleware({"type": "websocket", "client": ["10.1.2.3", 4000], "headers": headers}, None, None)
    await middleware({"type": "websocket", "client": ["203.0.113.9", 4000], "headers": headers}, None, None)
    assert seen[0]["client"][0] == "198.51.100.7" and seen[0]["scheme"] == "wss"
    assert seen[1]["client"] == ["203.0.113.9", 4000] and "scheme" not in seen[1]


async def test_only_a_trusted_proxy_can_say_the_request_came_over_https(settings, transactional_db):
    # With SECURE_SSL_REDIRECT on, Django redirects what it thinks came over http: a client claiming https itself
    # is still redirected; the same claim made by a trusted proxy (nginx terminating TLS) is believed.
    from django.core.handlers.asgi import ASGIHandler

    settings.SECURE_SSL_REDIRECT = True
    application = TrustedProxyMiddleware(ASGIHandler())  # a fresh handler reads the setting
    claim = {"X-Forwarded-Proto": "https"}
    direct = await request(application, "GET", "/accounts/login/", "203.0.113.9", claim)
    proxied = await request(application, "GET", "/accounts/login/", "127.0.0.1", {**claim, "X-Forwarded-For": "203.0.113.9"})
    assert direct["status"] == 301
    assert proxied["status"] == 200


def test_serve_refuses_daphnes_proxy_headers_with_what_to_set_instead():
    result = subprocess.run([sys.executable, "-m", "shop_assistant.serve", "--proxy-headers"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "TRUSTED_PROXIES" in result.stderr and "Traceback" not in result.stderr
