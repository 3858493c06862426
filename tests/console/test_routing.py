"""Who may open the console socket: this site's own pages only (scheme, host and port), over a real socket.

A store's widget origins let its pages open the chat; they must never open the console, which acts with the
agent's session cookie (issue 23: ``?store=rival`` with the rival's widget origin watched a demo conversation).
"""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from django.contrib.auth import get_user_model

from catalog.models import Store
from shop_assistant.chat.models import WidgetSettings
from shop_assistant.console.models import StoreMembership
from tests.chat.conftest import daphne_server, demo_store  # noqa: F401 - fixtures

from .conftest import make_conversation, session_cookie

pytestmark = pytest.mark.slow


@pytest.fixture
def rival(demo_store):  # noqa: F811
    """A second store whose owner listed a widget origin on this very host, on another port."""
    store = Store.objects.create(slug="rival", name="Rival")
    WidgetSettings.objects.create(store=store, allowed_origins="http://127.0.0.1:9999")
    owner = get_user_model().objects.create_user("rival-owner", "rival@example.com", "pw")
    StoreMembership.objects.create(user=owner, store=store, role="owner")
    return store


@pytest.fixture
def agent_cookie(demo_store) -> str:  # noqa: F811
    return session_cookie(get_user_model().objects.get(username="agent"))


async def _watch(url: str, origin: str, cookie: str, conversation: str) -> dict:
    """Open the console socket and ask to watch ``conversation``; the answer to the watch."""
    async with websockets.connect(url, origin=origin, proxy=None, open_timeout=30,
                                  additional_headers={"Cookie": cookie}) as socket:
        hello = json.loads(await asyncio.wait_for(socket.recv(), 30))
        assert hello["type"] == "hello", hello
        await socket.send(json.dumps({"type": "watch", "conversation": conversation}))
        return json.loads(await asyncio.wait_for(socket.recv(), 30))


def _refused(url: str, origin: str, cookie: str) -> int:
    """The HTTP status the handshake got (raises if the socket opened)."""

    async def attempt() -> int:
        try:
            async with websockets.connect(url, origin=origin, proxy=None, open_timeout=30,
                                          additional_headers={"Cookie": cookie}):
                pass
        except websockets.exceptions.InvalidStatus as refused:
            return refused.response.status_code
        raise AssertionError(f"the console socket opened for Origin {origin}")

    return asyncio.run(attempt())


def test_a_stores_widget_origin_never_opens_the_console(daphne_server, demo_store, rival, agent_cookie):  # noqa: F811
    conversation = str(make_conversation(demo_store).pk)
    own = daphne_server.http  # http://127.0.0.1:<port>
    # The control: from the site's own page the agent watches the demo conversation.
    watching = asyncio.run(_watch(f"ws://127.0.0.1:{daphne_server.port}/ws/console/", own, agent_cookie,
                                  conversation))
    assert watching == {"type": "watching", "conversation": conversation}
    # The rival's widget origin, named through ?store=rival (or not at all), does not open it.
    for query in ("?store=rival", "?store=demo", ""):
        url = f"ws://127.0.0.1:{daphne_server.port}/ws/console/{query}"
        assert _refused(url, "http://127.0.0.1:9999", agent_cookie) == 403


def test_the_console_origin_must_match_scheme_host_and_port(daphne_server, demo_store, agent_cookie):  # noqa: F811
    port = daphne_server.port
    url = f"ws://127.0.0.1:{port}/ws/console/"
    for origin in (
        f"https://127.0.0.1:{port}",  # another scheme: not this page
        f"http://127.0.0.1:{port + 1}",  # another port on the same host: another site
        "http://127.0.0.1",  # the default port: another site again
        f"http://localhost:{port}",  # a host in ALLOWED_HOSTS, but not the one this page was served from
        "http://evil.example",
        "null",
    ):
        assert _refused(url, origin, agent_cookie) == 403, origin
    conversation = str(make_conversation(demo_store).pk)
    assert asyncio.run(_watch(url, f"http://127.0.0.1:{port}", agent_cookie, conversation))["type"] == "watching"


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://127.0.0.1:9999", "127.0.0.1:8000", "ws"),  # same host, another port
        ("https://127.0.0.1:8000", "127.0.0.1:8000", "ws"),  # another scheme than the socket's
        ("http://127.0.0.1:8000", "127.0.0.1:8000", "wss"),  # a plain page on a TLS socket
        ("http://localhost:8000", "127.0.0.1:8000", "ws"),  # a host in ALLOWED_HOSTS, not this request's
    ],
)
async def test_the_console_route_itself_checks_scheme_and_port(transactional_db, origin, host, scheme):
    """The console's own gate, without the chat's in front of it (before: ALLOWED_HOSTS by host name only)."""
    from channels.db import database_sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from shop_assistant.console.routing import websocket_urlpatterns

    from .conftest import build_world

    world = await database_sync_to_async(build_world)()
    cookie = await database_sync_to_async(session_cookie)(world.users["agent"])
    router = URLRouter(websocket_urlpatterns)

    async def app(scope, receive, send):  # the scheme daphne puts in the scope (wss behind TLS)
        return await router({**scope, "scheme": scheme}, receive, send)

    headers = [(b"origin", origin.encode()), (b"host", host.encode()), (b"cookie", cookie.encode())]
    refused = WebsocketCommunicator(app, "/ws/console/", headers=headers)
    connected, _ = await refused.connect(timeout=30)
    assert not connected
    own = f"{'https' if scheme == 'wss' else 'http'}://{host}"
    allowed = WebsocketCommunicator(app, "/ws/console/", headers=[(b"origin", own.encode()), *headers[1:]])
    connected, _ = await allowed.connect(timeout=30)
    assert connected
    assert json.loads(await allowed.receive_from(timeout=30))["type"] == "hello"
    await allowed.disconnect()


def test_site_wide_widget_origins_do_not_open_the_console(demo_store, agent_cookie, tmp_path):  # noqa: F811
    from tests.chat.conftest import free_port, run_daphne

    port, widget_port = free_port(), free_port()
    widget = f"http://127.0.0.1:{widget_port}"
    with run_daphne(tmp_path, port=port, WIDGET_ALLOWED_ORIGINS=widget, ENGINE_AUTOSTART="0") as server:
        # The chat takes the widget's page, so the setting is in force; the console does not.
        async def chat_opens() -> str:
            async with websockets.connect(f"{server.ws}?store=demo", origin=widget, proxy=None,
                                          open_timeout=30) as socket:
                return json.loads(await asyncio.wait_for(socket.recv(), 30))["type"]

        assert asyncio.run(chat_opens()) == "ready"
        assert _refused(f"ws://127.0.0.1:{port}/ws/console/", widget, agent_cookie) == 403
