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


def test_chat_completion_with_n_choices(client):
    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": "Name a colour."}]
    one = client.chat.completions.create(model=model, messages=messages, max_tokens=5, temperature=0)
    three = client.chat.completions.create(model=model, messages=messages, max_tokens=5, temperature=0, n=3)
    assert [c.index for c in three.choices] == [0, 1, 2]
    # Greedy: every choice is the n=1 answer; usage counts all three.
    assert {c.message.content for c in three.choices} == {one.choices[0].message.content}
    assert three.usage.completion_tokens == 3 * one.usage.completion_tokens
    assert three.usage.prompt_tokens == one.usage.prompt_tokens
    sampled = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=1.0,
                                             seed=3, n=4)
    assert len(sampled.choices) == 4 and len({c.message.content for c in sampled.choices}) > 1


def test_streaming_with_n_choices_tags_each_chunk_with_its_index(client):
    model = client.models.list().data[0].id
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Name a fruit."}], max_tokens=6, temperature=1.0,
        seed=5, n=2, stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    choices = [c.choices[0] for c in chunks if c.choices]
    assert {c.index for c in choices} == {0, 1}
    assert sorted(c.index for c in choices if c.delta.role == "assistant") == [0, 1]
    assert sorted(c.index for c in choices if c.finish_reason) == [0, 1]
    texts = {i: "".join(c.delta.content or "" for c in choices if c.index == i) for i in (0, 1)}
    assert all(texts.values())
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 2
    # A text completion streamed, then whole: the same two seeded answers and usage. (A prompt shorter than
    # a block, so the second request computes it afresh too: prefix-cache hits may round differently.)
    common = dict(model=model, prompt="Socks for hiking", max_tokens=6, temperature=1.0, seed=5, n=2)
    streamed = [c for c in client.completions.create(stream=True, stream_options={"include_usage": True},
                                                     **common)]
    pieces = [c.choices[0] for c in streamed if c.choices]
    texts = ["".join(c.text for c in pieces if c.index == i) for i in (0, 1)]
    whole = client.completions.create(**common)
    assert [c.text for c in whole.choices] == texts
    assert whole.usage.completion_tokens == streamed[-1].usage.completion_tokens


def test_text_completion_best_of(client):
    model = client.models.list().data[0].id
    common = dict(model=model, prompt="Our best hiking boots are", max_tokens=4, temperature=1.0, seed=11)
    every = client.completions.create(n=3, **common)
    best = client.completions.create(n=1, best_of=3, **common)
    assert len(best.choices) == 1 and best.choices[0].index == 0
    # One of the three candidates (candidate i samples with seed + i in both requests), and the usage of all.
    assert best.choices[0].text in {c.text for c in every.choices}
    assert best.usage.completion_tokens == every.usage.completion_tokens
    import openai

    with pytest.raises(openai.BadRequestError, match="cannot be streamed"):
        client.completions.create(n=1, best_of=2, stream=True, **common)
    with pytest.raises(openai.BadRequestError, match="best_of must be at least n"):
        client.completions.create(n=3, best_of=2, **common)
    with pytest.raises(openai.BadRequestError, match="at most"):
        client.completions.create(n=1000, **common)
    with pytest.raises(openai.BadRequestError, match="only supported by /v1/completions"):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                       extra_body={"best_of": 2})


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


# --- token ids: refused before the response starts, and counted as what they were -----------------------------

METRICS_TOKEN = "api-metrics-test"


@pytest.fixture(scope="module")
def metered_server(django_db_setup, tmp_path_factory):
    """daphne whose /metrics a bearer token may read (the shared ``daphne_server`` has no token set)."""
    from tests.chat.conftest import run_daphne

    import time
    import urllib.error
    import urllib.request

    with run_daphne(tmp_path_factory.mktemp("metered"), METRICS_TOKEN=METRICS_TOKEN) as server:
        # The model loaded, so that a request's timeout below measures the request, not the load.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{server.http}/readyz", timeout=30):
                    break
            except (urllib.error.HTTPError, OSError):
                time.sleep(1)
        yield server


def _post(server, api_key: str, body: dict, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """The raw exchange over a socket: a missing status line shows as a timeout, not as a client's retry."""
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request("POST", "/v1/completions", body=json.dumps(body),
                           headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _api_requests(server, status: str) -> float:
    import re
    import urllib.request

    request = urllib.request.Request(f"{server.http}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    pattern = rf'^\w*api_requests_total\{{[^}}]*endpoint="completions"[^}}]*status="{status}"[^}}]*\}} (\S+)$'
    return sum(float(value) for value in re.findall(pattern, text, re.M))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_token_ids_outside_the_vocabulary_are_a_400_before_anything_is_sent(metered_server, api_key, stream):
    import json

    model = json.loads(_models(metered_server, api_key))["data"][0]["id"]
    before = _api_requests(metered_server, "400"), _api_requests(metered_server, "200")
    for prompt in ([99999999, 1], [-1], [49152]):  # the vocabulary is 49152 ids: 0 .. 49151
        status, headers, body = _post(metered_server, api_key,
                                      {"model": model, "prompt": prompt, "max_tokens": 2, "stream": stream})
        assert status == 400, body
        assert headers["Content-Type"].startswith("application/json")
        error = json.loads(body)["error"]
        assert error["code"] == "invalid_prompt" and error["type"] == "invalid_request_error"
        assert "49152" in error["message"]
    after = _api_requests(metered_server, "400"), _api_requests(metered_server, "200")
    assert after[0] - before[0] == 3 and after[1] == before[1]  # counted as refused, not as served


@pytest.mark.parametrize("prompt", [[49151], [[49151]], [0, 49151]])
def test_a_prompt_of_valid_token_ids_is_accepted_one_token_long_too(metered_server, api_key, prompt):
    import json

    model = json.loads(_models(metered_server, api_key))["data"][0]["id"]
    status, _, body = _post(metered_server, api_key, {"model": model, "prompt": prompt, "max_tokens": 2,
                                                     "temperature": 0})
    assert status == 200, body
    completion = json.loads(body)
    assert completion["object"] == "text_completion" and completion["usage"]["prompt_tokens"] == len(prompt)
    assert completion["usage"]["completion_tokens"] >= 1


def _models(server, api_key: str) -> bytes:
    import urllib.request

    request = urllib.request.Request(f"{server.http}/v1/models", headers={"Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()
