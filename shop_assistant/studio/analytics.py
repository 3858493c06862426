"""A store's analytics over a date range: what the assistant handled, what went to people, what shoppers thought
and what they asked for that the store does not sell. Read-only: every figure is a query over the chat's rows.

What an answer was is read from its row's kind (``Message.kind``, recorded from the path that composed it), never
from its words: a no-match reply in Spanish is one ("Don't sell"), and a question the assistant could not read
("¿Tienen chaquetas impermeables?", asked of a store that sells rain jackets) is not understood, never "Don't sell".

The range is a set of whole days in the store's time zone (its support hours' zone, UTC when it has none: an
owner's "Monday" is the store's Monday); a conversation belongs to it by when it started, and every other figure
(messages, ratings, clicks, handoffs) is taken from the conversations started in the range, so the figures on one
page always describe the same conversations.

First-token time is not stored: the chat reports it live in each answer's ``end`` frame (``timing``) and to the
metrics endpoint, but no row keeps it, so the page says so and shows the prompt-cache figures that are stored.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from catalog.models import Store
from shop_assistant.chat.answers.composition import NO_MATCH, NOT_UNDERSTOOD
from shop_assistant.chat.models import AnswerSettings, CardClick, Conversation, Message
from shop_assistant.orders.models import ConversationOrder, OrderRequest

DEFAULT_DAYS = 7
MAX_DAYS = 366
TOP_NO_MATCH = 20
_NOT_WORD = re.compile(r"[^\w$€£%]+")
# Words that change nothing about what was asked for: "do you have kayaks?" and "kayaks" are one request.
_FILLER = frozenset(
    "a an the do does you your have has sell carry stock any some i im want need looking for please is are "
    "there can get me of to buy".split()
)


UTC = ZoneInfo("UTC")
# When a person was first asked for: the request kept as history once settled (an agent handed back), else the
# open one. A handoff counts once it happened, whatever came after it.
HANDOFF_AT = Coalesce("first_handoff_requested_at", "handoff_requested_at")


def store_zone(store: Store) -> ZoneInfo:
    """The store's time zone: the one its support hours are kept in (the studio's settings), else UTC."""
    try:
        return ZoneInfo((AnswerSettings.of(store).support_hours or {}).get("timezone") or "UTC")
    except (ZoneInfoNotFoundError, ValueError, TypeError, AttributeError):
        return UTC  # the studio validates the setting; a bad one must not break the page


@dataclass(frozen=True)
class Range:
    start: dt.date
    end: dt.date  # inclusive
    zone: ZoneInfo = UTC  # whose midnights bound the days

    @property
    def days(self) -> list[dt.date]:
        return [self.start + dt.timedelta(days=i) for i in range((self.end - self.start).days + 1)]

    @property
    def since(self) -> dt.datetime:
        return dt.datetime.combine(self.start, dt.time.min, tzinfo=self.zone)

    @property
    def until(self) -> dt.datetime:
        return dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time.min, tzinfo=self.zone)

    def day_of(self, moment: dt.datetime) -> dt.date:
        return moment.astimezone(self.zone).date()


def parse_range(start: str | None, end: str | None, today: dt.date | None = None, zone: ZoneInfo = UTC) -> Range:
    """The range the query string asks for; the last ``DEFAULT_DAYS`` days when a date is missing or unreadable.
    Reversed dates are swapped and a range is capped at ``MAX_DAYS``. Days are ``zone``'s."""
    today = today or dt.datetime.now(zone).date()

    def read(raw: str | None) -> dt.date | None:
        try:
            return dt.date.fromisoformat(raw) if raw else None
        except ValueError:
            return None

    last = read(end) or today
    first = read(start) or last - dt.timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        first, last = last, first
    if (last - first).days >= MAX_DAYS:
        first = last - dt.timedelta(days=MAX_DAYS - 1)
    return Range(first, last, zone)


@dataclass
class NoMatchGroup:
    """Questions answered with one kind of reply (no match, not understood), grouped by their normalised words."""

    key: str
    text: str  # the most frequent wording
    count: int
    conversations: list[str] = field(default_factory=list)  # conversation ids, newest first


@dataclass
class Day:
    day: dt.date
    conversations: int = 0
    deflected: int = 0
    handoffs: int = 0


def _rate(part: str, whole: str) -> property:
    return property(lambda self: _share(getattr(self, part), getattr(self, whole)))


