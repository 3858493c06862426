"""The site's own addresses (shop_assistant/urls.py): /favicon.ico, which every browser asks for."""

from __future__ import annotations

from django.test import Client

from tests.studio.conftest import make_user


def test_favicon_ico_is_answered_and_every_page_links_the_icon(db) -> None:
    """Issue 40: /favicon.ico was a 404 on every page (and the console logged it). Now it redirects to the static
    icon, which is served, and the base template links the icon on every page (storefront, login, studio,
    console, error pages)."""
    client = Client()
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.ico"
    icon = client.get("/favicon.ico", follow=True)
    assert icon.status_code == 200
    data = b"".join(icon.streaming_content) if icon.streaming else icon.content
    assert data[:4] == b"\x00\x00\x01\x00" and len(data) < 10_000  # an ICO file, and a small one
    assert icon["Content-Type"] in ("image/x-icon", "image/vnd.microsoft.icon")

    owner = make_user("olive-icon")
    client.force_login(owner)
    link = '<link rel="icon" href="/static/favicon.ico"'
    for url in ("/", "/accounts/login/", "/studio/", "/console/", "/no-such-page/"):
        assert link in client.get(url, follow=True).content.decode(), url
