"""How late the console sees a token: N shoppers chat on one server while one console on (possibly) another
server watches all their conversations. For every token the console receives, the delay is its arrival time
minus ``t``, the time the token left the engine (stamped by the shopper's connection, see ``events``);
merged frames count once, with the time of their first token. Both servers must run on this machine (one clock).

    python -m tools.console_latency --shop http://127.0.0.1:8000 --staff http://127.0.0.1:8001 \\
        --cookie "sessionid=..." --shoppers 20

``--cookie`` is a logged-in staff session of the store (the test ``tests/tools/test_console_latency.py`` makes one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from contextlib import AsyncExitStack
from typing import Any

from .clients import ask, connect, receive, ws_url
from .stats import percentile

QUESTIONS = [
    "Do you have rain jackets?",
    "Which tents do you sell?",
    "I need hiking boots in size 42.",
    "What is your return policy?",
    "Do you have a warm sleeping bag?",
]


def summary(delays_ms: list[float]) -> dict[str, float | None]:
    if not delays_ms:
        return {"count": 0}
    return {
        "count": len(delays_ms),
        "median_ms": percentile(delays_ms, 50, 2),
        "p99_ms": percentile(delays_ms, 99, 2),
        "max_ms": round(max(delays_ms), 2),
    }


async def measure(shop: str, staff: str, cookie: str, shoppers: int = 20, store: str = "demo",
                  timeout: float = 600.0) -> dict[str, Any]:
    console_delays: list[float] = []
    console_tokens = 0
    ended: set[str] = set()
    async with AsyncExitStack() as stack:
        console, _hello = await stack.enter_async_context(
            connect(ws_url(staff, "/ws/console/"), staff, first="hello", cookie=cookie)
        )
        opened = [
            await stack.enter_async_context(connect(ws_url(shop, f"/ws/chat/?store={store}"), shop))
            for _ in range(shoppers)
        ]
        sockets = [sock for sock, _ready in opened]
        conversations = [ready["conversation"] for _sock, ready in opened]

        async def shopper(index: int, sock: Any) -> None:
            await ask(sock, QUESTIONS[index % len(QUESTIONS)])

        # A conversation has a row (and can be watched) from its first message: say hello first.
        await asyncio.wait_for(asyncio.gather(*(shopper(i, s) for i, s in enumerate(sockets))), timeout)
        pending = set(conversations)
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:  # the worker writes the first messages
            for conversation in pending:
                await console.send(json.dumps({"type": "watch", "conversation": conversation}))
            for _ in range(len(pending)):
                frame = await receive(console)
                if frame.get("type") == "watching":
                    pending.discard(frame["conversation"])
            if pending:
                await asyncio.sleep(0.5)
        if pending:
            raise RuntimeError(f"{len(pending)} conversations could not be watched")

        async def watch() -> None:
            nonlocal console_tokens
            while len(ended) < shoppers:
                event = await receive(console)
                now = time.time()
                if event["type"] != "frame":
                    continue
                frame = event["frame"]
                if frame["type"] == "token":
                    console_tokens += 1
                    console_delays.append((now - frame["t"]) * 1000)
                elif frame["type"] == "end":
                    ended.add(event["conversation"])

        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(watch(), *(shopper(i, s) for i, s in enumerate(sockets))), timeout)
        elapsed = time.monotonic() - started
    return {
        "shoppers": shoppers,
        "seconds": round(elapsed, 1),
        "console_frames_with_tokens": console_tokens,
        "console": summary(console_delays),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shop", required=True, help="http://host:port of the server the shoppers use")
    parser.add_argument("--staff", required=True, help="http://host:port of the server the console uses")
    parser.add_argument("--cookie", required=True, help='"sessionid=..." of a staff member of the store')
    parser.add_argument("--shoppers", type=int, default=20)
    parser.add_argument("--store", default="demo")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.shop, args.staff, args.cookie, args.shoppers, args.store)), indent=1))


if __name__ == "__main__":
    main()
