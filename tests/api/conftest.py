"""Fixtures of the /v1 tests: a key of the demo store and the official ``openai`` client on a live daphne."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.chat.conftest import chat_engine, daphne_server, demo_store  # noqa: F401 - fixtures


@pytest.fixture
def api_key(demo_store):  # noqa: F811
    from io import StringIO

    out = StringIO()
    call_command("create_api_key", "demo", "--name", "tests", stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def openai_client(daphne_server, api_key):  # noqa: F811
    import openai

    return openai.OpenAI(base_url=f"{daphne_server.http}/v1", api_key=api_key, max_retries=0, timeout=120)


def wait_ready(server, timeout: float = 300, probe_timeout: float = 30) -> None:
    """Until the server's /readyz answers 200 (the model loaded), so that a request's timeout measures the
    request, not the load."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{server.http}/readyz", timeout=probe_timeout):
                return
        except (urllib.error.HTTPError, OSError):
            time.sleep(1)
