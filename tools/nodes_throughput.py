"""Throughput of one node on one core against two nodes on one core each, behind nginx, same workload, same run.

    python -m tools.nodes_throughput --database-url postgresql://postgres@127.0.0.1:5432/shop_nodes

Each node is the app as production runs it (``python -m shop_assistant.serve``), pinned with ``taskset`` to its
own core and one thread; nginx (deploy/nginx.conf) routes each store's shoppers to one node, so the stores spread
over the nodes. The workload: ``--stores`` stores with the demo catalog, ``--sessions`` shoppers per store at once,
each asking ``--questions`` questions one after the other. With a handful of stores the hash alone can put 7 of 8
on one node (the ring is fair over many stores, not over eight), and the ratio would then measure that luck: the
two-node phase runs first, asks nginx where each of three times as many stores goes, and keeps the same number on
each node; the one-node phase then serves those same stores. Every store is asked once before the clock starts in
each phase, so both phases start with every store's prompt in its node's cache. Run it alone on the machine: the
figures are only comparable with nothing else running. Only for this machine's loopback servers; the database
named is created when missing and filled with ``nodes-*`` stores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clients import Answer, ask, connect
from .loadtest import QUESTIONS
from .nginx import REPO_ROOT, free_port, run_nginx
from .stats import percentile


def prepare_database(database_url: str, stores: int) -> list[str]:
    """Migrate the database and give it ``stores`` stores with the demo catalog (idempotent); returns their slugs."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["ENGINE_AUTOSTART"] = "0"
    _create_database(database_url)
    import django

    django.setup()
    from django.core.management import call_command

    from catalog.embeddings import embed_products
    from catalog.ingest import read_source
    from catalog.ingest.upsert import apply_catalog
    from catalog.models import Store
    from shop_assistant.demo.store import CATALOG_PATH

    call_command("migrate", verbosity=0)
    slugs = []
    for index in range(1, stores + 1):
        store, _ = Store.objects.get_or_create(slug=f"nodes-{index}", defaults={"name": f"Outfitters {index}"})
        apply_catalog(store, read_source("json", str(CATALOG_PATH)))
        embed_products(store)
        slugs.append(store.slug)
    return slugs


def _create_database(database_url: str) -> None:
    if not database_url.startswith("postgres"):
        return  # SQLite: created by migrate
    import psycopg
    from psycopg import sql

    base, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


@dataclass
class Node:
    name: str
    port: int
    process: subprocess.Popen


def _node_env(database_url: str, name: str, max_tokens: int) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "shop_assistant.settings",
        "DEBUG": "1",
        "HF_HUB_OFFLINE": "1",
        "DATABASE_URL": database_url,
        "ENGINE_AUTOSTART": "1",
        "NODE_NAME": name,
        "CHAT_MAX_TOKENS": str(max_tokens),
        "CHAT_TEMPERATURE": "0",
        # One core each: one thread, so the engine does not fight itself for the core it is pinned to.
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        # Every shopper here comes from one address (this machine): the per-address abuse limits would refuse
        # the 21st connection, and on one node sooner than on two, since each node counts on its own.
        "CHAT_CONNECTIONS_PER_IP": "100000",
        "CHAT_MESSAGES_PER_MINUTE_PER_IP": "100000",
    }
    env.pop("REDIS_URL", None)  # each node on its own: in-process channel layer, messages written in-process
    return env


@contextlib.contextmanager
def run_nodes(cores: list[int], database_url: str, max_tokens: int, log_dir: Path) -> Iterator[list[Node]]:
    nodes = []
    try:
        for core in cores:
            name, port = f"node-{core}", free_port()
            log = (log_dir / f"{name}-{port}.log").open("w")
            process = subprocess.Popen(
                ["taskset", "-c", str(core), sys.executable, "-m", "shop_assistant.serve", "-b", "127.0.0.1",
                 "-p", str(port)],
                cwd=REPO_ROOT, env=_node_env(database_url, name, max_tokens), stdout=log, stderr=subprocess.STDOUT,
            )
            nodes.append(Node(name, port, process))
        for node in nodes:
            _wait_ready(node, log_dir)
        yield nodes
    finally:
        for node in nodes:
            node.process.terminate()
        for node in nodes:
            try:
                node.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.process.kill()


