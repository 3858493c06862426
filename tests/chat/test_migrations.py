"""chat's data migrations (shop_assistant/chat/migrations/): 0011 keeps what kind of answer each message was, and
classifies the answers logged before it once, with the English rule analytics read until then."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
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
