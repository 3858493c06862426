"""How many project source files one shopper message crosses (``python -m tools.message_path``).

Drives a real chat through the ASGI app (channels' WebsocketCommunicator, as tests/chat does) on the bundled
model with a short answer (``--max-tokens``, default 8) and counts the distinct files of ``shop_assistant/``,
``catalog/`` and ``inference/`` in which at least one Python function is *called*, in any thread, between the
message frame being sent and the answer's row being in the database (its ``finish_reason`` set). A warm-up
message goes first (``--cold`` skips it), so the count is a steady-state message's, not the first load's.

Every thread gets the profile hook (``threading.setprofile`` is set before Django, the engine or any executor
starts a thread; the main thread through ``sys.setprofile``); the hook only records while the message is measured.
Runs on its own SQLite database in a temporary directory unless ``DATABASE_URL`` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
PROJECT_DIRS = tuple(str(REPO_ROOT / name) + os.sep for name in ("shop_assistant", "catalog", "inference"))
ORIGIN = "http://testserver"
ENGINE = {"max_model_len": 1024, "kv_cache_memory": 96 * 1024 * 1024, "max_num_seqs": 8}

_recording = False
_files: set[str] = set()


def _hook(frame, event, arg):  # the profile function: as cheap as possible while not recording
    if _recording and event == "call":
        filename = frame.f_code.co_filename
        if filename.startswith(PROJECT_DIRS):
            _files.add(filename)


def _setup(database_url: str | None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SHOP_ASSISTANT_VAR_DIR"] = tempfile.mkdtemp(prefix="message-path-")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_demo_store", verbosity=0)


async def _receive(comm) -> dict[str, Any]:
    return json.loads(await comm.receive_from(timeout=300))


async def _ask(comm, text: str) -> str:
    """Send one message and read its answer's frames; the answer's message_id."""
    await comm.send_to(text_data=json.dumps({"type": "message", "text": text}))
    message_id = None
    while True:
        frame = await _receive(comm)
        if frame["type"] == "start":
            message_id = frame["message_id"]
        elif frame["type"] == "end":
            return message_id


async def _stored(message_id: str) -> None:
    from asgiref.sync import sync_to_async

    from shop_assistant.chat.models import Message

    def done() -> bool:
        return Message.objects.filter(pk=message_id, role="assistant", finish_reason__gt="").exists()

    for _ in range(3000):
        if await sync_to_async(done, thread_sensitive=False)():
            return
        await asyncio.sleep(0.01)
    raise RuntimeError(f"the answer {message_id} was not stored")


async def _measure(question: str, warm: bool) -> list[str]:
    global _recording
    from channels.testing import WebsocketCommunicator

    from shop_assistant.asgi import application

    comm = WebsocketCommunicator(application, "/ws/chat/?store=demo", headers=[(b"origin", ORIGIN.encode())])
    connected, _ = await comm.connect(timeout=300)
    assert connected, "the chat refused the connection"
    assert (await _receive(comm))["type"] == "ready"
    if warm:
        await _stored(await _ask(comm, "Hello! What can you help me with?"))
    _files.clear()
    _recording = True
    sys.setprofile(_hook)
    try:
        message_id = await _ask(comm, question)
        await _stored(message_id)
    finally:
        sys.setprofile(None)
        _recording = False
    await comm.disconnect(timeout=60)
    return sorted(os.path.relpath(name, REPO_ROOT) for name in _files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", default="Do you have a rain jacket?")  # a search the model continues
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--cold", action="store_true", help="measure the connection's first message")
    parser.add_argument("--database-url", default=os.environ.get("MESSAGE_PATH_DATABASE_URL"))
    parser.add_argument("--json", dest="json_out", help="write the file list here")
    args = parser.parse_args(argv)

    threading.setprofile(_hook)  # before anything starts a thread: every thread carries the hook
    _setup(args.database_url)
    from django.conf import settings

    from shop_assistant.runtime import engine_service

    settings.CHAT = {**settings.CHAT, "max_tokens": args.max_tokens, "temperature": 0.0}
    engine_service.configure(**ENGINE)
    try:
        files = asyncio.run(_measure(args.question, warm=not args.cold))
    finally:
        engine_service.shutdown()
    for name in files:
        print(name)
    by_top: dict[str, int] = {}
    for name in files:
        top = name.split(os.sep)[0] if not name.startswith("shop_assistant") else os.sep.join(name.split(os.sep)[:2])
        by_top[top] = by_top.get(top, 0) + 1
    print(f"files: {len(files)}  " + "  ".join(f"{key}={count}" for key, count in sorted(by_top.items())))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"files": files, "count": len(files)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
