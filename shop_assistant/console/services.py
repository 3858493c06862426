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

from shop_assistant.chat.log.agents import send_agent_message
from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.protocol.events import group_name

from shop_assistant.chat.log import closing
from shop_assistant.chat.protocol import events
from . import placeholders
from .models import Action, CannedReply, Label, Note, Notification, ReadMark, StoreMembership

Status = Conversation.Status


class ConsoleError(Exception):
    """The action does not fit the conversation's state (shown to the agent as is)."""


def _log(conversation: Conversation | None, user: Any, kind: str, **detail: Any) -> Action:
    return Action.objects.create(conversation=conversation, user=user, kind=kind, detail=detail)


def _notify(conversation: Conversation, kind: str, **extra: Any) -> None:
    async_to_sync(events.inbox_event)(conversation.store_id, kind, conversation.id, **extra)


def _to_widget(conversation: Conversation, event_type: str, agent: str) -> None:
    async_to_sync(events.send_to_group)(group_name(conversation.id), {"type": event_type, "agent": agent})


def console_group(conversation_id: uuid.UUID | str) -> str:
    """The consoles watching one conversation. Not the chat's group: the shopper's connections must never hear
    of notes, labels or who assigned whom (and would have no handler for them)."""
    return f"console.conversation.{uuid.UUID(str(conversation_id)).hex}"


def user_group(user_id: int) -> str:
    """Every console tab of one staff member: their notifications."""
    return f"console.user.{user_id}"


def _broadcast(action: Action, **extra: Any) -> None:
    """An action on the conversation, live to every console watching it (activity list, notes, labels)."""
    async_to_sync(events.send_to_group)(
        console_group(action.conversation_id), {"type": "console.activity", **activity_row(action), **extra}
    )


def describe(action: Action) -> str:
    """One line of the activity list (and of exports): what was done, with its detail."""
    detail = action.detail or {}
    text = action.get_kind_display()
    if action.kind in (Action.Kind.LABEL, Action.Kind.UNLABEL):
        text += f" {detail.get('label', '')}"
    elif action.kind == Action.Kind.ASSIGN:
        text += f" to {detail.get('to', '')}"
    elif action.kind == Action.Kind.CANNED:
        text += f" /{detail.get('shortcut', '')}"
    elif action.kind == Action.Kind.EXPORT and detail.get("format"):
        text += f" ({str(detail['format']).upper()})"
    elif action.kind == Action.Kind.CLOSE and detail.get("by") == closing.SHOPPER:
        text += " (the shopper ended the chat)"
    elif action.kind == Action.Kind.NOTE:
        text += f": {str(detail.get('text', ''))[:80]}"
    return text


def activity_row(action: Action) -> dict[str, Any]:
    return {
        "conversation": str(action.conversation_id),
        "kind": action.kind,
        "by": actor_name(action),
        "text": describe(action),
        "at": action.created_at.isoformat(),
    }


def actor_name(action: Action) -> str:
    """Who did it, for the activity list: the staff member, or the shopper (who ended the chat)."""
    return "Shopper" if (action.detail or {}).get("by") == closing.SHOPPER else agent_name(action.user)


def agent_name(user: Any) -> str:
    return events.agent_display_name(user) if user is not None else "?"


def _settle_request(conversation: Conversation) -> list[str]:
    """The open request for a person is settled (the bot has the conversation again): clear it, so that a new
    request is recorded and waited on anew, and keep the first one as history, which analytics count from.
    The fields to save."""
    if conversation.handoff_requested_at is None:
        return []
    if conversation.first_handoff_requested_at is None:
        conversation.first_handoff_requested_at = conversation.handoff_requested_at
    conversation.handoff_requested_at = None
    return ["handoff_requested_at", "first_handoff_requested_at"]


