"""Transcripts as CSV or JSON: one conversation, or every conversation of a store in a date range.

A transcript is what was said and what the team did: the messages, the internal notes, the labels and the activity
(take over, assignment, labels, canned replies...). CSV has one row per message, note or action (``kind``)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import QuerySet

from catalog import csvsafe
from shop_assistant.chat.models import Conversation, Message

from .models import Action, Label, Note
from .services import agent_name, describe

# "cards" and "quotes": what the shopper saw under an answer, one per line (the newer columns go last, so that a
# sheet reading the columns by position still reads the older ones).
CSV_FIELDS = ["conversation", "store", "status", "labels", "kind", "message", "role", "agent", "text", "created_at",
              "cards", "quotes"]
CARD_FIELDS = ("sku", "title", "price", "currency", "url")
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


def _cards(message: Message) -> list[dict[str, Any]]:
    """The product cards shown under the answer, as the shopper saw them (title, price, link)."""
    return [{key: str(item.get(key) or "") for key in CARD_FIELDS}
            for item in message.products or [] if isinstance(item, dict)]


def _quotes(message: Message) -> list[dict[str, str]]:
    """The policy passages quoted under the answer."""
    return [{"title": str(item.get("title") or ""), "text": str(item.get("text") or "")}
            for item in message.quotes or [] if isinstance(item, dict)]


def _card_line(card: dict[str, Any]) -> str:
    price = " ".join(part for part in (card["price"], card["currency"]) if part)
    return " · ".join(part for part in (card["title"] or card["sku"], price, card["url"]) if part)


def _conversation_dict(conversation: Conversation, messages: list[Message], team: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(conversation.id),
        "store": conversation.store.slug,
        "status": conversation.status,
        "created_at": conversation.created_at.isoformat(),
        "customer": conversation.customer or {},
        "shopper_email": conversation.shopper_email,
        "csat_rating": conversation.csat_rating,
        "labels": team["labels"],
        "notes": team["notes"],
        "activity": team["activity"],
        "messages": [
            {
                "id": str(m.id),
                "role": m.role,
                "agent": m.agent,
                "text": m.text,
                "products": _cards(m),
                "quotes": _quotes(m),
                "created_at": m.created_at.isoformat(),
            }
            for m in messages
        ],
    }


def _team_records(conversation_ids: list[Any]) -> dict[Any, dict[str, Any]]:
    """Labels, notes and activity of a batch of conversations, in three queries."""
    team: dict[Any, dict[str, Any]] = {pk: {"labels": [], "notes": [], "activity": []} for pk in conversation_ids}
    through = Label.conversations.through.objects.filter(conversation_id__in=conversation_ids)
    for conversation_id, name in through.values_list("conversation_id", "label__name").order_by("label__name"):
        team[conversation_id]["labels"].append(name)
    for note in Note.objects.filter(conversation_id__in=conversation_ids).select_related("author"):
        team[note.conversation_id]["notes"].append(
            {"author": agent_name(note.author), "text": note.text, "created_at": note.created_at.isoformat()}
        )
    for action in Action.objects.filter(conversation_id__in=conversation_ids).select_related("user"):
        team[action.conversation_id]["activity"].append(
            {"kind": action.kind, "by": agent_name(action.user), "text": describe(action),
             "created_at": action.created_at.isoformat()}
        )
    return team


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
        team = _team_records(list(by_conversation))
        items.extend(_conversation_dict(c, by_conversation[c.pk], team[c.pk]) for c in batch)
        done += len(batch)
        if progress:
            progress(done, total)
    if fmt == "json":
        return json.dumps({"conversations": items}, ensure_ascii=False, indent=1)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for item in items:
        base = {"conversation": item["id"], "store": item["store"], "status": item["status"],
                "labels": ", ".join(item["labels"])}
        rows = [
            {"kind": "message", "message": m["id"], "role": m["role"], "agent": m["agent"], "text": m["text"],
             "created_at": m["created_at"], "cards": "\n".join(_card_line(card) for card in m["products"]),
             "quotes": "\n".join(f"{q['title']}: {q['text']}" if q["title"] else q["text"] for q in m["quotes"])}
            for m in item["messages"]
        ]
        rows += [{"kind": "note", "agent": n["author"], "text": n["text"], "created_at": n["created_at"]}
                 for n in item["notes"]]
        rows += [{"kind": "activity", "agent": a["by"], "text": a["text"], "created_at": a["created_at"]}
                 for a in item["activity"]]
        for row in sorted(rows, key=lambda r: r["created_at"]):
            # Every cell, not only the text: labels, agent names and activity are team- or shopper-written too.
            writer.writerow({key: csvsafe.cell(value) for key, value in {**base, **row}.items()})
    return out.getvalue()
