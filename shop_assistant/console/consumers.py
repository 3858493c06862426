"""The console's websocket (``/ws/console/``), session-authenticated.

Refused (accepted, then closed with 4403) for anonymous users and users without a store membership. A connection
joins the inbox groups of the user's stores at once, and a conversation's group when the page asks to ``watch``
it (checked against the user's stores).

Client -> server: ``{"type": "watch", "conversation": id}``, ``{"type": "unwatch", "conversation": id}``,
``{"type": "typing", "conversation": id}`` (the shopper's widget shows the agent typing).
Server -> client: ``watching``, ``frame`` (a chat frame: the shopper's ``message``, ``start``, ``products``,
``sources``, ``token``, ``end``), ``agent_message``, ``shopper_typing``, ``agent_typing``, ``agent_joined``, ``agent_left``,
``inbox`` (kind, conversation), ``activity`` (a note, label, assignment or canned reply on a watched
conversation, by any agent: ``kind``, ``by``, ``text``, and ``note`` / ``label`` / ``assigned_to``),
``notification`` (to this user only: a conversation was assigned to them; ``text``, ``url``, ``unread``),
``error``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from shop_assistant.chat.models import Conversation
from shop_assistant.runtime.limits import Throttle
from shop_assistant.chat.protocol.events import group_name

from shop_assistant.chat.protocol.events import agent_display_name, store_group
from .roles import can_work_on, stores_for
from .services import console_group, user_group

CLOSE_FORBIDDEN = 4403
MAX_WATCHED = 200  # a console page watches one conversation; a latency probe or a wallboard a few more


def _store_ids(user: Any) -> list[int]:
    return list(stores_for(user).values_list("pk", flat=True))


def _may_watch(user: Any, conversation_id: uuid.UUID) -> bool:
    store_id = Conversation.objects.filter(pk=conversation_id).values_list("store_id", flat=True).first()
    return store_id is not None and can_work_on(user, store_id)


class ConsoleConsumer(AsyncWebsocketConsumer):
    user: Any = None
    store_groups: list[str]
    watched: set[str]
    # Conversations announced in this console's own store groups. A new conversation has no row until its
    # first message, but its store's consoles heard of it and may watch it from the start.
    announced: set[str]

    async def connect(self) -> None:
        self.store_groups, self.watched, self.announced = [], set(), set()
        self.user = self.scope.get("user")
        store_ids = await database_sync_to_async(_store_ids)(self.user) if self.user is not None else []
        await self.accept()
        if not store_ids:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.name = agent_display_name(self.user)
        self._typing = Throttle(1.0)
        # The user's own group: notifications follow them to every tab.
        self.store_groups = [store_group(pk) for pk in store_ids] + [user_group(self.user.pk)]
        for group in self.store_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.send_json({"type": "hello", "agent": self.name, "stores": store_ids})

    async def disconnect(self, code: int) -> None:
        for group in self.store_groups + [g for c in self.watched for g in (group_name(c), console_group(c))]:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def send_json(self, frame: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(frame, ensure_ascii=False))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = json.loads(text_data or "")
            kind = frame["type"]
            conversation = str(uuid.UUID(str(frame["conversation"])))
        except (ValueError, KeyError, TypeError):
            await self.send_json({"type": "error", "code": "bad_frame", "message": "expected type and conversation"})
            return
        if kind == "watch":
            allowed = conversation in self.announced or await database_sync_to_async(_may_watch)(
                self.user, uuid.UUID(conversation)
            )
            if len(self.watched) >= MAX_WATCHED or not allowed:
                await self.send_json({"type": "error", "code": "forbidden", "conversation": conversation})
                return
            self.watched.add(conversation)
            await self.channel_layer.group_add(group_name(conversation), self.channel_name)
            await self.channel_layer.group_add(console_group(conversation), self.channel_name)
            await self.send_json({"type": "watching", "conversation": conversation})
        elif kind == "unwatch" and conversation in self.watched:
            self.watched.discard(conversation)
            await self.channel_layer.group_discard(group_name(conversation), self.channel_name)
            await self.channel_layer.group_discard(console_group(conversation), self.channel_name)
        elif kind == "typing" and conversation in self.watched:
            if self._typing.allow():
                await self.channel_layer.group_send(
                    group_name(conversation),
                    {"type": "chat.agent_typing", "agent": self.name, "conversation": conversation},
                )
        else:
            await self.send_json({"type": "error", "code": "unknown_type", "conversation": conversation})

    # --- channel-layer events ----------------------------------------------------------------------------------

    async def conversation_frame(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "frame", "conversation": event.get("conversation"), "frame": event["frame"]})

    async def chat_agent_message(self, event: dict[str, Any]) -> None:
        await self.send_json(
            {"type": "agent_message", "text": event.get("text", ""), "agent": event.get("agent", ""),
             "message_id": event.get("message_id")}
        )

    async def chat_shopper_typing(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "shopper_typing", "conversation": event.get("conversation")})

    async def chat_agent_typing(self, event: dict[str, Any]) -> None:
        if event.get("agent") != self.name:
            await self.send_json({"type": "agent_typing", "agent": event.get("agent", "")})

    async def chat_agent_joined(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "agent_joined", "agent": event.get("agent", "")})

    async def chat_agent_left(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "agent_left", "agent": event.get("agent", "")})

    async def chat_answer_probe(self, event: dict[str, Any]) -> None:
        """For the shopper's connections (chat.events.answer_alive): a console writes no answer."""

    async def chat_presence_probe(self, event: dict[str, Any]) -> None:
        """For the shopper's connections (chat.events.shopper_connected): an agent is not the shopper."""

    async def console_inbox(self, event: dict[str, Any]) -> None:
        if event.get("conversation"):
            self.announced.add(str(event["conversation"]))
        await self.send_json({**{k: v for k, v in event.items() if k != "type"}, "type": "inbox"})

    async def console_activity(self, event: dict[str, Any]) -> None:
        await self.send_json({**{k: v for k, v in event.items() if k != "type"}, "type": "activity"})

    async def console_notification(self, event: dict[str, Any]) -> None:
        await self.send_json({**{k: v for k, v in event.items() if k != "type"}, "type": "notification"})
