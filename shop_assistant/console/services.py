"""What an agent does to a conversation. Synchronous (views call these); every action is logged with who and when.

Role checks are the caller's (views check ``roles.can_work_on`` first); the rules about the conversation's state
are here.
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from shop_assistant.chat.agents import send_agent_message
from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.events import group_name

from shop_assistant.chat import events
from .models import Action, Label, Note, ReadMark

Status = Conversation.Status


class ConsoleError(Exception):
    """The action does not fit the conversation's state (shown to the agent as is)."""


def _log(conversation: Conversation | None, user: Any, kind: str, **detail: Any) -> Action:
    return Action.objects.create(conversation=conversation, user=user, kind=kind, detail=detail)


def _notify(conversation: Conversation, kind: str, **extra: Any) -> None:
    async_to_sync(events.inbox_event)(conversation.store_id, kind, conversation.id, **extra)


def _to_widget(conversation: Conversation, event_type: str, agent: str) -> None:
    async_to_sync(events._group_send)(group_name(conversation.id), {"type": event_type, "agent": agent})


def take_over(user: Any, conversation_id: uuid.UUID) -> Conversation:
    """The agent takes the conversation: the bot stops answering, the shopper sees the agent's name."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status == Status.AGENT and conversation.assigned_to_id not in (None, user.pk):
            raise ConsoleError(f"{events.agent_display_name(conversation.assigned_to)} already has this conversation")
        already = conversation.status == Status.AGENT and conversation.assigned_to_id == user.pk
        conversation.status = Status.AGENT
        conversation.assigned_to = user
        conversation.save(update_fields=["status", "assigned_to"])
        if not already:
            _log(conversation, user, Action.Kind.TAKE_OVER)
    if not already:
        _to_widget(conversation, "chat.agent_joined", events.agent_display_name(user))
        _notify(conversation, "assigned", agent=events.agent_display_name(user))
    return conversation


def hand_back(user: Any, conversation_id: uuid.UUID) -> Conversation:
    """Back to the bot, which reads the whole transcript (agent turns included) in its next prompt."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status != Status.AGENT:
            raise ConsoleError("the bot already has this conversation")
        previous = conversation.assigned_to
        conversation.status = Status.BOT
        conversation.assigned_to = None
        conversation.handoff_requested_at = None
        conversation.save(update_fields=["status", "assigned_to", "handoff_requested_at"])
        _log(conversation, user, Action.Kind.HAND_BACK)
    _to_widget(conversation, "chat.agent_left", events.agent_display_name(previous or user))
    _notify(conversation, "handed_back")
    return conversation


def close(user: Any, conversation_id: uuid.UUID) -> Conversation:
    """Resolved. A shopper who writes again is answered by the bot."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status == Status.CLOSED:
            return conversation
        previous, had_agent = conversation.assigned_to, conversation.status == Status.AGENT
        conversation.status = Status.CLOSED
        conversation.save(update_fields=["status"])
        _log(conversation, user, Action.Kind.CLOSE)
    if had_agent:
        _to_widget(conversation, "chat.agent_left", events.agent_display_name(previous or user))
    async_to_sync(events.conversation_closed)(conversation.id)  # the widget ends the chat and asks for a rating
    _notify(conversation, "closed")
    return conversation


def reopen(user: Any, conversation_id: uuid.UUID) -> Conversation:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status != Status.CLOSED:
            raise ConsoleError("the conversation is not closed")
        conversation.status = Status.BOT
        conversation.assigned_to = None
        conversation.save(update_fields=["status", "assigned_to"])
        _log(conversation, user, Action.Kind.REOPEN)
    _notify(conversation, "handed_back")
    return conversation


def reply(user: Any, conversation_id: uuid.UUID, text: str) -> uuid.UUID:
    """The agent writes to the shopper (every tab of theirs). Only while this agent has the conversation."""
    text = text.strip()
    if not text:
        raise ConsoleError("the reply is empty")
    conversation = Conversation.objects.get(pk=conversation_id)
    if conversation.status != Status.AGENT or conversation.assigned_to_id != user.pk:
        raise ConsoleError("take the conversation over before replying")
    message_id = send_agent_message(conversation.id, text, events.agent_display_name(user))
    _log(conversation, user, Action.Kind.REPLY, message=str(message_id))
    return message_id


def add_note(user: Any, conversation_id: uuid.UUID, text: str) -> Note:
    text = text.strip()
    if not text:
        raise ConsoleError("the note is empty")
    conversation = Conversation.objects.get(pk=conversation_id)
    note = Note.objects.create(conversation=conversation, author=user, text=text)
    _log(conversation, user, Action.Kind.NOTE, note=note.pk)
    return note


def set_label(user: Any, conversation_id: uuid.UUID, name: str, on: bool) -> Label:
    name = name.strip()[:50]
    if not name:
        raise ConsoleError("the label is empty")
    conversation = Conversation.objects.get(pk=conversation_id)
    label, _ = Label.objects.get_or_create(store_id=conversation.store_id, name=name)
    if on:
        label.conversations.add(conversation)
    else:
        label.conversations.remove(conversation)
    _log(conversation, user, Action.Kind.LABEL if on else Action.Kind.UNLABEL, label=name)
    return label


def mark_read(user: Any, conversation_id: uuid.UUID) -> None:
    ReadMark.objects.update_or_create(
        user=user, conversation_id=conversation_id, defaults={"read_at": timezone.now()}
    )


def unread_counts(user: Any, conversation_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Shopper messages newer than the user's read mark, per conversation."""
    marks = dict(
        ReadMark.objects.filter(user=user, conversation_id__in=conversation_ids).values_list(
            "conversation_id", "read_at"
        )
    )
    counts: dict[uuid.UUID, int] = {}
    rows = Message.objects.filter(conversation_id__in=conversation_ids, role=Message.Role.USER).values_list(
        "conversation_id", "created_at"
    )
    for conversation_id, created_at in rows:
        mark = marks.get(conversation_id)
        if mark is None or created_at > mark:
            counts[conversation_id] = counts.get(conversation_id, 0) + 1
    return counts
