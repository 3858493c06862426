"""A client behind the shipped nginx cannot choose its own address (issue 39, item 4): Debian's nginx with
deploy/nginx.conf in front of a real daphne node, and a client that sends its own ``X-Forwarded-For`` (a new one
for every try). The login lockout and the per-address chat socket limit both hold.

Before: nginx appended to the client's header and daphne (--proxy-headers) took its first element, so a locked-out
login succeeded with ``X-Forwarded-For: 198.51.100.7, 127.0.0.1`` and 25 sockets opened against a limit of 20.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
import websockets
from channels.db import database_sync_to_async

from tests.chat.conftest import FRAME_TIMEOUT, run_daphne
from tests.deploy.nginx import run_nginx

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]

PER_IP = 3


def login(front: str, forwarded_for: str, password: str) -> int:
    """One admin login through nginx, as a client that sends its own X-Forwarded-For; the answer's status."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                         urllib.request.ProxyHandler({}))
    headers = {"X-Forwarded-For": forwarded_for}
    with opener.open(urllib.request.Request(f"{front}/admin/login/", headers=headers), timeout=60) as page:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.read().decode()).group(1)
    body = urllib.parse.urlencode({"username": "staff", "password": password, "csrfmiddlewaretoken": token,
                                   "next": "/admin/"}).encode()
    try:
        with opener.open(urllib.request.Request(f"{front}/admin/login/", data=body, headers=headers), timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code


async def open_socket(front: str, slug: str, forwarded_for: str) -> tuple[dict, object]:
    ws = front.replace("http://", "ws://") + f"/ws/chat/?store={slug}"
    connection = await websockets.connect(ws, origin=front, proxy=None, open_timeout=FRAME_TIMEOUT,
                                          additional_headers={"X-Forwarded-For": forwarded_for})
    return json.loads(await asyncio.wait_for(connection.recv(), FRAME_TIMEOUT)), connection


def make_staff_and_store() -> str:
    from django.contrib.auth import get_user_model

    from catalog.models import Store

    get_user_model().objects.create_superuser("staff", password="shop-assistant-demo")
    return Store.objects.create(slug="xff-shop", name="XFF Shop").slug


async def test_a_client_choosing_its_x_forwarded_for_is_still_locked_out_and_limited(transactional_db, tmp_path):
    slug = await database_sync_to_async(make_staff_and_store)()
    env = {"ENGINE_AUTOSTART": "0", "CHAT_CONNECTIONS_PER_IP": str(PER_IP)}
    with run_daphne(tmp_path, **env) as node, run_nginx(tmp_path, [node.port]) as port:
        front = f"http://127.0.0.1:{port}"

        statuses = [await asyncio.to_thread(login, front, f"198.51.100.{i}, 127.0.0.1", f"guess-{i}")
                    for i in range(8)]
        assert statuses[:4] == [200] * 4 and set(statuses[4:]) == {429}, statuses
        # Locked out for the address nginx saw: the right password, under yet another claimed address, too.
        assert await asyncio.to_thread(login, front, "203.0.113.77", "shop-assistant-demo") == 429

        frames, sockets = [], []
        try:
            for i in range(PER_IP + 2):
                frame, connection = await open_socket(front, slug, f"198.51.100.{100 + i}")
                frames.append(frame)
                sockets.append(connection)
        finally:
            await asyncio.gather(*(connection.close() for connection in sockets))
        kinds = [frame["type"] if frame["type"] == "ready" else frame.get("code") for frame in frames]
        assert kinds == ["ready"] * PER_IP + ["too_many_connections"] * 2, kinds