def _median(values: str) -> property:
    return property(lambda self: statistics.median(getattr(self, values)) if getattr(self, values) else None)


@dataclass
class Report:
    range: Range
    conversations: int = 0
    # Messages by who wrote them (Message.Role: "user", "assistant", "agent"); ``messages`` is their sum.
    messages_by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(Message.Role.values, 0))
    deflected: int = 0
    handoffs: int = 0
    handoffs_replied: int = 0
    first_human_reply_seconds: list[float] = field(default_factory=list)
    csat: dict[int, int] = field(default_factory=lambda: {score: 0 for score in range(1, 6)})
    thumbs_up: int = 0
    thumbs_down: int = 0
    cards_shown: int = 0
    answers_with_cards: int = 0
    card_clicks: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    first_token_ms: list[int] = field(default_factory=list)  # per answer that recorded it (Message.first_token_ms)
    days: list[Day] = field(default_factory=list)
    no_match: list[NoMatchGroup] = field(default_factory=list)
    no_match_answers: int = 0
    not_understood: list[NoMatchGroup] = field(default_factory=list)  # what the assistant could not read
    not_understood_answers: int = 0
    # Orders (issue 38): conversations where the chat asked for an order or verified one, and the requests made.
    order_conversations: int = 0
    order_verified: int = 0
    order_deflected: int = 0
    # The requests by outcome (OrderRequest.Status: "pending", "accepted", "declined").
    order_requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OrderRequest.Status.values, 0))

    # Shares of two of the counts above (None when there is nothing to divide by) and medians of the lists.
    deflection_rate = _rate("deflected", "conversations")
    handoff_rate = _rate("handoffs", "conversations")
    click_through = _rate("card_clicks", "cards_shown")
    cache_share = _rate("cached_tokens", "prompt_tokens")
    median_first_human_reply = _median("first_human_reply_seconds")
    median_first_token_ms = _median("first_token_ms")

    @property
    def messages(self) -> int:
        return sum(self.messages_by_role.values())

    @property
    def csat_responses(self) -> int:
        return sum(self.csat.values())

    @property
    def csat_average(self) -> float | None:
        total = self.csat_responses
        return round(sum(score * n for score, n in self.csat.items()) / total, 2) if total else None

    @property
    def csat_satisfied(self) -> float | None:
        """The share of 4 and 5 ratings, as help desks report CSAT."""
        return _share(self.csat[4] + self.csat[5], self.csat_responses)

    @property
    def thumbs_up_rate(self) -> float | None:
        return _share(self.thumbs_up, self.thumbs_up + self.thumbs_down)



def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def normalise_question(text: str) -> str:
    """The words of a request, lower-cased, without punctuation or filler, with a plural's "s" dropped: a simple
    grouping ("Do you sell kayaks?" and "kayak" are one request), not a semantic one."""
    plain = text.lower().replace("'", "").replace("’", "")  # "I'm" and "im", "don't" and "dont" alike
    words = [word for word in _NOT_WORD.sub(" ", plain).split() if word not in _FILLER]
    return " ".join(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
                    for word in words)  # fmt: skip


