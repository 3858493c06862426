"""Pages that must write while the database refuses writes: a 503 page that says so, not a 500 traceback."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client


@pytest.fixture
def staff(transactional_db):
    return get_user_model().objects.create_user("ops", password="pw-123456-long", is_staff=True, is_superuser=True)


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_staff_login_with_a_read_only_database_is_a_clear_503(staff, read_only_database, path):
    form = {"username": "ops", "password": "pw-123456-long"}
    assert Client().post(path, form).status_code == 302  # the control: the login works while writes do

    read_only_database.start()
    response = Client(raise_request_exception=False).post(path, form)
    assert response.status_code == 503
    assert response["Retry-After"]
    page = response.content.decode()
    assert "Temporarily unavailable" in page and "read-only" in page
    assert "Traceback" not in page and "OperationalError" not in page


def test_a_wrong_password_with_a_read_only_database_is_a_503_too(staff, read_only_database):
    """The login throttle records the failure: that write fails as well."""
    read_only_database.start()
    response = Client(raise_request_exception=False).post("/accounts/login/", {"username": "ops", "password": "no"})
    assert response.status_code == 503


def test_other_errors_stay_500s(rf):
    from django.db import IntegrityError

    from shop_assistant.ops.middleware import DatabaseUnavailableMiddleware

    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    assert middleware.process_exception(rf.get("/"), IntegrityError("duplicate key")) is None
    assert middleware.process_exception(rf.get("/"), ValueError("a bug")) is None


def test_the_api_with_a_read_only_database_is_an_openai_style_503(transactional_db, read_only_database):
    """Every API request writes the key's last use: an API client gets a JSON error it can retry on."""
    from catalog.models import Store
    from shop_assistant.api.models import ApiKey

    _, key = ApiKey.create_key(Store.objects.create(slug="s", name="S"), "tests")
    assert Client().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200

    read_only_database.start()
    response = Client(raise_request_exception=False).get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 503 and response["Retry-After"]
    assert response.json()["error"]["code"] == "database_unavailable"


def _staff_paths(slug: str) -> list[str]:
    """Every console and studio URL (their patterns, with sample values), and the admin's and login's pages."""
    import re
    import uuid

    from django.urls import URLResolver, get_resolver

    samples = {"int": "1", "slug": slug, "str": "csv", "uuid": str(uuid.uuid4()), "path": "x"}
    paths = ["/admin/", "/admin/login/", "/admin/auth/user/", "/admin/catalog/store/", "/accounts/login/"]

    def routes(patterns, prefix: str):  # an app's patterns, through the lists it includes under a prefix
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern)

    for top in get_resolver().url_patterns:
        if isinstance(top, URLResolver) and getattr(top, "namespace", None) in ("console", "studio"):
            for route in routes(top.url_patterns, str(top.pattern)):
                paths.append("/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: samples[m.group(1) or "str"], route))
    return paths


@pytest.mark.parametrize("who", ["anonymous", "superuser"])
def test_every_staff_page_says_no_store(staff, who):
    """Before: console, studio and admin pages carried no Cache-Control, so a browser or proxy could keep a copy
    of conversations and settings after logout (issue 39, item 12). Every answer: pages, redirects to the
    login, 404s and 405s alike."""
    from catalog.models import Store

    slug = Store.objects.create(slug="cache-shop", name="Cache Shop").slug
    client = Client(raise_request_exception=False)
    if who == "superuser":
        client.force_login(staff)
    paths = _staff_paths(slug)
    assert len(paths) > 40 and any(p.startswith("/studio/cache-shop/analytics/") for p in paths)
    missing = {}
    for path in paths:
        response = client.get(path)
        if "no-store" not in response.get("Cache-Control", ""):
            missing[path] = (response.status_code, response.get("Cache-Control"))
    assert missing == {}
    # A shopper's page is not a staff page: the widget's assets may still be cached.
    assert "no-store" not in Client().get("/healthz").get("Cache-Control", "")
