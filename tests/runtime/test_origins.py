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


def test_a_missing_origin_passes_only_where_the_site_allows_any(settings):
    settings.WIDGET_ALLOWED_ORIGINS = []
    assert origin_allowed(None, "127.0.0.1:8000", ["*"]) is False  # a store's "*" is for pages, not for no page
    assert own_origin(None, "127.0.0.1:8000") is False
    settings.WIDGET_ALLOWED_ORIGINS = ["*"]
    assert origin_allowed(None, "127.0.0.1:8000", []) is True


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://shop.example.com", True),
        ("https://a.brand.example", True),
        ("https://brand.example", True),  # the domain itself, as well as its subdomains
        ("https://shop.example.com:99999", False),  # a port that cannot be: refused, not an error
        ("http://plain.example", False),  # a store origin without a scheme matches nothing
        ("ftp://shop.example.com", False),
    ],
)
def test_store_origins_match_scheme_host_and_port(settings, origin, allowed):
    settings.WIDGET_ALLOWED_ORIGINS = []
    store_origins = ["https://shop.example.com", "https://.brand.example", "plain.example", "https://bad:port"]
    assert origin_allowed(origin, "127.0.0.1:8000", store_origins) is allowed
