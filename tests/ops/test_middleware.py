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
