"""The load test's durability mode: N sessions at once, each sending messages, then every message and answer
looked up in the database (``python -m tools.loadtest --check-db``).

A session is *dropped* when its socket closes or errors before all its answers ended; a message is *lost* when
its row (the shopper's text, or the answer by its ``message_id``) is not in the database once the log has had
``--drain`` seconds to settle. Run it against a server on this machine, with the server's DATABASE_URL set.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .clients import Answer, ask, connect
from .stats import percentile


@dataclass
class SentMessage:
    """One message a session sent, and how its answer went (no finish_reason: it never ended)."""

    text: str
    message_id: str | None = None
    first_token_ms: float | None = None
    finish_reason: str | None = None


@dataclass
class SessionLog:
    index: int
    conversation: str | None = None
    turns: list[SentMessage] = field(default_factory=list)
    error: str | None = None

    @property
    def dropped(self) -> bool:
        return self.error is not None or any(t.finish_reason is None for t in self.turns)


async def one_session(
    index: int,
    url: str,
    origin: str,
    messages: int,
    start: asyncio.Event,
    timeout: float,
    run_id: str,
    questions: list[str],
) -> SessionLog:
    log = SessionLog(index)
    try:
        async with asyncio.timeout(timeout), connect(url, origin, timeout=timeout) as (connection, ready):
            log.conversation = ready["conversation"]
            await start.wait()
            for number in range(messages):
                turn = SentMessage(f"{questions[(index + number) % len(questions)]} [{run_id} s{index} m{number}]")
                log.turns.append(turn)
                answer = Answer()
                try:
                    await ask(connection, turn.text, answer)
                finally:  # what came before a failure counts too: an answer's id is looked up in the database
                    turn.message_id, turn.first_token_ms = answer.message_id, answer.first_token_ms
                if answer.error is not None:
                    raise RuntimeError(f"{answer.error['code']}: {answer.error['message']}")
                turn.finish_reason = answer.end["finish_reason"] if answer.end else None
    except Exception as exc:  # noqa: BLE001 - a failed session is a result
        log.error = f"{type(exc).__name__}: {exc}"
    return log


def missing_rows(logs: list[SessionLog]) -> list[str]:
    """What is not in the database: one line per missing message (needs Django set up)."""
    from shop_assistant.chat.models import Message

    wanted_users = {(log.conversation, t.text) for log in logs for t in log.turns if log.conversation}
    wanted_answers = {t.message_id for log in logs for t in log.turns if t.message_id}
    conversations = {log.conversation for log in logs if log.conversation}
    rows = Message.objects.filter(conversation_id__in=conversations).values_list("conversation_id", "role", "text", "id")
    found_users = {(str(c), text) for c, role, text, _ in rows if role == "user"}
    found_answers = {str(i) for _, role, _, i in rows if role == "assistant"}
    missing = [f"user message {text!r} of {conv}" for conv, text in wanted_users - found_users]
    missing += [f"answer {mid}" for mid in wanted_answers - found_answers]
    return missing


async def run(
    url: str, origin: str, sessions: int, messages: int, timeout: float, drain: float, client: LoadClient
) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    await client.warm_up(url, origin, timeout)  # model loading and first-use costs are not what is measured
    run_id = uuid.uuid4().hex[:8]
    start = asyncio.Event()
    tasks = [
        asyncio.create_task(one_session(i, url, origin, messages, start, timeout, run_id, client.questions))
        for i in range(sessions)
    ]
    await asyncio.sleep(min(5.0, 0.5 + sessions * 0.01))  # let every session connect and get `ready`
    started = time.perf_counter()
    start.set()
    logs = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    deadline = time.monotonic() + drain
    missing = await sync_to_async(missing_rows)(logs)
    while missing and time.monotonic() < deadline:  # the worker may still be writing
        await asyncio.sleep(1.0)
        missing = await sync_to_async(missing_rows)(logs)
    first = [t.first_token_ms for log in logs for t in log.turns if t.first_token_ms is not None]
    sent = sum(len(log.turns) for log in logs)
    return {
        "sessions": sessions,
        "messages_per_session": messages,
        "sessions_dropped": sum(1 for log in logs if log.dropped),
        "messages_sent": sent,
        "answers_ended": sum(1 for log in logs for t in log.turns if t.finish_reason),
        "messages_lost": len(missing),
        "first_token_p50_ms": percentile(first, 50, 1),
        "first_token_p99_ms": percentile(first, 99, 1),
        "wall_s": round(elapsed, 1),
        "missing": missing[:20],
        "errors": [f"session {log.index}: {log.error}" for log in logs if log.error][:20],
        "sessions_detail": [asdict(log) for log in logs] if os.environ.get("LOADCHECK_DETAIL") else None,
    }


@dataclass(frozen=True)
class LoadClient:
    """What the load test lends this mode: its questions and its warm-up (model loading is not measured)."""

    questions: list[str]
    warm_up: Callable[[str, str, float], Awaitable[Any]]


def main(
    url: str, origin: str, sessions: int, messages: int, timeout: float, drain: float, as_json: bool, client: LoadClient
) -> int:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
    os.environ.setdefault("ENGINE_AUTOSTART", "0")
    django.setup()
    report = asyncio.run(run(url, origin, sessions, messages, timeout, drain, client))
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            if value not in (None, []):
                print(f"{key:24} {value}")
    return 0 if report["sessions_dropped"] == 0 and report["messages_lost"] == 0 else 1
