"""Concurrent-session latency against a running server: time from sending a message to its first `token` frame,
next to the engine's own time to first token for the same requests (from the `end` frame's timing).

    python -m tools.loadtest --url ws://127.0.0.1:8000/ws/chat/?store=demo --sessions 20

The difference between the two is what the web layer adds: retrieval, prompt assembly, the hop into the engine
thread and back, and the websocket. Only for servers you run yourself (loopback by default); every run is
bounded by --timeout and stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from .clients import LOOPBACK, ask, connect, origin_of
from .stats import percentile

QUESTIONS = [
    "Do you have a waterproof rain jacket?",
    "What tents do you sell for a family of four?",
    "I need warm gloves for skiing.",
    "Which backpack is good for a weekend hike?",
    "Do you sell trekking poles?",
    "What is your return policy?",
    "Can you recommend a sleeping bag for cold nights?",
    "Do you have headlamps?",
]


@dataclass
class Result:
    session: int
    ok: bool
    first_token_ms: float | None = None
    engine_ttft_ms: float | None = None
    prepare_ms: float | None = None
    total_ms: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None


async def one_session(index: int, url: str, origin: str, start: asyncio.Event, timeout: float) -> Result:
    try:
        async with asyncio.timeout(timeout), connect(url, origin, timeout=timeout) as (connection, _ready):
            await start.wait()  # every session sends at the same moment
            answer = await ask(connection, QUESTIONS[index % len(QUESTIONS)])
    except Exception as exc:  # noqa: BLE001 - a failed session is a result, not a crash
        return Result(index, False, error=f"{type(exc).__name__}: {exc}")
    if answer.error is not None:
        return Result(index, False, error=f"{answer.error['code']}: {answer.error['message']}")
    end = answer.end or {}
    usage, timing = end.get("usage", {}), end.get("timing", {})
    return Result(
        index,
        answer.first_token is not None,
        first_token_ms=answer.first_token_ms,
        engine_ttft_ms=timing.get("engine_ttft_ms"),
        prepare_ms=timing.get("prepare_ms"),
        total_ms=answer.total_ms,
        prompt_tokens=usage.get("prompt_tokens"),
        cached_tokens=usage.get("cached_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        finish_reason=end.get("finish_reason"),
        error=None if answer.first_token is not None else "no token before end",
    )


async def warm_up(url: str, origin: str, timeout: float) -> None:
    """One request first, so model loading and first-use costs are not counted as latency."""
    start = asyncio.Event()
    start.set()
    result = await one_session(-1, url, origin, start, timeout)
    if not result.ok:
        raise SystemExit(f"warm-up failed: {result.error}")


def _load_average() -> str | None:
    """This machine's load (1, 5, 15 min): on a shared machine latency figures mean little without it."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return None


async def run(url: str, origin: str, sessions: int, timeout: float, warm: bool = True) -> dict[str, Any]:
    if warm:
        await warm_up(url, origin, timeout)
    start = asyncio.Event()
    tasks = [asyncio.create_task(one_session(i, url, origin, start, timeout)) for i in range(sessions)]
    await asyncio.sleep(0.5)  # let every session connect and get `ready`
    start.set()
    results = await asyncio.gather(*tasks)
    ok = [r for r in results if r.ok]
    first = [r.first_token_ms for r in ok if r.first_token_ms is not None]
    engine = [r.engine_ttft_ms for r in ok if r.engine_ttft_ms is not None]
    overhead = [r.first_token_ms - r.engine_ttft_ms for r in ok if r.first_token_ms and r.engine_ttft_ms]
    return {
        "sessions": sessions,
        "succeeded": len(ok),
        "median_first_token_ms": percentile(first, 50, 1),
        "p90_first_token_ms": percentile(first, 90, 1),
        "median_engine_ttft_ms": percentile(engine, 50, 1),
        "p90_engine_ttft_ms": percentile(engine, 90, 1),
        "median_web_overhead_ms": percentile(overhead, 50, 1),
        "p90_web_overhead_ms": percentile(overhead, 90, 1),
        # of which the server's own preparation before the engine got the request (retrieval, assembly)
        "median_prepare_ms": percentile([r.prepare_ms for r in ok if r.prepare_ms is not None], 50, 1),
        "load_average": _load_average(),
        "median_total_ms": percentile([r.total_ms for r in ok if r.total_ms is not None], 50, 1),
        "results": [asdict(r) for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="ws://127.0.0.1:8000/ws/chat/?store=demo")
    parser.add_argument("--origin", help="Origin header (default: the server's own http origin)")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for each session, all included")
    parser.add_argument("--no-warm-up", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument("--check-db", action="store_true",
                        help="durability mode (see loadcheck): afterwards, every message and answer must be in the "
                        "database named by DATABASE_URL")
    parser.add_argument("--messages", type=int, default=1, help="--check-db: messages each session sends")
    parser.add_argument("--drain", type=float, default=60.0, help="--check-db: seconds the log may take to settle")
    args = parser.parse_args(argv)

    if urlsplit(args.url).hostname not in LOOPBACK:
        parser.error("load tests only target a server on this machine (127.0.0.1, localhost, ::1)")
    origin = args.origin or origin_of(args.url)
    if args.check_db:
        from .loadcheck import LoadClient, main as check_db

        client = LoadClient(list(QUESTIONS), warm_up)
        return check_db(args.url, origin, args.sessions, args.messages, args.timeout, args.drain, args.json, client)
    report = asyncio.run(run(args.url, origin, args.sessions, args.timeout, warm=not args.no_warm_up))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        summary = {k: v for k, v in report.items() if k != "results"}
        for key, value in summary.items():
            print(f"{key:28} {value}")
        for r in report["results"]:
            if not r["ok"]:
                print(f"session {r['session']}: {r['error']}")
    return 0 if report["succeeded"] == args.sessions else 1


if __name__ == "__main__":
    raise SystemExit(main())
