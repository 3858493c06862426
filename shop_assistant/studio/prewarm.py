"""Pre-warm: compute a newly published system prompt's KV blocks before the first shopper needs them.

The prefix is rendered exactly as the chat renders the start of every conversation (the system message through
the model's chat template, under the store's cache salt), so the blocks it leaves in the engine's prefix cache
are the ones a shopper's first turn looks up. The engine prefills it without sampling (``AsyncLLM.prefill``);
only full blocks are cached, so a prompt of ``n`` tokens warms ``n // block_size * block_size`` of them.

Every node warms its own engine: a publish or a rollback is announced to all of them (``announce``, through the
channel layer's ``engine-nodes`` group, see ``runtime.nodes``); each node's listener pre-warms the version and
reports what it holds on the node board, which the studio reads ("pre-warmed on 2 of 2 nodes"). A node that
starts pre-warms the published prompts before it hears anything (``prewarm_published``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from catalog.models import Store
from shop_assistant.chat.answers.planning import model as planner
from shop_assistant.prompts.models import PromptVersion
from shop_assistant.runtime import engine_service, nodes

if TYPE_CHECKING:
    from inference import AsyncLLM

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrewarmResult:
    prompt_tokens: int  # the system prefix, as every conversation of the store starts
    cached_tokens: int  # what the engine reported already cached for it (0 on a cold prefix)
    warm_tokens: int  # full blocks of the prefix that are now in the prefix cache


def system_prefix_ids(engine: AsyncLLM, system_text: str) -> list[int]:
    """The tokens every conversation of the store starts with: the system message alone, as the chat renders it."""
    return engine.encode_chat([{"role": "system", "content": system_text}], add_generation_prompt=False)


def published_prompt_session(store: Store) -> str:
    """The engine session that keeps a store's published system prompt ahead of one-off traffic (previews)."""
    return f"published-prompt:{store.pk}"


