"""The OpenAI-compatible API, driven by the official ``openai`` client against a real daphne process."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from shop_assistant.api.models import ApiKey, hash_key
from tests.chat.conftest import daphne_server, demo_store  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow


@pytest.fixture
def api_key(demo_store):  # noqa: F811
    from io import StringIO

    out = StringIO()
    call_command("create_api_key", "demo", "--name", "tests", stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def client(daphne_server, api_key):  # noqa: F811
    import openai

    return openai.OpenAI(base_url=f"{daphne_server.http}/v1", api_key=api_key, max_retries=0, timeout=120)


def test_keys_are_stored_hashed(api_key):
    key = ApiKey.objects.get()
    assert api_key.startswith("sa-") and key.key_hash == hash_key(api_key)
    assert api_key not in (key.key_hash, key.prefix) and key.store.slug == "demo"


def test_models_lists_the_served_model(client):
    models = client.models.list().data
    assert len(models) == 1 and models[0].id


def test_chat_completion_with_usage_and_cached_tokens(client):
    model = client.models.list().data[0].id
    messages = [{"role": "system", "content": "You are a helpful shop assistant. " * 8},
                {"role": "user", "content": "Say hello."}]
    first = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0)
    assert first.object == "chat.completion"
    assert first.choices[0].message.role == "assistant" and first.choices[0].message.content
    assert first.choices[0].finish_reason in {"stop", "length"}
    assert 1 <= first.usage.completion_tokens <= 6
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    # The same prompt again: its full blocks come from the prefix cache (under the store's salt).
    second = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0)
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens // 16 * 16 > 0
    assert second.choices[0].message.content == first.choices[0].message.content


def test_streaming_chat_completion(client):
    model = client.models.list().data[0].id
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Name a colour."}], max_tokens=5, temperature=0,
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text and finishes in (["stop"], ["length"])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 1


def test_text_completion(client):
    model = client.models.list().data[0].id
    completion = client.completions.create(model=model, prompt="The capital of France is", max_tokens=4,
                                           temperature=0)
    assert completion.object == "text_completion" and completion.choices[0].text
    assert completion.usage.completion_tokens >= 1


def test_a_wrong_key_and_a_wrong_model_are_refused(client, daphne_server):  # noqa: F811
    import openai

    bad = openai.OpenAI(base_url=f"{daphne_server.http}/v1", api_key="sa-nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=client.models.list().data[0].id, messages=[])


def test_revoked_keys_stop_working(client):
    import openai

    ApiKey.objects.update(revoked=True)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()
