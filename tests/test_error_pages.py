"""The pages a visitor sees for a wrong address or a server error with DEBUG off: the site's own, not Django's bare
ones, with a way back."""

from __future__ import annotations

from django.test import Client, RequestFactory, override_settings
from django.views.defaults import server_error


@override_settings(DEBUG=False)
def test_a_wrong_address_gets_the_sites_not_found_page(db) -> None:
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "<h1>Page not found</h1>" in body and 'href="/"' in body
    assert 'class="site-header"' in body  # the site's frame, not Django's plain text


@override_settings(DEBUG=False)
def test_a_server_error_gets_the_sites_error_page() -> None:
    response = server_error(RequestFactory().get("/anything/"))  # the handler Django calls on an exception
    assert response.status_code == 500
    body = response.content.decode()
    assert "<h1>Something went wrong</h1>" in body and 'href="/"' in body
