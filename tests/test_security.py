"""A Content-Security-Policy on every page, and throttled logins on the admin (and staff) login page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client


@pytest.mark.parametrize("path", ["/", "/admin/login/", "/healthz", "/no-such-page"])
def test_every_page_has_a_content_security_policy(db, path):
    policy = Client().get(path)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"  # nothing inline: the widget is a file
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert directives["frame-ancestors"] == "'none'"


def test_twenty_wrong_admin_passwords_lock_the_login(db):
    get_user_model().objects.create_superuser("staff", password="shop-assistant-demo")
    client = Client()
    statuses = [
        client.post("/admin/login/", {"username": "staff", "password": f"guess-{i}"}).status_code for i in range(20)
    ]
    assert statuses[:4] == [200] * 4  # the form again, with an error
    assert set(statuses[4:]) == {429}  # the 5th failure locks
    # Locked: even the right password is refused now.
    response = client.post("/admin/login/", {"username": "staff", "password": "shop-assistant-demo"})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_a_right_password_still_logs_in_below_the_limit(db):
    get_user_model().objects.create_superuser("staff", password="shop-assistant-demo")
    client = Client()
    for i in range(3):
        client.post("/admin/login/", {"username": "staff", "password": f"guess-{i}"})
    response = client.post("/admin/login/", {"username": "staff", "password": "shop-assistant-demo"})
    assert response.status_code == 302 and "_auth_user_id" in client.session
