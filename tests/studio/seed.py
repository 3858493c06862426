"""A seeded week of one store's conversations, with every figure the analytics page shows known in advance:
answers with cards and thumbs, card clicks, CSAT ratings, handoffs with agent replies at known times, no-match
replies, and rows that must not count (another store, the day after the range, an answer still in progress)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field

from catalog.models import Store
from shop_assistant.chat.models import CardClick, Conversation, Message, hash_token

MONDAY = dt.date(2026, 11, 2)  # the seeded week: Monday 2 to Sunday 8 November 2026 (UTC)
SUNDAY = MONDAY + dt.timedelta(days=6)
HANDOFF_REPLY = "A member of our team will be with you shortly."
# Each answer's row keeps what kind of answer it was (Message.kind), as the chat writes it; analytics read that.


def at(day: int, hour: int = 10, seconds: int = 0) -> dt.datetime:
    return dt.datetime.combine(MONDAY + dt.timedelta(days=day), dt.time(hour), tzinfo=dt.UTC) + dt.timedelta(
        seconds=seconds
    )


@dataclass
class Week:
    store: Store
    conversations: dict[str, Conversation] = field(default_factory=dict)


def _conversation(store: Store, started: dt.datetime, **fields) -> Conversation:
    conversation = Conversation.objects.create(store=store, resume_token_hash=hash_token(uuid.uuid4().hex), **fields)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=started, last_activity_at=started)
    conversation.refresh_from_db()
    return conversation


def _message(conversation: Conversation, role: str, text: str, when: dt.datetime, **fields) -> Message:
    return Message.objects.create(conversation=conversation, role=role, text=text, created_at=when, **fields)


def _card(sku: str) -> dict:
    return {"sku": sku, "title": f"Product {sku}", "price": "10.00", "currency": "USD", "url": f"https://x/{sku}"}


def seed_week(store: Store) -> Week:
    week = Week(store)
    c = week.conversations
    # Monday: an answer with two cards (thumbs up, one card clicked, CSAT 5); a no-match reply.
    c["jackets"] = _conversation(store, at(0), csat_rating=5)
    _message(c["jackets"], "user", "Do you have rain jackets?", at(0, seconds=1))
    answer = _message(c["jackets"], "assistant", "We have two rain jackets.", at(0, seconds=3), finish_reason="stop",
                      products=[_card("RJ-1"), _card("RJ-2")], rating=1, prompt_tokens=100, cached_tokens=64,
                      first_token_ms=300)
    CardClick.objects.create(conversation=c["jackets"], message=answer)
    c["kayaks"] = _conversation(store, at(0, 15))
    _message(c["kayaks"], "user", "Do you sell kayaks?", at(0, 15, 1))
    _message(c["kayaks"], "assistant", "Sorry, we don't carry kayaks. Try other words, or ask for a person.",
             at(0, 15, 2), finish_reason="fixed", kind="no_match")
    # Tuesday: a handoff answered by an agent 120 s after it was asked for (CSAT 4); two no-match replies to kayaks.
    c["person"] = _conversation(store, at(1), handoff_requested_at=at(1, seconds=10), status="closed", csat_rating=4)
    _message(c["person"], "user", "Can I talk to a person?", at(1, seconds=9))
    _message(c["person"], "assistant", HANDOFF_REPLY, at(1, seconds=10), finish_reason="fixed", kind="handoff")
    _message(c["person"], "agent", "Hi, I'm Ann. How can I help?", at(1, seconds=130), agent="ann")
    _message(c["person"], "agent", "Anything else?", at(1, seconds=430), agent="ann")
    c["kayak-again"] = _conversation(store, at(1, 12))
    _message(c["kayak-again"], "user", "kayak", at(1, 12, 1))
    _message(c["kayak-again"], "assistant", "Sorry, we don't carry kayak. Try other words, or ask for a person.",
             at(1, 12, 2), finish_reason="fixed", kind="no_match")
    _message(c["kayak-again"], "user", "Do you have a kayak?", at(1, 12, 30))
    _message(c["kayak-again"], "assistant", "Sorry, we don't carry kayaks. Try other words, or ask for a person.",
             at(1, 12, 31), finish_reason="fixed", kind="no_match")
    # Thursday: an answer with one card (thumbs down, clicked, CSAT 2) then a handoff replied after 600 s; a
    # handoff nobody has answered yet.
    c["order"] = _conversation(store, at(3), handoff_requested_at=at(3, seconds=60), status="agent", csat_rating=2)
    _message(c["order"], "user", "Where is my tent order?", at(3, seconds=1))
    tent = _message(c["order"], "assistant", "Here is our tent.", at(3, seconds=2), finish_reason="stop",
                    products=[_card("T-1")], rating=-1, prompt_tokens=200, cached_tokens=0,
                    first_token_ms=900)
    CardClick.objects.create(conversation=c["order"], message=tent)
    _message(c["order"], "agent", "Let me check your order.", at(3, seconds=660), agent="ann")
    c["waiting"] = _conversation(store, at(3, 16), handoff_requested_at=at(3, 16, 5), status="handoff")
    _message(c["waiting"], "user", "person please", at(3, 16, 4))
    _message(c["waiting"], "assistant", HANDOFF_REPLY, at(3, 16, 5), finish_reason="fixed", kind="handoff")
    # Sunday: a no-match reply to laptops, small talk answered by the model (CSAT 3), and an answer in progress.
    c["laptops"] = _conversation(store, at(6), csat_rating=3)
    _message(c["laptops"], "user", "Do you sell laptops?", at(6, seconds=1))
    _message(c["laptops"], "assistant", "Sorry, we don't carry laptops. Try other words, or ask for a person.",
             at(6, seconds=2), finish_reason="fixed", kind="no_match")
    _message(c["laptops"], "user", "hello", at(6, seconds=20))
    _message(c["laptops"], "assistant", "Hello! How can I help?", at(6, seconds=21), finish_reason="stop",
             prompt_tokens=100, cached_tokens=86, first_token_ms=500)
    _message(c["laptops"], "user", "thanks", at(6, seconds=40))
    _message(c["laptops"], "assistant", "", at(6, seconds=41))  # in progress: not a message of the report
    # Outside the report: the Monday after, and another store's conversation inside the week.
    c["next-week"] = _conversation(store, at(7), csat_rating=1)
    _message(c["next-week"], "user", "Do you sell canoes?", at(7, seconds=1))
    _message(c["next-week"], "assistant", "Sorry, we don't carry canoes.", at(7, seconds=2), finish_reason="fixed", kind="no_match")
    other = Store.objects.create(slug="elsewhere", name="Elsewhere")
    c["other-store"] = _conversation(other, at(2), csat_rating=1, handoff_requested_at=at(2))
    _message(c["other-store"], "user", "Do you sell kayaks?", at(2, seconds=1))
    _message(c["other-store"], "assistant", "Sorry, we don't carry kayaks.", at(2, seconds=2), finish_reason="fixed", kind="no_match")
    return week
