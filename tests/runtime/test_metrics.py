"""/readyz and /metrics with the real engine answering (the chat's fixtures, through conftest)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.slow
def test_readyz_is_ready_when_the_engine_answers_and_every_dependency_is_up(transactional_db, chat_engine):
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["ready"] is True
    assert set(body["checks"]) == {"engine", "database", "spool", "channel_layer", "broker"}
    assert all(check["ok"] for check in body["checks"].values())


@pytest.mark.slow
async def test_metrics_show_the_engine_and_the_chat_under_vllm_names(ws, demo_store, chat_engine, chat_settings):
    from asgiref.sync import sync_to_async

    settings_ = chat_settings
    settings_.METRICS_TOKEN = "t"
    client = await ws("/ws/chat/?store=demo")
    await client.ask("Do you have rain jackets?")
    body = (await sync_to_async(lambda: Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t"))()).content.decode()
    await client.close()
    import re

    # Every sample carries the node (and the engine's the model name): compare them without their labels.
    assert re.search(r'^shop_assistant_chat_open_sessions\{node="[^"]+"\} ', body, re.M)
    assert re.search(r'^vllm:num_requests_running\{model_name="[^"]+",node="[^"]+"\} ', body, re.M)
    body = re.sub(r'(model_name|node)="[^"]*",?', "", body).replace(",}", "}").replace("{}", "")
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "shop_assistant_chat_open_sessions",
        "shop_assistant_chat_spool_depth",
    ):
        assert f"\n{name} " in body, name
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in body.splitlines() if line and not line.startswith("#")
    }
    assert samples["vllm:time_to_first_token_seconds_count"] >= 1
    assert samples["vllm:e2e_request_latency_seconds_count"] >= 1
    assert samples["vllm:generation_tokens_total"] >= 1
    assert samples["vllm:prefix_cache_queries_total"] >= samples["vllm:prefix_cache_hits_total"]
    assert samples['shop_assistant_chat_messages_total{role="user"}'] >= 1
    assert samples["shop_assistant_chat_open_sessions"] >= 1
