"""Fixtures for the chat tests: the real engine (bundled model, small cache), the demo store, websocket helpers,
and real daphne / Celery worker processes on the test database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from tests.conftest import REPO_ROOT

# Small enough for a 2-core CI machine, large enough for the demo store's system prompt plus a few turns.
TEST_ENGINE = {"max_model_len": 1024, "kv_cache_memory": 96 * 1024 * 1024, "max_num_seqs": 24}
TEST_MAX_TOKENS = 8
ORIGIN = "http://testserver"
# How a model answer may end without anyone stopping it: the model's end, the budget, or the sentence checker's
# refusal of a sentence (the answer then ends at the last supported one).
ANSWERED = frozenset({"stop", "length", "unsupported"})
FRAME_TIMEOUT = 120  # seconds; the first answer may wait for the embedding model and the engine to load


@pytest.fixture(scope="session")
def chat_engine():
    """The process-wide engine, started once for the whole session with test-sized settings."""
    from shop_assistant.runtime import engine_service

    engine_service.configure(**TEST_ENGINE)
    engine = engine_service.get_engine()
    yield engine
    engine_service.shutdown()


@pytest.fixture
def chat_settings(settings):
    settings.CHAT = {**settings.CHAT, "max_tokens": TEST_MAX_TOKENS, "temperature": 0.0}
    return settings


@pytest.fixture
def demo_store(transactional_db):
    """The demo store as `load_demo_store` makes it (products and a published prompt), committed so other
    threads and processes see it."""
    from catalog.models import Store

    call_command("load_demo_store", verbosity=0)
    return Store.objects.get(slug="demo")


@pytest.fixture
def asgi_app():
    from shop_assistant.asgi import application

    return application


@pytest.fixture
async def ws(asgi_app, transactional_db):
    """``await ws(path)``: a connected Client; every one still open is disconnected at teardown, so a failed
    test does not leave an answer generating into the next test."""
    opened: list[Client] = []

    async def connect(path: str = "/ws/chat/?store=demo", origin: str = ORIGIN) -> Client:
        client = Client(asgi_app, path, origin)
        opened.append(client)
        await client.connect()
        return client

    yield connect
    for client in opened:
        if not client.closed:
            await client.close()


# --- websocket helpers -------------------------------------------------------------------------------------


@dataclass
class Answer:
    start: dict[str, Any]
    tokens: list[str] = field(default_factory=list)
    products: list[dict[str, Any]] | None = None
    sources: list[dict[str, Any]] | None = None
    end: dict[str, Any] | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the shopper is left with: an answer cut before a made-up figure comes with its kept text."""
        if self.end is not None and "text" in self.end:
            return self.end["text"]
        return "".join(self.tokens)


async def collect_answer(receive, *, first: dict[str, Any] | None = None, timeout: float = FRAME_TIMEOUT) -> Answer:
    """Frames of one answer, from `start` to `end`, checking they all carry its message_id."""
    frame = first or await receive(timeout)
    assert frame["type"] == "start", frame
    answer = Answer(start=frame, frames=[frame])
    message_id = frame["message_id"]
    while True:
        frame = await receive(timeout)
        answer.frames.append(frame)
        assert frame.get("message_id") == message_id, frame
        if frame["type"] == "token":
            answer.tokens.append(frame["text"])
        elif frame["type"] == "products":
            answer.products = frame["items"]
        elif frame["type"] == "sources":
            answer.sources = frame["items"]
        elif frame["type"] == "end":
            answer.end = frame
            return answer
        else:
            raise AssertionError(f"unexpected frame inside an answer: {frame}")


class Client:
    """A WebsocketCommunicator speaking the chat protocol."""

    def __init__(self, app, path: str = "/ws/chat/", origin: str = ORIGIN) -> None:
        from channels.testing import WebsocketCommunicator

        self.comm = WebsocketCommunicator(app, path, headers=[(b"origin", origin.encode())])
        self.ready: dict[str, Any] | None = None
        self.closed = False

    async def connect(self) -> dict[str, Any]:
        connected, _ = await self.comm.connect(timeout=FRAME_TIMEOUT)
        assert connected
        self.ready = await self.receive()
        assert self.ready["type"] == "ready", self.ready
        return self.ready

    async def receive(self, timeout: float = FRAME_TIMEOUT) -> dict[str, Any]:
        return json.loads(await self.comm.receive_from(timeout=timeout))

    async def send(self, frame: dict[str, Any]) -> None:
        await self.comm.send_to(text_data=json.dumps(frame))

    async def ask(self, text: str) -> Answer:
        await self.send({"type": "message", "text": text})
        return await collect_answer(self.receive)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.comm.disconnect(timeout=FRAME_TIMEOUT)