def store_report(store: Store, span: Range) -> Report:
    report = Report(range=span, days=[Day(day) for day in span.days])
    by_day = {day.day: day for day in report.days}
    conversations = Conversation.objects.filter(store=store, created_at__gte=span.since, created_at__lt=span.until)
    messages = Message.objects.said().filter(conversation__in=conversations)

    rows = conversations.annotate(
        handoff_at=HANDOFF_AT,
        answers=Count("messages", filter=Q(messages__role=Message.Role.ASSISTANT) & ~Q(messages__finish_reason="")),
        agent_replies=Count("messages", filter=Q(messages__role=Message.Role.AGENT)),
    ).values("id", "created_at", "handoff_at", "answers", "agent_replies", "csat_rating")
    rows = list(rows)
    for row in rows:
        day = by_day.get(span.day_of(row["created_at"]))
        report.conversations += 1
        if day:
            day.conversations += 1
        if _deflected(row):
            report.deflected += 1
            if day:
                day.deflected += 1
        if row["handoff_at"] is not None:
            report.handoffs += 1
            if day:
                day.handoffs += 1
        if row["csat_rating"] in report.csat:
            report.csat[row["csat_rating"]] += 1

    # Time to first human reply: from the handoff request to the first agent message written after it.
    handoffs = conversations.annotate(handoff_at=HANDOFF_AT).filter(handoff_at__isnull=False).values_list(
        "id", "handoff_at")
    requested = dict(handoffs)
    first_reply: dict = {}
    for conversation_id, at in messages.filter(
        conversation_id__in=requested, role=Message.Role.AGENT
    ).values_list("conversation_id", "created_at"):
        if at >= requested[conversation_id] and (conversation_id not in first_reply or at < first_reply[conversation_id]):
            first_reply[conversation_id] = at
    report.handoffs_replied = len(first_reply)
    report.first_human_reply_seconds = sorted(
        (at - requested[conversation_id]).total_seconds() for conversation_id, at in first_reply.items()
    )

    report.messages_by_role = _count_by(messages, "role", Message.Role.values)

    answers = messages.filter(role=Message.Role.ASSISTANT)
    report.thumbs_up = answers.filter(rating=1).count()
    report.thumbs_down = answers.filter(rating=-1).count()
    for products in answers.exclude(products=[]).values_list("products", flat=True):
        if products:
            report.cards_shown += len(products)
            report.answers_with_cards += 1
    report.card_clicks = CardClick.objects.filter(conversation__in=conversations).count()
    tokens = answers.filter(prompt_tokens__gt=0).aggregate(prompt=Sum("prompt_tokens"), cached=Sum("cached_tokens"))
    report.prompt_tokens = tokens["prompt"] or 0
    report.cached_tokens = tokens["cached"] or 0
    report.first_token_ms = sorted(answers.filter(first_token_ms__isnull=False).values_list("first_token_ms", flat=True))

    report.no_match, report.no_match_answers = _questions_answered_with(messages, NO_MATCH)
    report.not_understood, report.not_understood_answers = _questions_answered_with(messages, NOT_UNDERSTOOD)
    _order_figures(report, conversations, deflected={row["id"] for row in rows if _deflected(row)})
    return report


def _count_by(rows, column: str, values: list[str]) -> dict[str, int]:
    """How many of ``rows`` (a queryset) hold each value of ``column``, counted by the database in one query; each
    of ``values`` (the column's choices) is there, 0 where no row holds it."""
    return dict.fromkeys(values, 0) | dict(rows.values_list(column).annotate(n=Count("id")).values_list(column, "n"))


def _deflected(row: dict) -> bool:
    """Answered without a person: the assistant answered, nobody asked for a person and no agent wrote."""
    return bool(row["answers"]) and row["handoff_at"] is None and not row["agent_replies"]


def _order_figures(report: Report, conversations, deflected: set) -> None:
    """Order questions (a conversation the order tools worked in: ``ConversationOrder``), those answered without a
    person, and the return, exchange and cancellation requests by outcome."""
    states = ConversationOrder.objects.filter(conversation__in=conversations).values_list(
        "conversation_id", "verified_at")
    for conversation_id, verified_at in states:
        report.order_conversations += 1
        report.order_verified += verified_at is not None
        report.order_deflected += conversation_id in deflected
    requests = OrderRequest.objects.filter(conversation__in=conversations)
    report.order_requests = _count_by(requests, "status", OrderRequest.Status.values)


def _questions_answered_with(messages, kind: str) -> tuple[list[NoMatchGroup], int]:
    """The shoppers' messages answered with ``kind`` of reply, grouped, the largest groups first; and how many
    answers were of that kind."""
    fixed = list(
        messages.filter(role=Message.Role.ASSISTANT, kind=kind).values_list("conversation_id", "created_at")
    )
    if not fixed:
        return [], 0
    asked: dict = defaultdict(list)  # conversation -> [(at, text)] of the shopper's messages
    for conversation_id, at, text in messages.filter(
        conversation_id__in={c for c, _ in fixed}, role=Message.Role.USER
    ).values_list("conversation_id", "created_at", "text"):
        asked[conversation_id].append((at, text))
    groups: dict[str, dict] = {}
    for conversation_id, answered_at in fixed:
        before = [item for item in asked[conversation_id] if item[0] <= answered_at]
        if not before:
            continue
        at, question = max(before, key=lambda item: item[0])  # the message this reply answered
        key = normalise_question(question) or question.strip().lower()
        group = groups.setdefault(key, {"wordings": Counter(), "conversations": {}})
        group["wordings"][question.strip()] += 1
        group["conversations"][str(conversation_id)] = max(at, group["conversations"].get(str(conversation_id), at))
    result = [
        NoMatchGroup(
            key=key,
            # The most frequent wording; a tie goes to the first in alphabetical order, so the page is stable.
            text=min(group["wordings"].items(), key=lambda item: (-item[1], item[0]))[0],
            count=sum(group["wordings"].values()),
            conversations=[c for c, _ in sorted(group["conversations"].items(), key=lambda i: i[1], reverse=True)],
        )
        for key, group in groups.items()
    ]
    result.sort(key=lambda g: (-g.count, g.text.lower()))
    return result[:TOP_NO_MATCH], len(fixed)


