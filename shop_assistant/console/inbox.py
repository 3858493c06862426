"""The inbox: which conversations an agent sees, in which section, filtered and searched. Reads the database
only, so it is right even when a live event was missed."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from shop_assistant.chat.models import Conversation, Message
from shop_assistant.runtime.params import parse_day, parse_id

from . import services
from .roles import stores_for

Status = Conversation.Status
# A conversation with a message this recent counts as "now chatting".
LIVE_WINDOW = dt.timedelta(minutes=10)
SECTION_LIMIT = 50


@dataclass
class Filters:
    store: int | None = None
    status: str = ""
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    q: str = ""
    # What could not be read (a store id past 64 bits, the 45th of month 13): the filter is left out and the page
    # says so, with a 400.
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, params: Any) -> Filters:
        errors = []
        raw_store = (params.get("store", "") or "").strip()
        store = parse_id(raw_store)
        if raw_store and store is None:
            errors.append(f"store: {raw_store[:40]!r} is not a store")
        status = params.get("status", "")
        days = {}
        for name in ("from", "to"):
            try:
                days[name] = parse_day(params.get(name), name)
            except ValueError as error:
                days[name] = None
                errors.append(str(error)[:80])
        return cls(
            store=store,
            status=status if status in Status.values else "",
            date_from=days["from"],
            date_to=days["to"],
            q=(params.get("q", "") or "").strip()[:200],
            errors=errors,
        )

    @property
    def active(self) -> bool:
        return bool(self.store or self.status or self.date_from or self.date_to or self.q)


def matching_messages(q: str) -> QuerySet[Message]:
    """Messages whose text matches ``q``: PostgreSQL full-text search there, a plain substring match elsewhere."""
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchVector

        return Message.objects.annotate(search=SearchVector("text", config="simple")).filter(
            search=SearchQuery(q, config="simple", search_type="websearch")
        )
    return Message.objects.filter(text__icontains=q)


def visible_conversations(user: Any, filters: Filters | None = None) -> QuerySet[Conversation]:
    filters = filters or Filters()
    qs = (
        Conversation.objects.filter(store__in=stores_for(user))
        .select_related("store", "assigned_to")
        .prefetch_related("labels")
    )
    if filters.store:
        qs = qs.filter(store_id=filters.store)
    if filters.status:
        qs = qs.filter(status=filters.status)
    if filters.date_from:
        qs = qs.filter(last_activity_at__date__gte=filters.date_from)
    if filters.date_to:
        qs = qs.filter(created_at__date__lte=filters.date_to)
    if filters.q:
        qs = qs.filter(pk__in=matching_messages(filters.q).values("conversation_id"))
    # The preview is what the shopper last asked: the assistant's reply to it says little about what they need.
    last = Message.objects.filter(conversation=OuterRef("pk"), role=Message.Role.USER).order_by("-created_at")
    return qs.annotate(last_text=Subquery(last.values("text")[:1]))


@dataclass
class Item:
    conversation: Conversation
    unread: int = 0
    wait_seconds: int | None = None

    @property
    def title(self) -> str:
        return services.conversation_title(self.conversation)

    @property
    def named(self) -> bool:
        """Named after the shopper (else after the id's code, which the row then shows only once)."""
        return self.title != str(self.conversation.pk)[:8]

    @property
    def wait(self) -> str:
        if self.wait_seconds is None:
            return ""
        minutes, seconds = divmod(self.wait_seconds, 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes} min" if hours else f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


@dataclass
class Sections:
    waiting: list[Item] = field(default_factory=list)
    mine: list[Item] = field(default_factory=list)
    live: list[Item] = field(default_factory=list)
    recent: list[Item] = field(default_factory=list)

    @property
    def as_list(self) -> list[tuple[str, str, list[Item]]]:
        return [
            ("waiting", "Waiting for a person", self.waiting),
            ("mine", "Assigned to me", self.mine),
            ("live", "Now chatting", self.live),
            ("recent", "Recent", self.recent),
        ]

    @property
    def unread_total(self) -> int:
        return sum(item.unread for section in (self.waiting, self.mine, self.live, self.recent) for item in section)


def sections(user: Any, filters: Filters | None = None, now: dt.datetime | None = None) -> Sections:
    now = now or timezone.now()
    qs = visible_conversations(user, filters)
    waiting = list(qs.filter(status=Status.HANDOFF).order_by("handoff_requested_at", "created_at")[:SECTION_LIMIT])
    mine = list(qs.filter(status=Status.AGENT, assigned_to=user).order_by("-last_activity_at")[:SECTION_LIMIT])
    shown: set[uuid.UUID] = {c.pk for c in waiting + mine}
    live = [
        c
        for c in qs.filter(last_activity_at__gte=now - LIVE_WINDOW)
        .exclude(status=Status.CLOSED)
        .order_by("-last_activity_at")[: SECTION_LIMIT * 2]
        if c.pk not in shown
    ][:SECTION_LIMIT]
    shown |= {c.pk for c in live}
    recent = [c for c in qs.order_by("-last_activity_at")[: SECTION_LIMIT * 3] if c.pk not in shown][:SECTION_LIMIT]
    everything = waiting + mine + live + recent
    unread = services.unread_counts(user, [c.pk for c in everything])

    def item(c: Conversation) -> Item:
        started = c.handoff_requested_at or c.created_at
        wait = int((now - started).total_seconds()) if c.status == Status.HANDOFF else None
        return Item(c, unread.get(c.pk, 0), wait)

    return Sections(*([item(c) for c in part] for part in (waiting, mine, live, recent)))
