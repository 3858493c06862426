"""The console's token delay with 20 shoppers chatting: shoppers on one daphne, the console on another, one Redis.
Prints the figures (median, p99, load average) and writes them to var/console-latency.json."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from tools.console_latency import measure

from tests.conftest import REPO_ROOT

from .conftest import run_daphne, run_worker, session_cookie

# A latency figure over the Redis layer; the database only holds the store.
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.services, pytest.mark.backend_agnostic]
SHOPPERS = 20
MAX_TOKENS = "32"


@pytest.fixture
def agent_cookie(demo_store) -> str:
    return session_cookie(get_user_model().objects.get(username="agent"))


async def test_console_token_delay_with_20_shoppers(console_redis_url, demo_store, agent_cookie, tmp_path):
    env = {"REDIS_URL": console_redis_url, "CHAT_MAX_TOKENS": MAX_TOKENS, "CHAT_MESSAGES_PER_MINUTE": "100"}
    with (
        run_worker(tmp_path, console_redis_url),
        run_daphne(tmp_path, **env) as shop,
        run_daphne(tmp_path, **env) as staff,
    ):
        result = await measure(shop.http, staff.http, agent_cookie, shoppers=SHOPPERS)
    print("console token delay:", json.dumps(result))
    (REPO_ROOT / "var").mkdir(exist_ok=True)
    (REPO_ROOT / "var" / "console-latency.json").write_text(json.dumps(result, indent=1))
    console = result["console"]
    # Every shopper's answer reached the console, token frames with it; the delays are real measurements.
    assert result["shoppers"] == SHOPPERS and console["count"] >= SHOPPERS
    assert 0 <= console["median_ms"] <= console["p99_ms"] <= console["max_ms"]
