"""/healthz is liveness only; /readyz says whether this process can answer and, if not, why; /metrics speaks
Prometheus with vLLM's names and is not public."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from shop_assistant.runtime import engine_service


def test_healthz_is_liveness(db):
    response = Client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"ok": True}


# transactional_db: the test's own transaction would hold SQLite's write lock, and /readyz says so (503).
def test_readyz_says_the_engine_failed_to_load(transactional_db, monkeypatch, settings):
    from shop_assistant.ops import health

    settings.METRICS_TOKEN = "ops-token"
    monkeypatch.setattr(engine_service, "_engine", None)
    monkeypatch.setattr(engine_service, "_load_error", OSError("no such model folder"))
    monkeypatch.setattr(health, "_engine_probe", None)
    response = Client().get("/readyz", HTTP_AUTHORIZATION="Bearer ops-token")
    body = response.json()
    assert response.status_code == 503
    assert body["ready"] is False
    assert body["checks"]["engine"]["ok"] is False
    assert "failed to load" in body["reason"] and "no such model folder" in body["reason"]
    assert body["checks"]["database"]["ok"] is True  # the others are still reported one by one


def test_readyz_says_the_database_is_down(db, monkeypatch, settings):
    from shop_assistant.ops import health

    settings.METRICS_TOKEN = "ops-token"

    def down():
        from django.db import OperationalError

        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "_database", down)
    body = Client().get("/readyz", HTTP_AUTHORIZATION="Bearer ops-token").json()
    assert body["checks"]["database"] == {"ok": False, "reason": "OperationalError: connection refused",
                                          "ms": body["checks"]["database"]["ms"]}


def test_metrics_are_not_public(db, settings):
    settings.METRICS_TOKEN = "s3cret-token"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    user = get_user_model().objects.create_user("shopper", password="pw-123456-long")
    client = Client()
    client.force_login(user)
    assert client.get("/metrics").status_code == 401  # logged in is not enough: staff only
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    staff = get_user_model().objects.create_user("ops", password="pw-123456-long", is_staff=True)
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200


def test_without_a_token_setting_no_bearer_gets_in(db, settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_anonymous_readyz_says_only_which_checks_fail_not_paths_or_error_text(transactional_db, monkeypatch, settings):
    """Before: anyone read the spool's absolute path and the database's own error text (issue 39, item 12)."""
    from shop_assistant.ops import health

    settings.METRICS_TOKEN = "ops-token"

    def down():
        from django.db import OperationalError

        raise OperationalError('could not connect to server at "db.internal" (10.1.2.3), port 5432')

    monkeypatch.setattr(health, "_database", down)
    monkeypatch.setattr(engine_service, "_engine", None)
    monkeypatch.setattr(engine_service, "_load_error", OSError("no model at /srv/models/private"))
    monkeypatch.setattr(health, "_engine_probe", None)
    anonymous = Client().get("/readyz")
    assert anonymous.status_code == 503
    body = anonymous.json()
    assert body["ready"] is False and body["reason"] == "not ready: engine, database"
    assert body["checks"]["spool"] == {"ok": True} and body["checks"]["database"] == {"ok": False}
    text = anonymous.content.decode()
    assert "/" not in text and "db.internal" not in text and "OperationalError" not in text, text
    assert str(settings.CHAT_SPOOL_DIR) not in text
    # Staff and the metrics token read the reasons.
    detailed = Client().get("/readyz", HTTP_AUTHORIZATION="Bearer ops-token").json()
    assert "db.internal" in detailed["checks"]["database"]["reason"] and "/" in detailed["checks"]["spool"]["reason"]
    staff = get_user_model().objects.create_user("ops", password="pw-123456-long", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert "/srv/models/private" in client.get("/readyz").json()["reason"]