def _wait_ready(node: Node, log_dir: Path, timeout: float = 300.0) -> None:
    """Until its engine is loaded and answers (/readyz)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.process.poll() is not None:
            raise RuntimeError(f"{node.name} exited; see {log_dir}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        time.sleep(0.5)
    raise RuntimeError(f"{node.name} not ready in {timeout} s; see {log_dir}")


def placement(front: int, slugs: list[str], nodes: list[Node]) -> dict[str, list[str]]:
    """Which node nginx sends each store to (the X-Upstream header of a page asked with ?store=)."""
    by_port = {node.port: node.name for node in nodes}
    placed: dict[str, list[str]] = {node.name: [] for node in nodes}
    for slug in slugs:
        with urllib.request.urlopen(f"http://127.0.0.1:{front}/healthz?store={slug}", timeout=10) as response:
            upstream = response.headers["X-Upstream"]
        placed[by_port[int(upstream.rpartition(":")[2])]].append(slug)
    return placed


def balanced(placed: dict[str, list[str]], stores: int) -> list[str]:
    """``stores`` stores, as many on each node (in the order they were made)."""
    share = stores // len(placed)
    if any(len(slugs) < share for slugs in placed.values()):
        counts = {name: len(slugs) for name, slugs in placed.items()}
        raise SystemExit(f"nginx put too few of the candidate stores on a node: {counts}")
    return [slug for slugs in placed.values() for slug in slugs[:share]]


async def _shopper(url: str, origin: str, questions: list[str], timeout: float) -> tuple[str, list[Answer]]:
    answers: list[Answer] = []
    async with asyncio.timeout(timeout), connect(url, origin, timeout=timeout) as (connection, ready):
        for question in questions:
            answers.append(await ask(connection, question))
    return ready.get("node", "?"), answers


def busy_core_seconds() -> float:
    """CPU time this machine spent on anything but idling and waiting, all cores together (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """A process's CPU time, all its threads (utime + stime of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_workload(
    front: int, slugs: list[str], sessions: int, questions: int, timeout: float, node_pids: list[int]
) -> dict[str, Any]:
    origin = f"http://127.0.0.1:{front}"

    def url(slug: str) -> str:
        return f"ws://127.0.0.1:{front}/ws/chat/?store={slug}"

    # Every store once, untimed: its prompt in its node's cache, as in a server that has been up a while.
    await asyncio.gather(*(_shopper(url(slug), origin, QUESTIONS[:1], timeout) for slug in slugs))
    jobs = [
        _shopper(url(slug), origin, [QUESTIONS[(s + q) % len(QUESTIONS)] for q in range(questions)], timeout)
        for slug in slugs for s in range(sessions)
    ]
    started, machine, nodes_cpu = time.perf_counter(), busy_core_seconds(), sum(map(process_cpu_seconds, node_pids))
    results = await asyncio.gather(*jobs, return_exceptions=True)
    wall = time.perf_counter() - started
    machine = busy_core_seconds() - machine
    nodes_cpu = sum(map(process_cpu_seconds, node_pids)) - nodes_cpu
    answers = [a for r in results if not isinstance(r, BaseException) for a in r[1]]
    ok = [a for a in answers if a.end is not None]
    usage = [(a.end or {}).get("usage", {}) for a in ok]
    tokens = sum(u.get("completion_tokens", 0) for u in usage)
    computed = sum(u.get("prompt_tokens", 0) - u.get("cached_tokens", 0) for u in usage)
    placement = Counter(r[0] for r in results if not isinstance(r, BaseException))
    errors = Counter(f"{type(r).__name__}: {r}"[:120] for r in results if isinstance(r, BaseException))
    errors.update(f"{a.error.get('code')}" for a in answers if a.error is not None)
    return {
        "answers": len(ok),
        "failed": len(jobs) * questions - len(ok),
        "completion_tokens": tokens,
        "prompt_tokens_computed": computed,  # the prefill work beyond the cache (catalog results, the question)
        "wall_s": round(wall, 2),
        # With two nodes on a two-core machine, whatever else runs (nginx, the database, these shoppers) takes its
        # CPU from the nodes' cores; with one node it has the other core.
        "nodes_cpu_s": round(nodes_cpu, 2),
        "other_cpu_s": round(machine - nodes_cpu, 2),
        "tokens_per_s": round(tokens / wall, 1),
        "answers_per_s": round(len(ok) / wall, 2),
        "median_first_token_ms": percentile([a.first_token_ms for a in ok if a.first_token_ms], 50, 1),
        "median_answer_ms": percentile([a.total_ms for a in ok if a.total_ms], 50, 1),
        "sessions_per_node": dict(placement),
        "errors": dict(errors),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    if args.stores % 2:
        raise SystemExit("--stores must be even (as many stores on each of the two nodes)")
    candidates = prepare_database(args.database_url, 3 * args.stores)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("two cores are needed (one per node)")
    phases, slugs = {}, []
    with tempfile.TemporaryDirectory(prefix="nodes-throughput-") as folder:
        for label, pinned in (("2 nodes", cores[:2]), ("1 node", cores[:1])):
            with run_nodes(pinned, args.database_url, args.max_tokens, Path(folder)) as nodes:
                with run_nginx(Path(folder), [node.port for node in nodes]) as front:
                    slugs = slugs or balanced(placement(front, candidates, nodes), args.stores)
                    phases[label] = asyncio.run(
                        run_workload(front, slugs, args.sessions, args.questions, args.timeout,
                                     [node.process.pid for node in nodes])
                    )
            print(f"{label}: {json.dumps(phases[label])}", file=sys.stderr)
    one, two = phases["1 node"], phases["2 nodes"]
    return {
        "workload": {"stores": args.stores, "sessions_per_store": args.sessions, "questions": args.questions,
                     "max_tokens": args.max_tokens, "slugs": slugs},
        "phases": phases,
        # Answers are mostly prefill (the catalog results) and a few model sentences: compare answers a second.
        "throughput_ratio": round(two["answers_per_s"] / one["answers_per_s"], 2) if one["answers_per_s"] else None,
        "load_average": " ".join(f"{v:.2f}" for v in os.getloadavg()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="PostgreSQL (or sqlite:///...) for the nodes")
    parser.add_argument("--stores", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=3, help="shoppers per store at once")
    parser.add_argument("--questions", type=int, default=2, help="questions each shopper asks in turn")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for each shopper, all included")
    args = parser.parse_args(argv)
    result = measure(args)
    print(json.dumps(result, indent=2))
    failed = sum(phase["failed"] for phase in result["phases"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
