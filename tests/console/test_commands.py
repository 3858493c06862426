"""create_store, add_staff and the demo store's console accounts."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from catalog.models import Store
from shop_assistant.console.models import RetentionSettings, StoreMembership
from shop_assistant.console.roles import can_work_on

pytestmark = pytest.mark.django_db


def test_create_store_then_add_staff(capsys, monkeypatch):
    call_command("create_store", "boots", "Boot Barn", "--retention-days", "30")
    store = Store.objects.get(slug="boots")
    assert store.name == "Boot Barn" and RetentionSettings.of(store).retention_days == 30
    assert store.prompt_versions.filter(status="published").exists()
    with pytest.raises(CommandError):
        call_command("create_store", "boots", "Again")

    capsys.readouterr()
    call_command("add_staff", "ann@example.com", "--store", "boots", "--role", "agent", "--name", "Ann")
    out = capsys.readouterr().out
    user = get_user_model().objects.get(email="ann@example.com")
    password = out.split("Password (shown once): ")[1].split()[0]
    assert user.check_password(password) and user.first_name == "Ann"
    assert can_work_on(user, store) and not can_work_on(user, store, role="owner")

    call_command("add_staff", "ann@example.com", "--store", "boots", "--role", "owner")
    assert StoreMembership.objects.get(user=user, store=store).role == "owner"
    assert "Password" not in capsys.readouterr().out  # an existing account keeps its password
    assert get_user_model().objects.filter(email="ann@example.com").count() == 1

    monkeypatch.setenv("STAFF_PASSWORD", "chosen-pass-123")
    call_command("add_staff", "bo@example.com", "--store", "boots", "--role", "agent")
    assert get_user_model().objects.get(email="bo@example.com").check_password("chosen-pass-123")
    with pytest.raises(CommandError):
        call_command("add_staff", "x@example.com", "--store", "nope", "--role", "agent")
    with pytest.raises(CommandError):
        call_command("add_staff", "not-an-email", "--store", "boots", "--role", "agent")


def test_demo_store_has_an_agent_and_an_owner(transactional_db, monkeypatch):
    monkeypatch.setenv("DEMO_STAFF_PASSWORD", "demo-pass-for-tests")
    call_command("load_demo_store", "--no-embed", verbosity=0)
    demo = Store.objects.get(slug="demo")
    User = get_user_model()
    agent, owner = User.objects.get(username="agent"), User.objects.get(username="owner")
    assert (agent.first_name, owner.first_name) == ("Dana", "Olivia")
    assert agent.check_password("demo-pass-for-tests") and not agent.is_superuser and not agent.is_staff
    assert can_work_on(agent, demo) and not can_work_on(agent, demo, role="owner")
    assert can_work_on(owner, demo, role="owner")
    assert User.objects.get(username="staff").is_superuser
    call_command("load_demo_store", "--no-embed", verbosity=0)  # idempotent
    assert StoreMembership.objects.filter(store=demo).count() == 2
