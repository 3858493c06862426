"""What happens in a conversation, published on the channel layer: the chat publishes, the console listens.

Every connection showing a conversation (the shopper's tabs and agents' consoles) is in the conversation's
channel-layer group (``group_name``); every console of a store is in the store's group (``store_group``). With
the Redis layer these groups span processes, so an agent on one daphne watches a shopper on another.

The chat calls in here with a few short lines (``consumers.py`` and ``session.py``); the console imports from
here, never the other way round.

Events sent to a conversation's group (the shopper's consumer ignores ``conversation.frame``):

- ``conversation.frame``: ``{"frame": {...}}``, a copy of a chat frame (``message`` from the shopper, ``start``,
  ``products``, ``sources``, ``token``, ``end``); token frames carry ``t``, the wall-clock time (epoch seconds) the first
  token of the batch left the engine, for latency measurements;
- ``chat.agent_joined`` / ``chat.agent_left`` / ``chat.agent_typing`` (``agent``: a display name), from the
  console to the shopper's widget;
- ``chat.answer_probe`` (``message_id``, ``reply_to``): a node resuming the conversation asks whether the answer
  its database shows in progress is still being written; the connection writing it (on any node) replies to
  ``reply_to`` with ``chat.answer_alive``. No reply in time: its node died (``answer_alive``).
- ``chat.presence_probe`` (``reply_to``): is the shopper still here? Each of the shopper's open connections (on
  any node) replies ``chat.present``; no reply in time: the shopper left (``shopper_connected``).

Events sent to a store's group: ``console.inbox`` with ``kind`` (started, message, handoff, assigned, handed_back,
closed, with ``by``: agent or shopper; order_request, with ``request``, ``request_kind`` and ``text``) and
``conversation``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from shop_assistant.runtime import metrics
from ..models import Conversation

logger = logging.getLogger(__name__)

Frame = dict[str, Any]

# The answer frames the console mirrors (errors and `ready` are the shopper's own business).
MIRRORED = frozenset({"start", "products", "sources", "token", "end"})


def group_name(conversation_id: uuid.UUID | str) -> str:
    """The channel-layer group of a conversation: every connection showing it, the console's included."""
    return f"chat.conversation.{uuid.UUID(str(conversation_id)).hex}"


def store_group(store_id: int) -> str:
    return f"console.store.{store_id}"


async def send_to_group(group: str, event: Frame) -> None:
    """Send ``event`` to a channel-layer group; a failure is logged, never raised."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group, event)
    except Exception:  # a full channel or a Redis hiccup must never break the shopper's chat
        logger.warning("console event to %s dropped", group, exc_info=True)


async def inbox_event(store_id: int, kind: str, conversation_id: uuid.UUID | str, **extra: Any) -> None:
    await send_to_group(
        store_group(store_id),
        {"type": "console.inbox", "kind": kind, "conversation": str(conversation_id), **extra},
    )


ORDER_REQUEST_TEXT = {"return": "asked to return order #{number}", "exchange": "asked to exchange items of order #{number}",
                      "cancel": "asked to cancel order #{number}"}


async def order_request_created(request: Any) -> None:
    """A shopper's return, exchange or cancellation request, for the agents: the inbox, the requests page and
    the conversation's activity hear of it now (the queue reads the database, so a missed event only delays it)."""
    text = ORDER_REQUEST_TEXT.get(request.kind, "made an order request").format(number=request.order.number)
    await inbox_event(request.store_id, "order_request", request.conversation_id, request=request.pk,
                      request_kind=request.kind, text=text)


