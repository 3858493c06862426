"""The retention job and transcript rendering."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from shop_assistant.chat.models import Conversation, Message
from shop_assistant.console import transcripts
from shop_assistant.console.models import Note, RetentionSettings
from shop_assistant.console.tasks import apply_retention

from .conftest import add_message, make_conversation

pytestmark = pytest.mark.django_db


def test_retention_deletes_only_what_is_older_than_the_stores_setting(world):
    RetentionSettings.objects.create(store=world.store_a, retention_days=30)
    now = timezone.now()
    old = make_conversation(world.store_a)
    add_message(old, "user", "old")
    Note.objects.create(conversation=old, text="note")
    fresh = make_conversation(world.store_a)
    kept_forever = make_conversation(world.store_b)  # store_b keeps everything (retention_days null)
    Conversation.objects.filter(pk__in=[old.pk, kept_forever.pk]).update(last_activity_at=now - dt.timedelta(days=31))
    Conversation.objects.filter(pk=fresh.pk).update(last_activity_at=now - dt.timedelta(days=29))

    assert apply_retention.delay().get() == {"alpha": 1}  # through Celery (eager here), as beat runs it
    assert set(Conversation.objects.values_list("pk", flat=True)) == {fresh.pk, kept_forever.pk}
    assert not Message.objects.filter(text="old").exists() and not Note.objects.exists()
    assert apply_retention() == {}


def test_the_beat_schedule_runs_retention():
    from django.conf import settings

    assert any(entry["task"] == "console.apply_retention" for entry in settings.CELERY_BEAT_SCHEDULE.values())


def test_transcripts_json_and_progress(world):
    c = make_conversation(world.store_a)
    add_message(c, "user", "Hello")
    add_message(c, "agent", "Hi, Dana here", agent="Dana")
    calls = []
    body = transcripts.render(
        transcripts.conversations_in_range([world.store_a.pk], None, None), "json", lambda d, t: calls.append((d, t))
    )
    data = json.loads(body)["conversations"]
    assert [(m["role"], m["agent"], m["text"]) for m in data[0]["messages"]] == [
        ("user", "", "Hello"), ("agent", "Dana", "Hi, Dana here")]
    assert calls == [(1, 1)]
    tomorrow = (timezone.now() + dt.timedelta(days=1)).date()
    assert transcripts.conversations_in_range([world.store_a.pk], tomorrow, None).count() == 0
