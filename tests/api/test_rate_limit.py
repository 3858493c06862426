"""API requests are limited per key (in-process Django client: no engine needed for /v1/models)."""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from catalog.models import Store
from shop_assistant.api.models import ApiKey
from shop_assistant.runtime.limits import reset_shared_limits


@pytest.fixture(autouse=True)
def fresh_limits():
    reset_shared_limits()
    yield
    reset_shared_limits()


@pytest.mark.django_db(transaction=True)
async def test_each_key_has_its_own_limit(settings):
    from asgiref.sync import sync_to_async

    settings.API = {**settings.API, "requests_per_minute_per_key": 3}
    store = await sync_to_async(Store.objects.create)(slug="s", name="S")
    _, one = await sync_to_async(ApiKey.create_key)(store, "one")
    _, two = await sync_to_async(ApiKey.create_key)(store, "two")
    client = AsyncClient()
    statuses = [(await client.get("/v1/models", headers={"Authorization": f"Bearer {one}"})).status_code
                for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    refused = await client.get("/v1/models", headers={"Authorization": f"Bearer {one}"})
    assert refused.json()["error"]["code"] == "rate_limit_exceeded" and int(refused["Retry-After"]) >= 1
    assert (await client.get("/v1/models", headers={"Authorization": f"Bearer {two}"})).status_code == 200


@pytest.mark.django_db
def test_no_key_no_entry(client):
    response = client.get("/v1/models")
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
