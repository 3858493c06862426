"""No node holds a conversation hostage: what a session needs to resume is in the token or the database.

"Another node" is a fresh ``ChatSession`` after this process's draft registry is emptied: nothing the first
session held in memory is there any more, as on a second daphne process.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core import signing

from catalog.models import Store
from shop_assistant.chat.log import handoff
from shop_assistant.chat.log.conversations import drafts, resume_conversation
from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.protocol.session import INTERRUPTED_NOTICE, ChatSession
from shop_assistant.chat.log.tasks import record_message
from shop_assistant.chat.log.writes import MessageRecord, write_message


def forget_process_state() -> None:
    """What a node that never saw the conversation knows about drafts: nothing."""
    drafts._by_id.clear()
    drafts._by_hash.clear()


async def open_session(token: str | None = None, store: str = "s") -> tuple[ChatSession, list[dict[str, Any]]]:
    frames: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        frames.append(frame)

    session = await ChatSession.open(store_slug=store, resume_token=token, send=send)
    assert session is not None
    return session, frames


@pytest.fixture
def store(transactional_db, settings, tmp_path) -> Store:
    settings.CHAT_SPOOL_DIR = tmp_path / "spool"
    Store.objects.create(slug="other", name="Other")
    return Store.objects.create(slug="s", name="S")


def _count(model: Any, **filters: Any) -> int:
    return model.objects.filter(**filters).count()


async def test_a_draft_opened_on_one_node_is_resumed_on_another(store):
    first, _ = await open_session()
    ready = first.ready_frame()
    token = ready["resume_token"]
    assert await database_sync_to_async(_count)(Conversation) == 0  # nothing stored on connect

    forget_process_state()
    second, _ = await open_session(token)
    assert second.conversation is not first.conversation
    assert second.conversation.id == first.conversation.id
    assert second.ready_frame()["conversation"] == ready["conversation"]
    assert second.history == []
    assert await database_sync_to_async(_count)(Conversation) == 0  # resuming reads only

    # The first message, said on the second node, makes the row the token finds from then on.
    await database_sync_to_async(record_message)(MessageRecord(second.conversation.id, "user", "hello"))
    forget_process_state()
    third, _ = await open_session(token)
    assert not third.conversation._state.adding
    assert third.conversation.id == first.conversation.id
    assert [m.text for m in third.history] == ["hello"]

    # The token belongs to its store: asked for with another store, it starts a new conversation.
    elsewhere, _ = await open_session(token, store="other")
    assert elsewhere.conversation.id != first.conversation.id


def test_a_forged_or_tampered_token_resumes_nothing(store):
    forget_process_state()
    forged = signing.dumps([uuid.uuid4().hex, store.pk, "x"], salt="another purpose")
    assert resume_conversation(forged, None) is None
    real = signing.dumps([uuid.uuid4().hex, store.pk, "secret"], salt="shop_assistant.chat.draft")
    assert resume_conversation(real, "s") is not None
    value, signature = real.rsplit(":", 1)
    tampered = f"{value}:{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BB'}"
    assert resume_conversation(tampered, "s") is None
    assert resume_conversation("not a token", "s") is None


async def test_handoff_state_is_readable_from_another_node(store):
    first, _ = await open_session()
    token = first.resume_token
    # As the first message's planning does: the shopper asks for a person before the row exists.
    await database_sync_to_async(handoff.request_handoff)(first.conversation)
    await database_sync_to_async(record_message)(MessageRecord(first.conversation.id, "user", "a human please"))

    forget_process_state()
    second, _ = await open_session(token)
    assert second.conversation.status == Conversation.Status.HANDOFF
    assert second.conversation.handoff_requested_at is not None

    # An agent takes it (the console's write): the next node sees the person, and a late draft write from the
    # first node does not turn the conversation back into a handoff.
    await database_sync_to_async(Conversation.objects.filter(pk=first.conversation.id).update)(
        status=Conversation.Status.AGENT
    )
    await database_sync_to_async(record_message)(MessageRecord(first.conversation.id, "user", "still there?"))
    forget_process_state()
    third, _ = await open_session(token)
    assert third.conversation.status == Conversation.Status.AGENT


async def test_an_answer_cut_by_a_dead_node_is_ended_as_interrupted_on_resume(store):
    first, _ = await open_session()
    answer_id = uuid.uuid4()
    # What the first node records as an answer starts; then it dies: the answer's own write never comes.
    await database_sync_to_async(record_message)(
        MessageRecord(first.conversation.id, "user", "Do you sell tents?", answer_id=answer_id)
    )
    pending = await database_sync_to_async(Message.objects.get)(pk=answer_id)
    assert (pending.role, pending.text, pending.finish_reason) == ("assistant", "", "")

    forget_process_state()
    second, _ = await open_session(first.resume_token)
    await second.settle_answers()  # nobody in the conversation's group writes it: no reply to the probe
    history = second.ready_frame()["history"]
    assert all(item.pop("at") for item in history)  # when each was said (the widget shows the time)
    assert history == [
        {"role": "user", "text": "Do you sell tents?"},
        # Every assistant item names its message (for thumbs and card clicks after a reload).
        {"role": "assistant", "message_id": str(answer_id), "text": "", "interrupted": True, "notice": INTERRUPTED_NOTICE},
    ]
    assert [turn.role for turn in second.turns] == ["user"]  # the cut answer adds nothing to the prompt
    ended = await database_sync_to_async(Message.objects.get)(pk=answer_id)
    assert ended.finish_reason == Message.FinishReason.INTERRUPTED
    assert await database_sync_to_async(_count)(Message, role="user", text="Do you sell tents?") == 1


def test_an_answer_s_own_write_wins_whatever_the_order(store):
    conversation = Conversation.objects.create(store=store, resume_token_hash="h" * 64)
    for order in ("pending first", "answer first"):
        answer_id = uuid.uuid4()
        question = MessageRecord(conversation.id, "user", f"q {order}", answer_id=answer_id).payload()
        final = MessageRecord(conversation.id, "assistant", "Yes.", id=answer_id, finish_reason="stop").payload()
        for payload in ([question, final] if order == "pending first" else [final, question]):
            write_message(payload)
        write_message(question)  # a redelivered task
        answer = Message.objects.get(pk=answer_id)
        assert (answer.text, answer.finish_reason) == ("Yes.", "stop"), order
    # Ended as interrupted by another node while this one was alive after all: its answer replaces the ending.
    answer_id = uuid.uuid4()
    write_message(MessageRecord(conversation.id, "user", "late", answer_id=answer_id).payload())
    Message.objects.filter(pk=answer_id, finish_reason="").update(finish_reason="interrupted")
    write_message(MessageRecord(conversation.id, "assistant", "Here.", id=answer_id, finish_reason="stop").payload())
    assert Message.objects.get(pk=answer_id).finish_reason == "stop"