class ConversationFeed:
    """Copies one connection's answer frames to the conversation's group, off the shopper's path.

    ``push`` never waits: frames go on a queue that one task drains, so a slow channel layer delays only the
    console. Tokens waiting together in the queue go out as one frame (the batch keeps the first one's time),
    which bounds the number of Redis round trips per answer when the machine is busy.
    """

    def __init__(self, conversation_id: uuid.UUID | str) -> None:
        self.conversation = str(conversation_id)
        self.group = group_name(conversation_id)
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def push(self, frame: Frame) -> None:
        if frame.get("type") not in MIRRORED:
            return
        if frame["type"] == "token":
            frame = {**frame, "t": time.time()}
        self._queue.put_nowait(frame)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._pump(), name=f"console-feed-{self.group}")

    async def _pump(self) -> None:
        while True:
            frames = [await self._queue.get()]
            while not self._queue.empty():
                frames.append(self._queue.get_nowait())
            stop = None in frames
            for frame in _merge_tokens([f for f in frames if f is not None]):
                await send_to_group(
                    self.group, {"type": "conversation.frame", "conversation": self.conversation, "frame": frame}
                )
            if stop:
                return

    async def aclose(self, timeout: float = 5.0) -> None:
        """Send what is queued, then stop."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _merge_tokens(frames: list[Frame]) -> list[Frame]:
    merged: list[Frame] = []
    for frame in frames:
        last = merged[-1] if merged else None
        if (
            last is not None
            and frame["type"] == "token"
            and last["type"] == "token"
            and last["message_id"] == frame["message_id"]
        ):
            merged[-1] = {**last, "text": last["text"] + frame["text"]}
        else:
            merged.append(frame)
    return merged


# How long a resuming connection waits for the node writing an answer to say so: a Redis round trip takes
# milliseconds; a dead node never answers, so this is what a resume after a failure costs at most.
PROBE_TIMEOUT = 0.5


async def answer_alive(conversation_id: uuid.UUID | str, message_id: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether a live connection (on any node, through the channel layer) is still writing ``message_id``.

    False also when the channel layer cannot be reached: the answer is then ended as interrupted, and should its
    node be alive after all, the answer's own write, coming later, replaces that ending.
    """
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        reply_to = await layer.new_channel()
        await layer.group_send(
            group_name(conversation_id), {"type": "chat.answer_probe", "message_id": message_id, "reply_to": reply_to}
        )
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            reply = await asyncio.wait_for(layer.receive(reply_to), left)
            if reply.get("message_id") == message_id:
                return True
    except asyncio.TimeoutError:
        return False
    except Exception:  # noqa: BLE001 - Redis down: nobody can be asked
        logger.warning("channel layer: answer probe failed", exc_info=True)
    return False


async def shopper_connected(conversation_id: uuid.UUID | str, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether the shopper has a connection open on the conversation now (any node, through the channel layer).

    Nothing records connections: the open ones answer. False when the channel layer cannot be reached either
    (the caller then uses the other way to reach the shopper: told twice rather than not at all)."""
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        reply_to = await layer.new_channel()
        await layer.group_send(group_name(conversation_id), {"type": "chat.presence_probe", "reply_to": reply_to})
        reply = await asyncio.wait_for(layer.receive(reply_to), timeout)
        return reply.get("type") == "chat.present"
    except asyncio.TimeoutError:
        return False
    except Exception:  # noqa: BLE001 - Redis down: nobody can be asked
        logger.warning("channel layer: presence probe failed", exc_info=True)
    return False


# --- hooks the chat calls ---------------------------------------------------------------------------------


def _status(conversation_id: uuid.UUID) -> tuple[str, str]:
    row = (
        Conversation.objects.filter(pk=conversation_id)
        .select_related("assigned_to")
        .only("status", "assigned_to")
        .first()
    )
    if row is None:
        return Conversation.Status.BOT, ""
    return row.status, (agent_display_name(row.assigned_to) if row.assigned_to else "")


def agent_display_name(user: Any) -> str:
    """What the shopper sees: the first name, else the user name (the part before @ of an e-mail)."""
    return (getattr(user, "first_name", "") or user.get_username().split("@")[0]).strip()


async def connection_opened(session: Any, send: Any, new: bool) -> None:
    """A shopper's connection is ready: tell the inbox about a new conversation, and the widget who is there."""
    conversation = session.conversation
    if new:
        await inbox_event(session.store.pk, "started", conversation.id)
    status, agent = await database_sync_to_async(_status)(conversation.id)
    if status == Conversation.Status.AGENT:
        await send({"type": "agent_joined", "agent": agent})


def is_held(conversation_id: uuid.UUID) -> bool:
    """A person has the conversation (blocking: the database)."""
    return _status(conversation_id)[0] == Conversation.Status.AGENT


async def shopper_message(conversation: Conversation, text: str, held: bool) -> None:
    """A shopper's (valid) message, for the console: shown in the conversation and counted in the store's inbox.

    ``held``: a person has the conversation, so the bot stays silent (the session keeps and logs the message).
    """
    await send_to_group(
        group_name(conversation.id),
        {
            "type": "conversation.frame",
            "conversation": str(conversation.id),
            "frame": {"type": "message", "role": "user", "text": text, "held": held},
        },
    )
    await inbox_event(conversation.store_id, "message", conversation.id)


async def conversation_closed(conversation_id: uuid.UUID | str, by: str = "agent") -> None:
    """The conversation was resolved (``closing.close``; ``by``: "agent" or "shopper"): every connection of the
    shopper's shows that it ended and asks for a rating (`conversation_ended`)."""
    await send_to_group(group_name(conversation_id), {"type": "chat.conversation_closed", "by": by})


async def announce_handoff(conversation: Conversation) -> None:
    """Call after recording a handoff request (status "handoff"): every console of the store hears it now.
    The inbox reads handoffs from the database as well, so a missed event only delays the alert."""
    metrics.HANDOFFS.inc()
    await inbox_event(
        conversation.store_id,
        "handoff",
        conversation.id,
        requested_at=conversation.handoff_requested_at.isoformat() if conversation.handoff_requested_at else None,
    )
