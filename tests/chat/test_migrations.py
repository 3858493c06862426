"""chat's data migrations (shop_assistant/chat/migrations/): 0011 keeps what kind of answer each message was, and
classifies the answers logged before it once, with the English rule analytics read until then; 0012 moves the
store's answer and widget settings off catalog.Store, and back when reversed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

BEFORE = ("chat", "0010_conversation_first_handoff_requested_at")
AFTER = ("chat", "0011_message_kind")


def migrate(target: tuple[str, str] | None):
    """To ``target`` (None: the latest of every app); the apps as they are there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    targets = [target] if target else executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)  # the migration executor runs outside the test's transaction
def test_0011_marks_old_no_match_replies_and_leaves_every_other_answer_blank():
    try:
        check_0011()
    finally:
        migrate(None)  # the next tests run on the latest schema whatever happened


def check_0011() -> None:
    apps = migrate(BEFORE)
    Store, Conversation, Message = (apps.get_model(*name.split(".")) for name in ("catalog.Store", "chat.Conversation", "chat.Message"))
    plain = Store.objects.create(slug="plain", name="Plain")
    own = Store.objects.create(slug="own", name="Own", no_match_reply="We only sell outdoor gear.")
    at = dt.datetime(2026, 11, 2, 10, tzinfo=dt.UTC)
    rows = {
        "built in": (plain, "Sorry, we don't carry kayaks. Our categories are tents.", "no_match"),
        "fallback": (plain, "Sorry, I couldn't find that in our catalog. Try other words.", "no_match"),
        "own": (own, "We only sell outdoor gear.", "no_match"),
        "built in, for a store with its own": (own, "Sorry, we don't carry kayaks.", ""),
        "handoff": (plain, "A member of our team will be with you shortly.", ""),
        "spanish": (plain, "Lo siento, no he encontrado eso en nuestro catálogo.", ""),  # the old rule never read it
    }
    ids = {}
    for n, (name, (store, text, _)) in enumerate(rows.items()):
        conversation = Conversation.objects.create(store=store, resume_token_hash=f"{n:064d}")
        ids[name] = Message.objects.create(conversation=conversation, role="assistant", text=text,
                                           finish_reason="fixed", created_at=at).pk
    model_answer = Message.objects.create(conversation=conversation, role="assistant", finish_reason="stop",
                                          text="Sorry, we don't carry kayaks, but...", created_at=at).pk
    Message = migrate(AFTER).get_model("chat", "Message")
    kinds = dict(Message.objects.values_list("pk", "kind"))
    assert {name: kinds[pk] for name, pk in ids.items()} == {name: kind for name, (_, _, kind) in rows.items()}
    assert kinds[model_answer] == ""


# Before catalog 0007_store_widget_key_not_unique: the owner's settings still on catalog.Store, its widget key unique (chat 0012's neighbours:
# catalog 0007 lets the key go unique-less for the move, catalog 0008 removes the old columns).
SETTINGS_BEFORE = ("catalog", "0007_search_synonyms")


@pytest.mark.django_db(transaction=True)
def test_0012_moves_the_answer_and_widget_settings_off_the_store_and_back():
    try:
        check_0012()
    finally:
        migrate(None)


def check_0012() -> None:
    Store = migrate(SETTINGS_BEFORE).get_model("catalog", "Store")
    hours = {"timezone": "Europe/Berlin", "weekdays": [0, 1], "open": "09:00", "close": "17:00"}
    own = {
        "greeting": "Welcome!", "no_match_reply": "Outdoor gear only.", "handoff_reply": "Getting someone.",
        "model_text": "off", "opening_templates": {"product": ["The {product}: {price}."]}, "support_hours": hours,
        "answer_max_tokens": 90, "temperature": 0.4, "repetition_penalty": 1.2, "frequency_penalty": 0.1,
        "presence_penalty": 0.05,
    }
    shaped = Store.objects.create(slug="own", name="Own", widget_allowed_origins="https://own.example", **own)
    plain = Store.objects.create(slug="plain", name="Plain")
    keys = {store.pk: store.widget_key for store in (shaped, plain)}
    assert len(set(keys.values())) == 2

    apps = migrate(None)
    AnswerSettings, WidgetSettings = apps.get_model("chat", "AnswerSettings"), apps.get_model("chat", "WidgetSettings")
    assert {name: getattr(AnswerSettings.objects.get(store_id=shaped.pk), name) for name in own} == own
    defaults = AnswerSettings.objects.get(store_id=plain.pk)
    assert (defaults.greeting, defaults.model_text, defaults.support_hours, defaults.temperature) == ("", "checked", {}, None)
    assert {row.store_id: row.key for row in WidgetSettings.objects.all()} == keys  # signed identities stay valid
    assert WidgetSettings.objects.get(store_id=shaped.pk).allowed_origins == "https://own.example"
    columns = {field.name for field in apps.get_model("catalog", "Store")._meta.concrete_fields}
    assert columns.isdisjoint({*own, "widget_allowed_origins", "widget_key"}) and "cache_salt" in columns
    AnswerSettings.objects.filter(store_id=plain.pk).update(greeting="Hello there")  # changed after the move
    # A store made after the move whose settings were never read has no rows: it goes back with the defaults.
    later = apps.get_model("catalog", "Store").objects.create(slug="later", name="Later").pk

    Store = migrate(SETTINGS_BEFORE).get_model("catalog", "Store")
    back = Store.objects.get(pk=shaped.pk)
    assert {name: getattr(back, name) for name in own} == own
    assert (back.widget_allowed_origins, back.widget_key) == ("https://own.example", keys[shaped.pk])
    assert Store.objects.get(pk=plain.pk).greeting == "Hello there"
    assert Store.objects.get(pk=plain.pk).widget_key == keys[plain.pk]
    fresh = Store.objects.get(pk=later)
    assert fresh.greeting == "" and fresh.widget_key.startswith("pk_") and fresh.widget_key not in keys.values()
    with pytest.raises(IntegrityError), transaction.atomic():  # unique again
        Store.objects.filter(pk=later).update(widget_key=keys[plain.pk])
