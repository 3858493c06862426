"""The shopper's websocket (``/ws/chat/``). Thin: the protocol lives in ``session.ChatSession``."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer

from shop_assistant.runtime import metrics

from . import events, identity
from ..log import keeping
from .events import group_name
from .admission import CLOSE_TOO_MANY, ConnectionGuard
from .session import ChatSession, Frame

logger = logging.getLogger(__name__)

# Application close code (4000-4999) for "no such store": the widget shows it instead of reconnecting forever.
CLOSE_NO_STORE = 4404


def _query(scope: dict[str, Any]) -> dict[str, str]:
    params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return {key: values[-1] for key, values in params.items() if values}


class ChatConsumer(AsyncWebsocketConsumer):
    session: ChatSession | None = None
    group: str | None = None
    guard: ConnectionGuard | None = None
    feed: events.ConversationFeed | None = None  # copies this socket's answer frames to the console

    async def connect(self) -> None:
        query = _query(self.scope)
        self.guard = ConnectionGuard(self.scope, query.get("store"))
        refused = await self.guard.admit()
        if refused is not None:
            await self.accept()
            await self.send_frame(refused)
            await self.close(code=CLOSE_TOO_MANY)
            return
        metrics.OPEN_SESSIONS.inc()
        self.counted = True
        self.session = await ChatSession.open(
            store_slug=query.get("store") or None,
            resume_token=query.get("resume") or None,
            send=self.send_frame,
            group_send=self.send_to_group,
        )
        await self.accept()
        if self.session is None:
            await self.send_frame({"type": "error", "code": "no_store", "message": "this store does not exist"})
            await self.close(code=CLOSE_NO_STORE)
            return
        self.session.guard = self.guard
        await self._remember_page(query)
        try:
            await self.channel_layer.group_add(group_name(self.session.conversation.id), self.channel_name)
            self.group = group_name(self.session.conversation.id)
        except Exception as exc:  # noqa: BLE001 - Redis down: the shopper still chats, agents cannot join
            logger.warning("channel layer unavailable (%s: %s); agent features off for this chat", type(exc).__name__, exc)
        await self.session.settle_answers()  # an answer cut by a node's death is ended before the history goes out
        await self.send_frame(self.session.ready_frame())
        if self.group is None:
            await self.send_frame(
                {
                    "type": "notice",
                    "code": "agents_unavailable",
                    "message": "the assistant answers as usual, but a person cannot join this chat right now",
                }
            )
            return
        self.feed = events.ConversationFeed(self.session.conversation.id)
        await events.connection_opened(self.session, self.send_frame, new=not self.session.history)

    async def _remember_page(self, query: dict[str, str]) -> None:
        """The store page's signed customer, page URL and cart (identity.py); a forged identity is dropped."""
        context = identity.PageContext.from_query(self.session.store, query)
        if context.refused:
            logger.warning("conversation %s: customer identity with a bad signature refused",
                           self.session.conversation.id)
        try:
            # Within the writes' deadline, off the shared sync thread: a hung database holds up no connection.
            await keeping.within_deadline(functools.partial(identity.remember, self.session.conversation, context))
        except Exception as exc:  # noqa: BLE001 - the database is down or hung: the shopper still chats
            logger.warning("conversation %s: page context not saved (%s: %s)", self.session.conversation.id,
                           type(exc).__name__, exc)

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception as exc:  # noqa: BLE001 - the group key expires by itself
                logger.warning("channel layer: group_discard failed (%s)", exc)
        if self.session is not None:
            await self.session.close()
        if self.feed is not None:
            await self.feed.aclose()
        if self.guard is not None:
            if getattr(self, "counted", False):
                metrics.OPEN_SESSIONS.dec()
            await self.guard.release()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.session is not None:
            await self.session.receive(text_data, bytes_data)

    async def send_frame(self, frame: Frame) -> None:
        if frame.get("type") == "error":
            metrics.ERRORS.labels(code=str(frame.get("code"))).inc()
        await self.send(text_data=json.dumps(frame, ensure_ascii=False))
        if self.feed is not None:
            self.feed.push(frame)

    async def send_to_group(self, event: Frame) -> None:
        if self.group is not None:
            try:
                await self.channel_layer.group_send(self.group, event)
            except Exception as exc:  # noqa: BLE001 - typing notices are best effort
                logger.warning("channel layer: group_send failed (%s)", exc)

    # --- channel-layer events for this conversation's group ---------------------------------------------

    async def chat_agent_message(self, event: Frame) -> None:
        if self.session is not None:
            await self.session.on_agent_message(event)

    async def chat_shopper_typing(self, event: Frame) -> None:
        """For the agent console; the shopper's own connections have nothing to show."""

    async def chat_agent_typing(self, event: Frame) -> None:
        await self.send_frame({"type": "agent_typing", "agent": str(event.get("agent", ""))})

    async def chat_agent_joined(self, event: Frame) -> None:
        await self.send_frame({"type": "agent_joined", "agent": str(event.get("agent", ""))})
        if self.session is not None and self.session.generating:  # the person answers now, not the bot
            await self.session.receive(text_data='{"type": "stop"}')

    async def chat_agent_left(self, event: Frame) -> None:
        await self.send_frame({"type": "agent_left", "agent": str(event.get("agent", ""))})

    async def chat_conversation_closed(self, event: Frame) -> None:
        """The conversation was resolved (``closing.close``: an agent, or the shopper's End chat)."""
        if self.session is not None and (frame := self.session.on_conversation_closed(str(event.get("by", "agent")))):
            await self.send_frame(frame)

    async def chat_answer_probe(self, event: Frame) -> None:
        """Another connection resuming this conversation asks whether this one still writes the answer."""
        if self.session is not None and self.session.writing(str(event.get("message_id", ""))):
            try:
                await self.channel_layer.send(
                    str(event["reply_to"]), {"type": "chat.answer_alive", "message_id": event["message_id"]}
                )
            except Exception as exc:  # noqa: BLE001 - the other side then ends the answer; ours overwrites that
                logger.warning("channel layer: answer probe reply failed (%s)", exc)

    async def chat_presence_probe(self, event: Frame) -> None:
        """Someone (an agent's decision, events.shopper_connected) asks whether the shopper is still here."""
        if self.session is not None:
            try:
                await self.channel_layer.send(str(event["reply_to"]), {"type": "chat.present"})
            except Exception as exc:  # noqa: BLE001 - the asker then takes the shopper for gone: emailed too
                logger.warning("channel layer: presence reply failed (%s)", exc)

    async def conversation_frame(self, event: Frame) -> None:
        """A copy of a chat frame for the console (see console.events); the shopper already has it."""
