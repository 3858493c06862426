"""The role rules shared by the console and the studio."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from catalog.models import Store
from shop_assistant.console.models import StoreMembership
from shop_assistant.console.roles import can_work_on, is_staff_member, stores_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def stores():
    return Store.objects.create(slug="a", name="A"), Store.objects.create(slug="b", name="B")


def make_user(name: str, **extra):
    return get_user_model().objects.create_user(name, f"{name}@example.com", "pw", **extra)


def test_agent_sees_only_its_store(stores):
    a, b = stores
    agent = make_user("agent")
    StoreMembership.objects.create(user=agent, store=a, role="agent")
    assert list(stores_for(agent)) == [a]
    assert can_work_on(agent, a) and not can_work_on(agent, b)
    assert not can_work_on(agent, a, role="owner")
    assert is_staff_member(agent) and not is_staff_member(agent, role="owner")


def test_owner_is_also_agent(stores):
    a, _ = stores
    owner = make_user("owner")
    StoreMembership.objects.create(user=owner, store=a, role="owner")
    assert list(stores_for(owner, "owner")) == [a]
    assert list(stores_for(owner, "agent")) == [a]


def test_superuser_sees_all_and_nobody_else_sees_any(stores):
    root = make_user("root", is_superuser=True, is_staff=True)
    assert set(stores_for(root, "owner")) == set(stores)
    assert not stores_for(make_user("plain")).exists()
    assert not stores_for(AnonymousUser()).exists()
    inactive = make_user("gone", is_active=False)
    StoreMembership.objects.create(user=inactive, store=stores[0], role="owner")
    assert not stores_for(inactive).exists()
