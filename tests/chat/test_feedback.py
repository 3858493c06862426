"""The shopper's side of issue 24 over the websocket: what `ready` replays (suggestions, status, quotes, thumbs,
the rating), and the frames the widget sends about the chat itself (`rate`, `csat`, `email`, `card_click`), each
validated: bad input gets an `error` frame, nothing is stored, and the connection goes on."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone

from catalog.models import Store
from shop_assistant.chat.models import AnswerSettings, CardClick, Conversation, Message
from shop_assistant.chat.log.conversations import new_conversation
from shop_assistant.chat.log.writes import MessageRecord, write_message
from shop_assistant.console import services
from shop_assistant.demo.store import SAMPLE_QUESTIONS, load_demo_store

QUOTE = {"title": "Returns and refunds", "text": "You can return unused items within 30 days of delivery."}


@pytest.fixture
def shop(transactional_db) -> Store:
    """The demo store without embeddings (nothing here searches the catalog)."""
    return load_demo_store(embed=False, password="x").store


def _conversation_with_an_answer(store: Store, status: str = Conversation.Status.BOT) -> tuple[Conversation, str, Message]:
    conversation, token = new_conversation(store)
    Conversation.objects.filter(pk=conversation.pk).update(status=status)
    now = timezone.now()
    Message.objects.create(conversation=conversation, role="user", text="What is your return policy?", created_at=now)
    variant = store.variants.order_by("pk").first()
    card = {"sku": variant.sku, "title": variant.product.title, "price": str(variant.price), "currency": "USD",
            "url": "", "image": "", "in_stock": True}  # fmt: skip
    answer = Message.objects.create(
        conversation=conversation, role="assistant", text="Returns are free.", quotes=[QUOTE], products=[card],
        finish_reason="stop", rating=-1, created_at=now + timedelta(seconds=1),
    )  # fmt: skip
    conversation.refresh_from_db()
    return conversation, token, answer


async def _expect_error(client, frame: dict, code: str) -> dict:
    await client.send(frame)
    reply = await client.receive(10)
    assert reply["type"] == "error" and reply["code"] == code, reply
    return reply


async def test_a_new_conversation_is_ready_with_the_greeting_suggestions_and_status(shop, ws):
    client = await ws()
    ready = client.ready
    assert ready["store"]["greeting"]
    assert ready["suggestions"] == list(SAMPLE_QUESTIONS)  # the studio's sample questions of the demo store
    assert ready["status"] == "bot" and ready["csat"] is None and ready["ask_email"] is None


async def test_a_resumed_conversation_replays_quotes_thumbs_status_and_no_suggestions(shop, ws):
    conversation, token, answer = await database_sync_to_async(_conversation_with_an_answer)(
        shop, Conversation.Status.HANDOFF
    )
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    ready = client.ready
    assert ready["status"] == "handoff"
    assert ready["suggestions"] == []  # the shopper has said something
    user, assistant = ready["history"]
    assert "message_id" not in user
    assert assistant["message_id"] == str(answer.id)
    assert assistant["quotes"] == [QUOTE] and assistant["rating"] == -1 and assistant["products"]
    # Issue 40: every item says when it was said (the widget shows it in the shopper's local time).
    assert assistant["at"] == answer.created_at.isoformat()
    assert user["at"] < assistant["at"]


def test_an_answer_s_quotes_are_stored_when_it_is_written(shop):
    conversation, _, _ = _conversation_with_an_answer(shop)
    record = MessageRecord(conversation.id, "assistant", "Thirty days.", quotes=[QUOTE], finish_reason="stop")
    write_message(record.payload())
    assert Message.objects.get(pk=record.id).quotes == [QUOTE]


async def test_thumbs_are_stored_changed_and_taken_back(shop, ws):
    conversation, token, answer = await database_sync_to_async(_conversation_with_an_answer)(shop)
    other, _, foreign = await database_sync_to_async(_conversation_with_an_answer)(shop)
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    rating = lambda pk: Message.objects.get(pk=pk).rating  # noqa: E731

    for value, stored in ((1, 1), (-1, -1), (0, None)):
        await client.send({"type": "rate", "message_id": str(answer.id), "value": value})
        assert await client.receive(10) == {"type": "rated", "message_id": str(answer.id), "value": value}
        assert await database_sync_to_async(rating)(answer.id) == stored

    await _expect_error(client, {"type": "rate", "message_id": str(answer.id), "value": 2}, "bad_frame")
    await _expect_error(client, {"type": "rate", "message_id": str(answer.id), "value": True}, "bad_frame")
    await _expect_error(client, {"type": "rate", "message_id": "not-an-id", "value": 1}, "bad_frame")
    await _expect_error(client, {"type": "rate", "value": 1}, "bad_frame")
    await _expect_error(client, {"type": "rate", "message_id": str(uuid.uuid4()), "value": 1}, "unknown_message")
    # Another shopper's answer is not this conversation's to rate.
    await _expect_error(client, {"type": "rate", "message_id": str(foreign.id), "value": 1}, "unknown_message")
    assert await database_sync_to_async(rating)(foreign.id) == -1
    # The connection is still usable.
    await client.send({"type": "rate", "message_id": str(answer.id), "value": 1})
    assert (await client.receive(10))["type"] == "rated"


async def test_resolving_ends_the_conversation_and_the_shopper_rates_it(shop, ws):
    conversation, token, _ = await database_sync_to_async(_conversation_with_an_answer)(shop)
    agent = await database_sync_to_async(get_user_model().objects.get)(username="staff")
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    other_tab = await ws(f"/ws/chat/?store=demo&resume={token}")

    await _expect_error(client, {"type": "csat", "rating": 5}, "not_closed")  # not resolved yet
    await database_sync_to_async(services.close)(agent, conversation.pk)
    assert await client.receive(10) == {"type": "conversation_ended", "csat": None, "by": "agent"}
    assert await other_tab.receive(10) == {"type": "conversation_ended", "csat": None, "by": "agent"}

    for bad in ({"rating": 0}, {"rating": 6}, {"rating": "5"}, {"rating": True}, {"rating": 4.5}, {},
                {"rating": 4, "comment": 7}, {"rating": 4, "comment": "x" * 2001}):  # fmt: skip
        await _expect_error(client, {"type": "csat", **bad}, "bad_frame")
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert row.csat_rating is None

    await client.send({"type": "csat", "rating": 4, "comment": "  Quick and kind.  "})
    assert await client.receive(10) == {"type": "csat_saved", "rating": 4, "comment": "Quick and kind."}
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert (row.csat_rating, row.csat_comment, row.status) == (4, "Quick and kind.", "closed")
    assert row.csat_at is not None

    # A reload shows the ended conversation and the rating given.
    again = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert again.ready["status"] == "closed" and again.ready["csat"] == {"rating": 4, "comment": "Quick and kind."}


async def test_the_shopper_ends_the_chat_as_an_agent_resolves_it_rates_it_and_starts_a_new_one(shop, ws):
    """Issue 40: only an agent's resolve ended a chat (an `end` frame was an unknown type). The shopper's `end`
    closes the conversation through the console's own close (``closing.close``): every tab hears it, the person
    who had it leaves, the console's activity says the shopper ended it, the rating is accepted; a new chat (the
    widget connects without the token) is a new conversation, and the ended one stays resolved."""
    conversation, token, _ = await database_sync_to_async(_conversation_with_an_answer)(shop)
    agent = await database_sync_to_async(get_user_model().objects.get)(username="staff")
    await database_sync_to_async(services.take_over)(agent, conversation.pk)
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert await client.receive(10) == {"type": "agent_joined", "agent": "staff"}
    other_tab = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert await other_tab.receive(10) == {"type": "agent_joined", "agent": "staff"}

    await client.send({"type": "end"})
    assert await client.receive(10) == {"type": "conversation_ended", "csat": None, "by": "shopper"}
    seen = [await other_tab.receive(10), await other_tab.receive(10)]
    assert seen == [{"type": "agent_left", "agent": "staff"},
                    {"type": "conversation_ended", "csat": None, "by": "shopper"}]
    frames = [await client.receive(10)]  # the agent leaves; the group's echo of the close is not sent twice
    assert frames == [{"type": "agent_left", "agent": "staff"}]
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert row.status == "closed"

    def activity():
        from shop_assistant.console.models import Action

        action = Action.objects.filter(conversation=conversation, kind="close").get()
        return services.activity_row(action)

    row_ = await database_sync_to_async(activity)()
    assert (row_["by"], row_["text"]) == ("Shopper", "Close (the shopper ended the chat)")

    await client.send({"type": "end"})  # ended already: said again, nothing logged twice
    assert (await client.receive(10))["type"] == "conversation_ended"
    await client.send({"type": "csat", "rating": 5, "comment": ""})
    assert await client.receive(10) == {"type": "csat_saved", "rating": 5, "comment": ""}
    assert await database_sync_to_async(activity)()  # still one close

    fresh = await ws("/ws/chat/?store=demo")  # "Start a new chat": the widget drops the token
    assert fresh.ready["conversation"] != str(conversation.pk) and fresh.ready["status"] == "bot"
    assert fresh.ready["history"] == [] and fresh.ready["csat"] is None
    await fresh.send({"type": "end"})  # nothing said yet: nothing to end
    assert (await fresh.receive(10))["code"] == "not_started"
    again = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert again.ready["status"] == "closed" and again.ready["csat"] == {"rating": 5, "comment": ""}


async def test_an_email_is_validated_and_stored_on_the_conversation(shop, ws):
    conversation, token, _ = await database_sync_to_async(_conversation_with_an_answer)(
        shop, Conversation.Status.HANDOFF
    )
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    for bad in ("not an email", "a@", "x" * 250 + "@example.com", "<script>@x.com"):
        await _expect_error(client, {"type": "email", "email": bad}, "invalid_email")
    await _expect_error(client, {"type": "email", "email": 42}, "bad_frame")
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert row.shopper_email == ""

    await client.send({"type": "email", "email": " sam@example.com "})
    saved = await client.receive(10)
    assert saved["type"] == "email_saved" and saved["email"] == "sam@example.com"
    assert "sam@example.com" in saved["message"]
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation.pk)
    assert row.shopper_email == "sam@example.com"

    # A conversation where nothing was said has no row to keep it on.
    fresh = await ws()
    await _expect_error(fresh, {"type": "email", "email": "sam@example.com"}, "not_saved")


async def test_a_card_click_is_recorded_with_its_product(shop, ws):
    conversation, token, answer = await database_sync_to_async(_conversation_with_an_answer)(shop)
    client = await ws(f"/ws/chat/?store=demo&resume={token}")
    sku = answer.products[0]["sku"]

    await _expect_error(client, {"type": "card_click", "message_id": str(answer.id), "sku": "NOT-SHOWN"}, "unknown_message")
    await _expect_error(client, {"type": "card_click", "message_id": "x", "sku": sku}, "bad_frame")
    await _expect_error(client, {"type": "card_click", "message_id": str(answer.id)}, "bad_frame")
    assert await database_sync_to_async(CardClick.objects.count)() == 0

    await client.send({"type": "card_click", "message_id": str(answer.id), "sku": sku})
    await client.send({"type": "rate", "message_id": str(answer.id), "value": 1})  # answered: the click is done
    assert (await client.receive(10))["type"] == "rated"
    click = await database_sync_to_async(CardClick.objects.get)()
    assert click.conversation_id == conversation.pk and click.message_id == answer.id
    assert await database_sync_to_async(shop.variants.get)(sku=sku, product_id=click.product_id)


async def test_unknown_frame_types_still_get_unknown_type(shop, ws):
    client = await ws()
    reply = await _expect_error(client, {"type": "vote"}, "unknown_type")
    assert "card_click" in reply["message"]


async def test_a_handoff_out_of_hours_says_when_agents_are_back_and_asks_for_an_email(
    chat_engine, chat_settings, shop, ws
):
    now = timezone.now()
    # Hours that exclude the present moment: opening in two hours, closing in three (every day).
    opens, closes = (now + timedelta(hours=2)).strftime("%H:00"), (now + timedelta(hours=3)).strftime("%H:00")
    hours = {"timezone": "UTC", "open": opens, "close": closes}
    await database_sync_to_async(AnswerSettings.objects.update_or_create)(store=shop, defaults={"support_hours": hours})

    client = await ws()
    await client.send({"type": "message", "text": "Can I talk to a person?"})
    from .conftest import collect_answer

    answer = await collect_answer(client.receive)
    assert answer.end["reply"] == "handoff"
    assert answer.end["ask_email"].startswith(f"{opens} ") and "(UTC)" in answer.end["ask_email"]
    assert answer.end["ask_email"] in answer.text  # the reply says the same time
    conversation_id = client.ready["conversation"]

    # A reload still offers the email field, until one is given.
    token = client.ready["resume_token"]
    again = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert again.ready["status"] == "handoff" and again.ready["ask_email"] == answer.end["ask_email"]
    await again.send({"type": "email", "email": "sam@example.com"})
    assert (await again.receive(10))["type"] == "email_saved"
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    assert row.shopper_email == "sam@example.com"
    third = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert third.ready["ask_email"] is None


async def test_a_handoff_in_hours_asks_for_no_email(chat_engine, chat_settings, shop, ws):
    # agents always there
    await database_sync_to_async(AnswerSettings.objects.update_or_create)(store=shop, defaults={"support_hours": {}})
    client = await ws()
    answer = await client.ask("Can I talk to a person?")
    assert answer.end["reply"] == "handoff" and "ask_email" not in answer.end