async def aprewarm(store: Store, prompt_version: PromptVersion, engine: AsyncLLM | None = None) -> PrewarmResult:
    """``prewarm`` from async code."""
    engine = engine or await engine_service.aget_engine()
    ids = await asyncio.to_thread(system_prefix_ids, engine, prompt_version.full_text())
    session = published_prompt_session(store)
    # The previous version's blocks become ordinary evictable ones; blocks the two versions share are taken
    # back by the prefill below, which keeps the new prefix as a live session's.
    engine.end_session(session)
    usage = await engine.prefill(ids, cache_salt=store.cache_salt, session_id=session)
    # The planner's prefix too (its instructions, the tools, the products' names), when the served model plans.
    await planner.aprewarm(engine, store)
    block = engine.block_size
    return PrewarmResult(prompt_tokens=len(ids), cached_tokens=usage.cached_tokens, warm_tokens=len(ids) // block * block)


def prewarm(store: Store, prompt_version: PromptVersion) -> PrewarmResult:
    """Run the store's system prefix through the engine so its full KV blocks are cached. Blocking: call it
    from a worker thread, never from an event loop."""
    return asyncio.run(aprewarm(store, prompt_version))


# --- every node: a publish or rollback is announced, each node's listener pre-warms and reports --------------

PREWARM_MESSAGE = "prewarm.version"


def report_topic(version_id: int) -> str:
    return f"prewarm:{version_id}"


def announce(version: PromptVersion) -> None:
    """Tell every node to pre-warm ``version`` once the surrounding transaction commits; returns at once.

    Called by ``services.publish`` and ``services.rollback``: whatever process publishes (a web node, the admin,
    a management command), every node that serves chats hears it (``runtime.nodes``)."""
    version_id = version.pk
    transaction.on_commit(lambda: nodes.broadcast({"type": PREWARM_MESSAGE, "version": version_id}))


def _published_version(version_id: int) -> PromptVersion | None:
    try:
        version = PromptVersion.objects.select_related("store").get(pk=version_id)
        # Replaced again before we got to it: warming it would only evict useful blocks.
        return version if version.status == PromptVersion.Status.PUBLISHED else None
    finally:
        close_old_connections()


def _record(version: PromptVersion, result: PrewarmResult) -> None:
    """What this node now holds: on the board for the studio's "pre-warmed on n of m nodes", and on the version."""
    nodes.board().report(
        report_topic(version.pk),
        nodes.node_name(),
        {"version": version.version, "prompt_tokens": result.prompt_tokens, "cached_tokens": result.warm_tokens},
    )
    try:
        PromptVersion.objects.filter(pk=version.pk).update(
            prewarmed_tokens=result.warm_tokens, prewarmed_at=timezone.now()
        )
    finally:
        close_old_connections()


_lock: asyncio.Lock | None = None


async def prewarm_version(version_id: int) -> PrewarmResult | None:
    """Pre-warm a published version on this node's running engine and report it; None when there is nothing to
    do (no engine in this process, the version no longer published)."""
    global _lock
    if engine_service.running_engine() is None:
        return None  # never load the model from here: only warm an engine that serves chats
    _lock = _lock or asyncio.Lock()
    async with _lock:  # one at a time: a publish and a quick rollback must end with the last one pinned
        version = await asyncio.to_thread(_published_version, version_id)
        if version is None:
            return None
        result = await aprewarm(version.store, version)
        await asyncio.to_thread(_record, version, result)
    logger.info(
        "node %s pre-warmed %s: %d of %d prompt tokens cached",
        nodes.node_name(), version, result.warm_tokens, result.prompt_tokens,
    )
    return result


async def on_prewarm_message(message: dict[str, Any]) -> None:
    await prewarm_version(int(message["version"]))


def _published_ids(limit: int) -> list[int]:
    try:
        published = PromptVersion.objects.filter(status=PromptVersion.Status.PUBLISHED).order_by("-published_at")
        return list(published.values_list("pk", flat=True)[:limit])
    finally:
        close_old_connections()


async def prewarm_published() -> int:
    """A node that starts: pre-warm the published prompts of the stores (the most recently published first, at
    most ``PREWARM_ON_START_MAX_STORES``), so the first shopper after a restart finds them cached. Returns how
    many were warmed."""
    limit = settings.PREWARM_ON_START_MAX_STORES
    warmed = 0
    for version_id in await asyncio.to_thread(_published_ids, limit):
        if await prewarm_version(version_id) is not None:
            warmed += 1
    return warmed


def start_node() -> nodes.Listener:
    """This process as a node (with the engine, by the ASGI routing): once the engine is loaded, pre-warm the
    published prompts, then pre-warm whatever a publish or rollback announces."""
    return nodes.start_listener(
        {PREWARM_MESSAGE: on_prewarm_message}, [prewarm_published], wait_for=engine_service.get_engine
    )


@dataclass(frozen=True)
class NodeStatus:
    nodes: list[str]  # nodes alive now (heartbeat)
    reports: list[dict[str, Any]]  # the live nodes' reports on the version, by node name

    @property
    def warm(self) -> int:
        return sum(1 for report in self.reports if report.get("cached_tokens", 0) > 0)

    def summary(self) -> str:
        return f"pre-warmed on {self.warm} of {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}"

    def text(self) -> str:
        """The prompt page's line: "Pre-warmed on 2 of 2 nodes: web1 (208 tokens), web2 (208 tokens)."."""
        detail = ", ".join(f"{report['node']} ({report['cached_tokens']} tokens)" for report in self.reports)
        summary = self.summary()
        return f"{summary[0].upper()}{summary[1:]}" + (f": {detail}" if detail else "") + "."

    def as_json(self) -> dict[str, Any]:
        return {"warm": self.warm, "nodes": len(self.nodes), "text": self.text()}


def node_status(version: PromptVersion) -> NodeStatus | None:
    """Which live nodes report ``version`` pre-warmed; None when the board cannot be read (Redis down)."""
    try:
        board = nodes.board()
        live = board.live_nodes()
        reports = board.reports(report_topic(version.pk))
    except Exception as error:
        logger.warning("node status unavailable: %s", error)
        return None
    return NodeStatus(nodes=live, reports=[reports[node] for node in live if node in reports])
