"""Transcripts as CSV or JSON: one conversation, or every conversation of a store in a date range."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import QuerySet

from shop_assistant.chat.models import Conversation, Message

CSV_FIELDS = ["conversation", "store", "status", "message", "role", "agent", "text", "created_at"]
BATCH = 200


def conversations_in_range(
    store_ids: Iterable[int], date_from: dt.date | None, date_to: dt.date | None
) -> QuerySet[Conversation]:
    qs = Conversation.objects.filter(store_id__in=list(store_ids))
    if date_from:
        qs = qs.filter(created_at__date__gte=date_from)
    if date_to:
        qs = qs.filter(created_at__date__lte=date_to)
    return qs.select_related("store").order_by("created_at", "pk")


def _conversation_dict(conversation: Conversation, messages: list[Message]) -> dict[str, Any]:
    return {
        "id": str(conversation.id),
        "store": conversation.store.slug,
        "status": conversation.status,
        "created_at": conversation.created_at.isoformat(),
        "messages": [
            {
                "id": str(m.id),
                "role": m.role,
                "agent": m.agent,
                "text": m.text,
                "products": [item.get("sku", "") for item in m.products or []],
                "created_at": m.created_at.isoformat(),
            }
            for m in messages
        ],
    }


def render(
    conversations: QuerySet[Conversation],
    fmt: str,
    progress: Callable[[int, int], None] | None = None,
) -> str:
    """The transcript file; ``progress(done, total)`` is called after every batch of conversations."""
    total = conversations.count()
    items: list[dict[str, Any]] = []
    done = 0
    ids = list(conversations.values_list("pk", flat=True))
    for start in range(0, total, BATCH):
        batch = list(conversations.filter(pk__in=ids[start : start + BATCH]))
        by_conversation: dict[Any, list[Message]] = {c.pk: [] for c in batch}
        for message in Message.objects.said().filter(conversation_id__in=by_conversation).order_by("created_at", "id"):
            by_conversation[message.conversation_id].append(message)
        items.extend(_conversation_dict(c, by_conversation[c.pk]) for c in batch)
        done += len(batch)
        if progress:
            progress(done, total)
    if fmt == "json":
        return json.dumps({"conversations": items}, ensure_ascii=False, indent=1)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for item in items:
        for m in item["messages"]:
            writer.writerow(
                {
                    "conversation": item["id"],
                    "store": item["store"],
                    "status": item["status"],
                    "message": m["id"],
                    "role": m["role"],
                    "agent": m["agent"],
                    # A leading = + - @ makes spreadsheets run the cell as a formula: quote it as text.
                    "text": "'" + m["text"] if m["text"][:1] in ("=", "+", "-", "@") else m["text"],
                    "created_at": m["created_at"],
                }
            )
    return out.getvalue()