async def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(interval)
    return predicate()


def hold_write_lock(begin: str = "EXCLUSIVE", table: str = "chat_message"):
    """Block every writer of the test database until the returned connection is closed, as another process
    would: SQLite's write lock (``BEGIN EXCLUSIVE``, or ``IMMEDIATE``), or PostgreSQL's lock on ``table``."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        import sqlite3

        lock = sqlite3.connect(str(db["NAME"]), isolation_level=None, timeout=30)
        lock.execute(f"BEGIN {begin}")
        return lock
    import psycopg

    lock = psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                           password=db["PASSWORD"] or None, dbname=db["NAME"])
    lock.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
    return lock


# --- real processes ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for_subprocesses() -> str:
    """DATABASE_URL of pytest-django's test database, for daphne and worker subprocesses."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        name = str(db["NAME"])
        assert "memory" not in name, "the test database must be a file for subprocesses (see settings_test)"
        return f"sqlite:///{name}"
    return (
        f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "shop_assistant.settings",
        "DEBUG": "1",
        "HF_HUB_OFFLINE": "1",
        "DATABASE_URL": database_url_for_subprocesses(),
        "ENGINE_MAX_MODEL_LEN": str(TEST_ENGINE["max_model_len"]),
        "ENGINE_KV_CACHE_MEMORY": str(TEST_ENGINE["kv_cache_memory"]),
        "ENGINE_MAX_NUM_SEQS": str(TEST_ENGINE["max_num_seqs"]),
        "CHAT_MAX_TOKENS": str(TEST_MAX_TOKENS),
        "CHAT_TEMPERATURE": "0",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    env.update(extra)
    return env


@dataclass
class Server:
    port: int
    log: Path
    process: subprocess.Popen

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/chat/"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _wait_http(server: Server, timeout: float = 120.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"daphne exited with {server.process.returncode}:\n{server.log_text()}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{server.http}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        time.sleep(0.2)
    raise AssertionError(f"daphne did not answer in {timeout} s:\n{server.log_text()}")


@contextlib.contextmanager
def run_daphne(log_dir: Path, port: int | None = None, **env: str) -> Iterator[Server]:
    port = port or free_port()
    log = log_dir / f"daphne-{port}-{time.monotonic_ns()}.log"
    process = subprocess.Popen(
        # As scripts/run.sh, the Dockerfile and docker-compose.yml start it: daphne with the chat's flags.
        [sys.executable, "-m", "shop_assistant.serve", "-b", "127.0.0.1", "-p", str(port)],
        cwd=REPO_ROOT,
        env=subprocess_env(**env),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    server = Server(port, log, process)
    try:
        _wait_http(server)
        yield server
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@contextlib.contextmanager
def run_worker(log_dir: Path, redis_url: str) -> Iterator[subprocess.Popen]:
    log = log_dir / "worker.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "shop_assistant", "worker", "-P", "solo", "-l", "INFO",
         "--without-gossip", "--without-mingle", "-n", f"chat-test-{os.getpid()}@%h"],
        cwd=REPO_ROOT,
        env=subprocess_env(REDIS_URL=redis_url, ENGINE_AUTOSTART="0"),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield process
    finally:
        stop_process(process)


@pytest.fixture(scope="session")
def daphne_server(django_db_setup, tmp_path_factory) -> Iterator[Server]:
    """daphne serving the app on a free 127.0.0.1 port (in-memory layer, eager Celery), on the test database.
    Tests that use it load their data with a transactional fixture (demo_store), so daphne sees it."""
    with run_daphne(tmp_path_factory.mktemp("daphne")) as server:
        yield server
