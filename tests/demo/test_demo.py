"""The demo store's staff accounts: never a known password, with DEBUG on or off (issue 23)."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db

OLD_PUBLIC_PASSWORD = "shop-assistant-demo"  # what the README used to print for everyone to read
ACCOUNTS = ("staff", "agent", "owner")


def load(**options) -> str:
    out = io.StringIO()
    call_command("load_demo_store", "--no-embed", stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


@pytest.mark.parametrize("debug", [False, True])
def test_without_demo_staff_password_the_accounts_get_a_random_password_printed_once(settings, monkeypatch, debug):
    settings.DEBUG = debug
    monkeypatch.delenv("DEMO_STAFF_PASSWORD", raising=False)
    out = load()
    shown = re.search(r"Password of 'staff', 'agent', 'owner' \(shown once\): (\S+)", out)
    assert shown, out
    password = shown.group(1)
    assert len(password) >= 16 and OLD_PUBLIC_PASSWORD not in out
    users = get_user_model().objects
    for name in ACCOUNTS:
        user = users.get(username=name)
        assert user.check_password(password) and not user.check_password(OLD_PUBLIC_PASSWORD), name
    assert users.get(username="staff").is_superuser

    assert load() == ""  # the second run changes nothing and shows the password nowhere again
    assert users.get(username="staff").check_password(password)


def test_each_setup_draws_a_new_password(monkeypatch):
    monkeypatch.delenv("DEMO_STAFF_PASSWORD", raising=False)
    first = re.search(r"\(shown once\): (\S+)", load()).group(1)
    get_user_model().objects.filter(username__in=ACCOUNTS).delete()
    second = re.search(r"\(shown once\): (\S+)", load()).group(1)
    assert first != second


def test_demo_staff_password_is_used_and_not_printed(settings, monkeypatch):
    settings.DEBUG = False
    monkeypatch.setenv("DEMO_STAFF_PASSWORD", "chosen-by-the-operator-42")
    out = load()
    assert "chosen-by-the-operator-42" not in out and "DEMO_STAFF_PASSWORD" in out
    for name in ACCOUNTS:
        assert get_user_model().objects.get(username=name).check_password("chosen-by-the-operator-42"), name


def test_a_demo_whose_prompt_restates_the_policies_gets_the_prompt_that_refers_to_the_documents():
    """Issue 40: the demo's prompt had its own "Returns: ... 30 days" line, a second copy of the returns document."""
    from catalog.models import Store
    from shop_assistant.studio import services
    from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT

    load()
    store = Store.objects.get(slug="demo")
    old = services.published_prompt(store)
    assert not old.policies and "store documents" in old.full_text()
    legacy = services.publish(services.create_draft(store, "An old prompt.", "Returns: within 30 days."))
    load()
    now = services.published_prompt(store)
    assert now.pk != legacy.pk and now.system_prompt == DEFAULT_SYSTEM_PROMPT.format(store=store.name)
    assert not now.policies and "30 days" not in now.full_text()
    load()  # once: a second run changes nothing
    assert services.published_prompt(store).pk == now.pk


def test_the_demo_store_has_labels_for_its_agents_and_keeps_the_owners_own():
    """Issue 40: the demo had no labels, so its console showed "No labels yet." and agents had none to pick."""
    from shop_assistant.console.models import Label
    from shop_assistant.demo.store import LABELS

    load()
    names = set(Label.objects.filter(store__slug="demo").values_list("name", flat=True))
    assert names == {name for name, _ in LABELS} and len(names) >= 3
    Label.objects.filter(name="complaint").delete()  # the owner removed one: a second load leaves it removed
    assert "labels" not in load()
    assert not Label.objects.filter(name="complaint").exists()
