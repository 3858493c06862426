"""shop_assistant.chat.log.handoff: recognising a request for a person, the reply, support hours, the record."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from catalog.models import Store
from shop_assistant.chat.log.handoff import (
    DEFAULT_REPLY,
    asks_for_person,
    next_opening,
    reply_for,
    request_handoff,
)
from shop_assistant.chat.models import AnswerSettings, Conversation

BERLIN_OFFICE = {"timezone": "Europe/Berlin", "weekdays": [0, 1, 2, 3, 4], "open": "09:00", "close": "17:00"}
# 2026-12-01 is a Tuesday; Berlin is UTC+1 in December.
TUESDAY_NOON_BERLIN = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
TUESDAY_NIGHT_BERLIN = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)
SATURDAY_BERLIN = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "Can I talk to a person?",
        "I want to speak to a human agent please.",
        "Can I talk to someone from customer service?",
        "I'd like to talk to a real person.",
        "connect me with an agent",
        "human",
        "Let me chat with a live agent",
    ],
)
def test_requests_for_a_person(text):
    assert asks_for_person(text)


@pytest.mark.parametrize(
    "text",
    ["Do you have a two person tent?", "What is your return policy?", "Which jacket is best for rain?",
     "Do you sell people-friendly hammocks?"],
)
def test_ordinary_questions_are_not_handoffs(text):
    assert not asks_for_person(text)


def test_support_hours_decide_when_agents_are_back():
    assert next_opening({}, TUESDAY_NIGHT_BERLIN) is None  # no hours: always reachable
    assert next_opening(BERLIN_OFFICE, TUESDAY_NOON_BERLIN) is None
    back = next_opening(BERLIN_OFFICE, TUESDAY_NIGHT_BERLIN)
    assert (back.date().isoformat(), back.hour, back.minute) == ("2026-12-02", 9, 0)
    monday = next_opening(BERLIN_OFFICE, SATURDAY_BERLIN)
    assert (monday.date().isoformat(), monday.weekday()) == ("2026-12-07", 0)


def test_reply_inside_and_outside_support_hours():
    store = Store(name="Shop", slug="shop")
    own = AnswerSettings(store=store, support_hours=BERLIN_OFFICE)
    assert reply_for(store, TUESDAY_NOON_BERLIN) == DEFAULT_REPLY
    away = reply_for(store, TUESDAY_NIGHT_BERLIN)
    assert "agents are back at 09:00 tomorrow (Europe/Berlin)" in away
    assert "back at 09:00 Monday" in reply_for(store, SATURDAY_BERLIN)
    own.handoff_reply = "Hold on, a colleague is coming."
    assert reply_for(store, TUESDAY_NOON_BERLIN) == "Hold on, a colleague is coming."
    assert reply_for(store, TUESDAY_NIGHT_BERLIN).startswith("Hold on, a colleague is coming. Our team is away")


@pytest.mark.django_db
def test_request_is_recorded_once_and_an_agent_keeps_the_chat():
    store = Store.objects.create(name="Shop", slug="shop")
    conversation = Conversation.objects.create(store=store, resume_token_hash="x" * 64)
    request_handoff(conversation, TUESDAY_NOON_BERLIN)
    request_handoff(conversation, TUESDAY_NIGHT_BERLIN)
    saved = Conversation.objects.get(pk=conversation.pk)
    assert saved.status == "handoff" and saved.handoff_requested_at == TUESDAY_NOON_BERLIN

    saved.status = Conversation.Status.AGENT
    saved.save()
    request_handoff(saved)
    assert Conversation.objects.get(pk=conversation.pk).status == "agent"


DATA = Path(__file__).parent / "data"


def _accuracy(name: str) -> tuple[float, float, list[str], list[str]]:
    phrasings = json.loads((DATA / name).read_text(encoding="utf-8"))
    missed = [text for text in phrasings["requests"] if not asks_for_person(text)]
    false = [text for text in phrasings["others"] if asks_for_person(text)]
    recall = 1 - len(missed) / len(phrasings["requests"])
    specificity = 1 - len(false) / len(phrasings["others"])
    return recall, specificity, missed, false


def test_held_out_phrasings_are_recognised_both_ways():
    """Issue 40: "Can a human help me?", "Is there anyone I can chat with?" and "agent please" were answered by
    the bot. The held-out list (50 requests, 50 messages that only mention people, English and Spanish) must be
    at least 95% right both ways."""
    phrasings = json.loads((DATA / "handoff_heldout.json").read_text(encoding="utf-8"))
    assert len(phrasings["requests"]) >= 40 and len(phrasings["others"]) >= 40
    recall, specificity, missed, false = _accuracy("handoff_heldout.json")
    assert recall >= 0.95, missed
    assert specificity >= 0.95, false


def test_development_phrasings_stay_recognised():
    recall, specificity, missed, false = _accuracy("handoff_development.json")
    assert recall >= 0.95, missed
    assert specificity >= 0.95, false


@pytest.mark.parametrize("text", ["Can a human help me?", "Is there anyone I can chat with?", "agent please"])
def test_the_issues_phrasings(text):
    assert asks_for_person(text)


@pytest.mark.parametrize(
    "text",
    ["Ich möchte mit einem Mitarbeiter sprechen", "Kann ich mit einem Menschen reden?",
     "Verbinden Sie mich bitte mit einem Berater", "Je voudrais parler à un conseiller",
     "Est-ce que je peux parler à quelqu'un ?", "Mettez-moi en relation avec un humain",
     "I need someone from your support team about a broken zipper"],
)
def test_french_german_and_someone_from_the_team_are_requests(text):
    assert asks_for_person(text)


@pytest.mark.parametrize(
    "text",
    ["Avez-vous une tente pour quatre personnes ?", "Habt ihr ein Zelt für vier Personen?",
     "Ich suche ein Geschenk für jemanden, der wandert", "Je cherche une lampe pour quelqu'un qui court",
     "Sprechen Sie Deutsch?", "someone from the team recommended this tent",
     "Le service client est-il ouvert le dimanche ?"],
)
def test_french_and_german_mentions_of_people_are_not_requests(text):
    assert not asks_for_person(text)


def test_recognising_is_fast():
    """It runs for every message: well under a millisecond each."""
    phrasings = json.loads((DATA / "handoff_heldout.json").read_text(encoding="utf-8"))
    texts = phrasings["requests"] + phrasings["others"]
    started = time.perf_counter()
    for _ in range(10):
        for text in texts:
            asks_for_person(text)
    assert (time.perf_counter() - started) / (10 * len(texts)) < 0.001


# --- the reply in the shopper's language (composed under translation.override; the pipeline sets it) ---


@pytest.mark.parametrize(
    ("language", "now", "back"),
    [
        ("es", TUESDAY_NIGHT_BERLIN, "vuelve mañana a las 09:00 (Europe/Berlin)"),
        ("fr", SATURDAY_BERLIN, "elle revient lundi à 09:00 (Europe/Berlin)"),  # Django's own weekday names
        ("de", SATURDAY_BERLIN, "Es ist am Montag um 09:00 Uhr (Europe/Berlin) wieder erreichbar."),
    ],
)
def test_the_handoff_reply_in_the_shoppers_language(language, now, back):
    from django.utils import translation

    from catalog.language import detect

    store = Store(name="Shop", slug="shop")
    answers = AnswerSettings(store=store, support_hours=BERLIN_OFFICE)
    with translation.override(language):
        present, away = reply_for(store, TUESDAY_NOON_BERLIN), reply_for(store, now)
        answers.handoff_reply = "Hold on, a colleague is coming."
        own = reply_for(store, TUESDAY_NOON_BERLIN)
    assert present != DEFAULT_REPLY and detect(present) == language and detect(away) == language
    assert back in away
    assert own == "Hold on, a colleague is coming."  # the store's words are its own
    with translation.override("en"):
        answers.handoff_reply = ""
        assert reply_for(store, TUESDAY_NOON_BERLIN) == DEFAULT_REPLY
        assert "agents are back at 09:00 tomorrow (Europe/Berlin)" in reply_for(store, TUESDAY_NIGHT_BERLIN)
