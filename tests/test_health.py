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


def test_readyz_says_the_engine_failed_to_load(db, monkeypatch):
    from shop_assistant.ops import health

    monkeypatch.setattr(engine_service, "_engine", None)
    monkeypatch.setattr(engine_service, "_load_error", OSError("no such model folder"))
    monkeypatch.setattr(health, "_engine_probe", None)
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["ready"] is False
    assert body["checks"]["engine"]["ok"] is False
    assert "failed to load" in body["reason"] and "no such model folder" in body["reason"]
    assert body["checks"]["database"]["ok"] is True  # the others are still reported one by one


def test_readyz_says_the_database_is_down(db, monkeypatch):
    from shop_assistant.ops import health

    def down():
        from django.db import OperationalError

        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "_database", down)
    body = Client().get("/readyz").json()
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
