"""The Origin rules of the websockets (``shop_assistant.runtime.origins``): the console's own-origin rule, and the chat's
rule that adds the widget origins on top of it."""

from __future__ import annotations

import pytest

from shop_assistant.runtime.origins import origin_allowed, own_origin


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "own"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000", "http", True),
        ("https://127.0.0.1:8000", "127.0.0.1:8000", "https", True),  # behind TLS (wss)
        ("https://127.0.0.1:8000", "127.0.0.1:8000", "http", False),  # the page's scheme is not the socket's
        ("http://127.0.0.1:8000", "127.0.0.1:8000", "https", False),
        ("http://127.0.0.1:9999", "127.0.0.1:8000", "http", False),  # same host, another port
        ("http://127.0.0.1", "127.0.0.1:8000", "http", False),
        ("http://localhost:8000", "127.0.0.1:8000", "http", False),  # allowed host, but not this request's
        ("https://testserver", None, "https", True),  # no Host header: the scheme's default port
        ("https://testserver:8443", None, "https", False),
        ("http://evil.example", "evil.example", "http", False),  # a Host header alone does not make a site ours
        ("null", "127.0.0.1:8000", "http", False),
        (None, "127.0.0.1:8000", "http", False),
    ],
)
def test_own_origin_is_scheme_host_and_port(origin, host, scheme, own):
    assert own_origin(origin, host, scheme) is own


def test_widget_origins_widen_the_chat_only(settings):
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example.com"]
    store_origins = ["http://127.0.0.1:9999"]
    for origin in ("https://shop.example.com", "http://127.0.0.1:9999"):
        assert origin_allowed(origin, "127.0.0.1:8000", store_origins) is True
        assert own_origin(origin, "127.0.0.1:8000") is False
