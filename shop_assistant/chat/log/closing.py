"""Resolving a conversation: the one implementation, whoever resolves it (an agent in the console, or the shopper
with the widget's "End chat").

Blocking (the database, then the channel layer through ``async_to_sync``): callers run it on a worker thread.
The console records who resolved it (its activity list) through ``conversation_closed``, sent inside the
transaction: the chat never imports the console.
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.dispatch import Signal

from ..protocol import events
from ..models import Conversation

# Sent inside the closing transaction, once per conversation resolved: ``conversation`` (closed now) and ``user``
# (the agent who resolved it; None: the shopper ended the chat).
conversation_closed = Signal()

SHOPPER = "shopper"
AGENT = "agent"


def close(conversation_id: uuid.UUID | str, user: Any = None) -> tuple[Conversation, bool]:
    """Resolve the conversation: (the conversation, whether it was closed now; False: it was closed already).

    ``user``: the agent who resolves it, or None for the shopper. Every connection of the shopper's hears it
    (`conversation_ended`, then the rating card), the person who had it leaves the widget, and every console of
    the store sees it resolved. A shopper who writes again is answered by the bot; the conversation stays
    resolved until an agent reopens it.
    """
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status == Conversation.Status.CLOSED:
            return conversation, False
        previous = conversation.assigned_to if conversation.status == Conversation.Status.AGENT else None
        had_agent = conversation.status == Conversation.Status.AGENT
        conversation.status = Conversation.Status.CLOSED
        conversation.save(update_fields=["status"])
        conversation_closed.send(sender=Conversation, conversation=conversation, user=user)
    by = SHOPPER if user is None else AGENT
    if had_agent:
        leaving = previous if previous is not None else user
        name = events.agent_display_name(leaving) if leaving is not None else ""
        async_to_sync(events.send_to_group)(
            events.group_name(conversation.id), {"type": "chat.agent_left", "agent": name}
        )
    async_to_sync(events.conversation_closed)(conversation.id, by)  # the widget ends the chat and asks for a rating
    async_to_sync(events.inbox_event)(conversation.store_id, "closed", conversation.id, by=by)
    return conversation, True
