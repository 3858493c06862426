"""The hook for human agents (the console builds on it): write into a shopper's open conversation."""

from __future__ import annotations

import uuid

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from . import keeping
from .writes import MessageRecord
from .tasks import record_message
from ..protocol.events import group_name


async def asend_agent_message(conversation_id: uuid.UUID | str, text: str, agent: str) -> uuid.UUID:
    """Log the agent's message and push it to every connection showing the conversation."""
    record = MessageRecord(uuid.UUID(str(conversation_id)), "agent", text, agent=agent)
    # On the chat's writer threads, never the shared sync thread every connection opens through.
    await database_sync_to_async(record_message, thread_sensitive=False, executor=keeping.WRITERS)(record)
    await get_channel_layer().group_send(
        group_name(conversation_id),
        {"type": "chat.agent_message", "text": text, "agent": agent, "message_id": str(record.id)},
    )
    return record.id


def send_agent_message(conversation_id: uuid.UUID | str, text: str, agent: str) -> uuid.UUID:
    """Synchronous form, for views."""
    return async_to_sync(asend_agent_message)(conversation_id, text, agent)