def take_over(user: Any, conversation_id: uuid.UUID) -> Conversation:
    """The agent takes the conversation: the bot stops answering, the shopper sees the agent's name."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status == Status.AGENT and conversation.assigned_to_id not in (None, user.pk):
            raise ConsoleError(
                f"{events.agent_display_name(conversation.assigned_to)} already has this conversation. To take it "
                "from them, pick yourself under Assign to: they are told."
            )
        already = conversation.status == Status.AGENT and conversation.assigned_to_id == user.pk
        conversation.status = Status.AGENT
        conversation.assigned_to = user
        conversation.save(update_fields=["status", "assigned_to"])
        if not already:
            action = _log(conversation, user, Action.Kind.TAKE_OVER)
    if not already:
        _to_widget(conversation, "chat.agent_joined", events.agent_display_name(user))
        _notify(conversation, "assigned", agent=events.agent_display_name(user))
        _broadcast(action)
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
        conversation.save(update_fields=["status", "assigned_to", *_settle_request(conversation)])
        action = _log(conversation, user, Action.Kind.HAND_BACK)
    _to_widget(conversation, "chat.agent_left", events.agent_display_name(previous or user))
    _notify(conversation, "handed_back")
    _broadcast(action)
    return conversation


def close(user: Any, conversation_id: uuid.UUID) -> Conversation:
    """Resolved (``chat.closing.close``, the one implementation: the shopper's "End chat" uses it too; the
    activity row is ``log_close``). A shopper who writes again is answered by the bot."""
    return closing.close(conversation_id, user=user)[0]


def log_close(sender: Any, conversation: Conversation, user: Any, **kwargs: Any) -> None:
    """``closing.conversation_closed``: who resolved it, in the activity list (an agent, or the shopper)."""
    action = _log(conversation, user, Action.Kind.CLOSE, **({} if user is not None else {"by": closing.SHOPPER}))
    _broadcast(action)


def reopen(user: Any, conversation_id: uuid.UUID) -> Conversation:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status != Status.CLOSED:
            raise ConsoleError("the conversation is not closed")
        conversation.status = Status.BOT
        conversation.assigned_to = None
        conversation.save(update_fields=["status", "assigned_to", *_settle_request(conversation)])
        action = _log(conversation, user, Action.Kind.REOPEN)
    _notify(conversation, "handed_back")
    _broadcast(action)
    return conversation


def reply(user: Any, conversation_id: uuid.UUID, text: str, canned: int | None = None) -> uuid.UUID:
    """The agent writes to the shopper (every tab of theirs). Only while this agent has the conversation.
    ``canned``: the canned reply the text started from (logged, so the store sees which ones are used)."""
    text = text.strip()
    if not text:
        raise ConsoleError("the reply is empty")
    conversation = Conversation.objects.select_related("store").get(pk=conversation_id)
    if conversation.status != Status.AGENT or conversation.assigned_to_id != user.pk:
        raise ConsoleError("take the conversation over before replying")
    try:
        # The guard: whatever the page did, no "{first_name}" reaches a shopper word for word.
        text = placeholders.fill(text, placeholders.values_for(conversation, user))
    except placeholders.UnfilledPlaceholder as error:
        raise ConsoleError(str(error)) from None
    message_id = send_agent_message(conversation.id, text, events.agent_display_name(user))
    template = CannedReply.objects.filter(pk=canned, store_id=conversation.store_id).first() if canned else None
    if template is not None:
        _broadcast(_log(conversation, user, Action.Kind.CANNED, shortcut=template.shortcut, message=str(message_id)))
    # Live as well: the activity list a watcher sees is the one a reload shows.
    _broadcast(_log(conversation, user, Action.Kind.REPLY, message=str(message_id)))
    return message_id


def record_export(user: Any, conversation: Conversation, fmt: str) -> None:
    """Someone downloaded the conversation's transcript: logged, and live in the activity list."""
    _broadcast(_log(conversation, user, Action.Kind.EXPORT, format=fmt))


def add_note(user: Any, conversation_id: uuid.UUID, text: str) -> Note:
    text = text.strip()
    if not text:
        raise ConsoleError("the note is empty")
    conversation = Conversation.objects.get(pk=conversation_id)
    note = Note.objects.create(conversation=conversation, author=user, text=text)
    action = _log(conversation, user, Action.Kind.NOTE, note=note.pk, text=text[:200])
    _broadcast(action, note={"id": note.pk, "text": note.text, "author": agent_name(user),
                             "created_at": note.created_at.isoformat()})
    return note


