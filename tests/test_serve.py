"""The web process's one entry point (``python -m shop_assistant.serve``): every way of starting it takes it, and
the daphne it starts answers a big frame with the chat's `frame_too_large` instead of dropping the socket."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest
import websockets
import yaml

from tests.chat.conftest import FRAME_TIMEOUT, daphne_server, demo_store  # noqa: F401 - fixtures
from tests.conftest import REPO_ROOT


def test_run_sh_the_dockerfile_and_compose_all_start_the_web_process_through_serve():
    run_sh = (REPO_ROOT / "scripts" / "run.sh").read_text()
    assert re.search(r"^exec \.venv/bin/python -m shop_assistant\.serve\b", run_sh, re.M), run_sh
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1))
    assert cmd[:3] == ["python", "-m", "shop_assistant.serve"]
    web = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]["web1"]["command"]
    assert web[:3] == ["python", "-m", "shop_assistant.serve"]
    for text in (run_sh, dockerfile, " ".join(web)):
        assert "asgi:application" not in text  # no second list of daphne flags to drift from serve's


def test_serve_without_secret_key_says_what_to_set_in_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "SHOP_ASSISTANT_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "shop_assistant.serve"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "SECRET_KEY" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
async def test_a_2_mib_frame_gets_frame_too_large_and_the_socket_stays_open(daphne_server, demo_store):  # noqa: F811
    async with websockets.connect(daphne_server.ws + "?store=demo", origin=daphne_server.http, proxy=None,
                                  open_timeout=30) as connection:

        async def receive() -> dict:
            return json.loads(await asyncio.wait_for(connection.recv(), FRAME_TIMEOUT))

        assert (await receive())["type"] == "ready"
        await connection.send(json.dumps({"type": "message", "text": "x" * (2 * 1024 * 1024)}))
        assert (await receive())["code"] == "frame_too_large"
        await connection.send(json.dumps({"type": "nonsense"}))  # still open and answering
        assert (await receive())["code"] == "unknown_type"
