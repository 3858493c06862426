"""A shopper asking for a person: recognise it, record the request on the conversation, and word the reply.

The reply is fixed text (the store's ``handoff_reply`` or the default), never model text, and it says when
agents are back if the request comes outside the store's support hours.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone

from catalog.models import Store

from .models import Conversation

DEFAULT_REPLY = "I've asked a member of our team to join this chat; they will answer you here."
AWAY_REPLY = "Our team is away right now: agents are back at {when}. Your request is saved and they will answer here."
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_PEOPLE = (
    r"(?:a |an |the |some |real |live |actual )*(?:person|human(?: being| agent)?|agent|someone|somebody|"
    r"representative|rep|operator|staff(?: member)?|employee|people|team member|customer (?:service|support)|"
    r"support team|manager)"
)
_HANDOFF = re.compile(
    rf"\b(?:talk|speak|chat|connect|put|transfer|get|reach|contact|need|want)\b(?:\s+\w+){{0,3}}?\s+(?:to|with|me to)?\s*{_PEOPLE}\b"
    rf"|\b(?:human|live|real) (?:agent|person|support)\b|^\s*(?:agent|human|operator|representative)\s*[.!?]*\s*$",
    re.IGNORECASE,
)


def asks_for_person(text: str) -> bool:
    """True when the shopper asks to be put through to a person ("can I talk to someone?", "human agent")."""
    return bool(_HANDOFF.search(text))


def _parse_time(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def next_opening(hours: dict, now: datetime) -> datetime | None:
    """When agents are next available, in the store's time zone; None when they are available now (or always)."""
    if not hours:
        return None
    try:
        zone = ZoneInfo(hours.get("timezone") or "UTC")
        opens, closes = _parse_time(hours.get("open", "00:00")), _parse_time(hours.get("close", "23:59"))
    except (ZoneInfoNotFoundError, ValueError, AttributeError):
        return None  # a malformed setting must not hide agents; the studio validates it
    weekdays = set(hours.get("weekdays") or range(7))
    local = now.astimezone(zone)
    if local.weekday() in weekdays and opens <= local.time() < closes:
        return None
    for days in range(8):
        day = (local + timedelta(days=days)).date()
        if day.weekday() not in weekdays:
            continue
        start = datetime.combine(day, opens, tzinfo=zone)
        if start > local:
            return start
    return None


def describe_opening(when: datetime, now: datetime) -> str:
    local_now = now.astimezone(when.tzinfo)
    clock = when.strftime("%H:%M")
    if when.date() == local_now.date():
        day = "today"
    elif when.date() == local_now.date() + timedelta(days=1):
        day = "tomorrow"
    else:
        day = _DAYS[when.weekday()]
    return f"{clock} {day} ({when.tzinfo})"


def agents_back(store: Store, now: datetime | None = None) -> str | None:
    """When agents are back ("09:00 Monday (America/New_York)"), or None when they are there now (or always)."""
    now = now or timezone.now()
    opening = next_opening(store.support_hours or {}, now)
    return None if opening is None else describe_opening(opening, now)


def reply_for(store: Store, now: datetime | None = None) -> str:
    now = now or timezone.now()
    base = store.handoff_reply.strip() or DEFAULT_REPLY
    opening = next_opening(store.support_hours or {}, now)
    if opening is None:
        return base
    away = AWAY_REPLY.format(when=describe_opening(opening, now))
    return away if not store.handoff_reply.strip() else f"{base} {away}"


def request_handoff(conversation: Conversation, now: datetime | None = None) -> Conversation:
    """Record that the shopper wants a person (blocking: database). An agent already on it keeps the chat."""
    now = now or timezone.now()
    fields = []
    if conversation.status == Conversation.Status.BOT:
        conversation.status = Conversation.Status.HANDOFF
        fields.append("status")
    if conversation.handoff_requested_at is None:
        conversation.handoff_requested_at = now
        fields.append("handoff_requested_at")
    if fields:
        Conversation.objects.filter(pk=conversation.pk).update(**{name: getattr(conversation, name) for name in fields})
    return conversation