def set_label(user: Any, conversation_id: uuid.UUID, name: str, on: bool) -> Label:
    """Put one of the store's preset labels on the conversation (or take it off). Labels are made on the
    Labels page, so that "refund" and "Refunds" do not both exist."""
    name = name.strip()[:50]
    if not name:
        raise ConsoleError("the label is empty")
    conversation = Conversation.objects.get(pk=conversation_id)
    label = Label.objects.filter(store_id=conversation.store_id, name__iexact=name).first()
    if label is None:
        raise ConsoleError(f"{name!r} is not one of this store's labels: add it on the Labels page first")
    if on:
        label.conversations.add(conversation)
    else:
        label.conversations.remove(conversation)
    action = _log(conversation, user, Action.Kind.LABEL if on else Action.Kind.UNLABEL, label=label.name)
    _broadcast(action, label={"name": label.name, "color": label.color, "on": on})
    return label


def assignees(store_id: int) -> list[Any]:
    """The staff a conversation of the store can be assigned to: its agents and owners."""
    memberships = StoreMembership.objects.filter(store_id=store_id, user__is_active=True).select_related("user")
    return sorted({m.user for m in memberships}, key=lambda u: (agent_name(u).lower(), u.pk))


def assign(user: Any, conversation_id: uuid.UUID, assignee_id: int) -> Conversation:
    """Give the conversation to a named agent of its store (``user`` may pick themselves: that is how one takes a
    conversation someone else has). The assignee is told in their inbox, live; the shopper sees their name."""
    with transaction.atomic():
        # Only the conversation's row is locked: PostgreSQL refuses FOR UPDATE on the nullable side of the
        # assignee's outer join.
        conversation = (Conversation.objects.select_for_update(of=("self",)).select_related("assigned_to")
                        .get(pk=conversation_id))
        assignee = next((u for u in assignees(conversation.store_id) if u.pk == assignee_id), None)
        if assignee is None:
            raise ConsoleError("pick an agent of this store")
        if conversation.status == Status.CLOSED:
            raise ConsoleError("the conversation is resolved: reopen it first")
        if conversation.status == Status.AGENT and conversation.assigned_to_id == assignee.pk:
            return conversation
        previous = conversation.assigned_to if conversation.status == Status.AGENT else None
        conversation.status = Status.AGENT
        conversation.assigned_to = assignee
        conversation.save(update_fields=["status", "assigned_to"])
        action = _log(conversation, user, Action.Kind.ASSIGN, to=agent_name(assignee), to_id=assignee.pk,
                      previous=agent_name(previous) if previous else "")
        notification = None
        if assignee.pk != user.pk:
            notification = Notification.objects.create(
                user=assignee, conversation=conversation, kind=Notification.Kind.ASSIGNED, actor=user
            )
    if previous is not None:
        _to_widget(conversation, "chat.agent_left", agent_name(previous))
    _to_widget(conversation, "chat.agent_joined", agent_name(assignee))
    _notify(conversation, "assigned", agent=agent_name(assignee))
    _broadcast(action, assigned_to=agent_name(assignee))
    if notification is not None:
        async_to_sync(events.send_to_group)(user_group(assignee.pk), {"type": "console.notification",
                                                                    **notification_row(notification)})
    return conversation


def notification_row(notification: Notification) -> dict[str, Any]:
    conversation = notification.conversation
    return {
        "id": notification.pk,
        "kind": notification.kind,
        "conversation": str(conversation.pk),
        "text": f"{agent_name(notification.actor)} assigned you {conversation_title(conversation)}",
        "url": f"/console/c/{conversation.pk}/",
        "at": notification.created_at.isoformat(),
        "unread": unread_notifications(notification.user_id),
    }


def unread_notifications(user_id: int) -> int:
    return Notification.objects.filter(user_id=user_id, read_at__isnull=True).count()


def read_notifications(user: Any, conversation_id: uuid.UUID | None = None) -> int:
    """Mark the user's notifications read (those of one conversation, or all); how many were."""
    qs = Notification.objects.filter(user=user, read_at__isnull=True)
    if conversation_id is not None:
        qs = qs.filter(conversation_id=conversation_id)
    return qs.update(read_at=timezone.now())


def conversation_title(conversation: Conversation) -> str:
    """How the console names a conversation: the signed customer's name or e-mail, the e-mail the shopper
    typed, else the code of its id."""
    customer = conversation.customer or {}
    return (customer.get("name") or customer.get("email") or conversation.shopper_email
            or str(conversation.pk)[:8])


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