# --- tables (the page and its CSV exports show the same rows) ----------------------------------------------


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


def _number(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


# How a figure that is not a plain count is written (a count is written as its number): the headline and the
# summary table read the same figures, so each is formatted in one place.
_FORMATS: dict[str, Callable[[Any], str]] = {
    "deflection_rate": _percent,
    "csat_satisfied": _percent,
    "click_through": _percent,
    "cache_share": _percent,
    "csat_average": lambda value: _number(value, 2),
    "median_first_human_reply": lambda value: _number(value, 0),
    "median_first_token_ms": lambda value: _number(value, 0),
}


def _figure(report: Report, name: str) -> str:
    """A figure by name: the report's attribute, or ``attribute.key``, one entry of a count by value."""
    attribute, _, key = name.partition(".")
    value = getattr(report, attribute)
    return _FORMATS.get(name, str)(value[key] if key else value)


# The page's key figures: the template's key -> the report's figure.
_HEADLINE = {
    "deflection": "deflection_rate",
    "first_human_reply": "median_first_human_reply",
    "csat_average": "csat_average",
    "csat_satisfied": "csat_satisfied",
    "click_through": "click_through",
    "cache_share": "cache_share",
    "first_token": "median_first_token_ms",
}
# The summary table, in its order: label -> the report's figure.
_SUMMARY = {
    "Conversations": "conversations",
    "Messages": "messages",
    "Shopper messages": "messages_by_role.user",
    "Assistant answers": "messages_by_role.assistant",
    "Agent messages": "messages_by_role.agent",
    "Answered without a person": "deflected",
    "Deflection rate": "deflection_rate",
    "Handoffs": "handoffs",
    "Handoffs with a human reply": "handoffs_replied",
    "Median time to first human reply (s)": "median_first_human_reply",
    "CSAT responses": "csat_responses",
    "CSAT average (1-5)": "csat_average",
    "CSAT satisfied (4-5)": "csat_satisfied",
    "Thumbs up": "thumbs_up",
    "Thumbs down": "thumbs_down",
    "Product cards shown": "cards_shown",
    "Answers with cards": "answers_with_cards",
    "Card clicks": "card_clicks",
    "Card click-through": "click_through",
    "Prompt tokens": "prompt_tokens",
    "Cached prompt tokens": "cached_tokens",
    "Prefix-cache share": "cache_share",
    "Median first-token time (ms)": "median_first_token_ms",
    "No-match replies": "no_match_answers",
    "Not-understood replies": "not_understood_answers",
    "Order conversations": "order_conversations",
    "Order conversations verified": "order_verified",
    "Order conversations answered without a person": "order_deflected",
    "Order requests pending": "order_requests.pending",
    "Order requests accepted": "order_requests.accepted",
    "Order requests declined": "order_requests.declined",
}


def headline(report: Report) -> dict[str, str]:
    """The page's key figures, formatted as the summary table and its CSV write them."""
    return {key: _figure(report, name) for key, name in _HEADLINE.items()}


def summary_rows(report: Report) -> list[tuple[str, str]]:
    return [(label, _figure(report, name)) for label, name in _SUMMARY.items()]


DAILY_HEADER = ("Day", "Conversations", "Answered without a person", "Handoffs")
CSAT_HEADER = ("Rating", "Responses")
NO_MATCH_HEADER = ("Question", "Times asked", "Conversations")


def daily_rows(report: Report) -> list[tuple[str, int, int, int]]:
    return [(d.day.isoformat(), d.conversations, d.deflected, d.handoffs) for d in report.days]


def csat_rows(report: Report) -> list[tuple[int, int]]:
    return [(score, report.csat[score]) for score in range(1, 6)]


def no_match_rows(report: Report) -> list[tuple[str, int, str]]:
    return [(g.text, g.count, " ".join(g.conversations)) for g in report.no_match]


def not_understood_rows(report: Report) -> list[tuple[str, int, str]]:
    return [(g.text, g.count, " ".join(g.conversations)) for g in report.not_understood]
