"""Fixtures for the studio tests: the chat's engine, demo store and daphne fixtures, and users with roles."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

# The chat's fixtures, shared rather than copied: the engine is process-wide, so both directories use one.
from tests.chat.conftest import (  # noqa: F401
    asgi_app,
    chat_engine,
    chat_settings,
    daphne_server,
    demo_store,
    ws,
)

PASSWORD = "studio-test-password"


async def wait_until_ready(page, base: str, seconds: int = 120) -> None:
    """Poll /readyz until the process can answer (the engine loaded: the studio counts tokens with its tokenizer)."""
    for _ in range(seconds * 2):
        response = await page.goto(f"{base}/readyz")
        if (await response.json()).get("ready"):
            return
        await page.wait_for_timeout(500)
    raise AssertionError(f"{base} not ready after {seconds} s: {await response.text()}")


def make_user(username: str, store=None, role: str | None = None):
    from shop_assistant.console.models import StoreMembership

    user = get_user_model().objects.create_user(username, f"{username}@example.com", PASSWORD)
    if store is not None and role:
        StoreMembership.objects.create(user=user, store=store, role=role)
    return user


@pytest.fixture
def store(db):
    from catalog.models import Store

    return Store.objects.create(slug="corner", name="Corner Shop")


@pytest.fixture
def owner(store):
    return make_user("olivia", store, "owner")


@pytest.fixture
def agent(store):
    return make_user("adam", store, "agent")


@pytest.fixture(autouse=True)
def no_scoring_on_publish(settings):
    """Publishing scores the new version with the live engine, in the background; tests without the engine
    publish without it (the scoring tests turn it back on with ``scoring_on``)."""
    settings.STUDIO_SCORE_ON_PUBLISH = False


@pytest.fixture
def scoring_on(settings):
    settings.STUDIO_SCORE_ON_PUBLISH = True
    return settings
