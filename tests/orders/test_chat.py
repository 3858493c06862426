"""The order tools through the chat's real pipeline (a ``ChatSession``, the rules planner, the bundled 135M model's
engine): the held-out conversation set, scored, and the verification rules, each attempt asserted to disclose
nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from shop_assistant.evaluation.answers import FrameListener
from shop_assistant.orders import verification
from shop_assistant.orders.models import ConversationOrder, OrderRequest
from tests.chat.conftest import chat_engine, chat_settings, demo_store  # noqa: F401

HELD_OUT = json.loads((Path(__file__).with_name("heldout_conversations.json")).read_text())["conversations"]
TARGET = 0.9


@pytest.fixture(autouse=True)
def fresh_limits():
    verification.reset()
    yield
    verification.reset()


async def _session(customer: dict | None = None):
    from shop_assistant.chat.protocol.session import ChatSession

    listener = FrameListener()
    session = await ChatSession.open(store_slug="demo", resume_token=None, send=listener.send)
    if customer:
        session.conversation.customer = customer  # as a verified signature sets it (protocol.identity)
    return session, listener


def _text(frames: list[dict]) -> str:
    return next((f["text"] for f in frames if f["type"] == "end" and "text" in f),
                "".join(f["text"] for f in frames if f["type"] == "token"))


def _quoted(frames: list[dict]) -> str:
    """The policy sentences shown under the answer (the `sources` frame: the widget's quote box)."""
    return " ".join(item["text"] for f in frames if f["type"] == "sources" for item in f["items"])


def _requests(session) -> list[str]:
    return list(OrderRequest.objects.filter(conversation_id=session.conversation.pk).values_list("kind", flat=True))


async def run(conversation: dict) -> list[dict]:
    session, listener = await _session(conversation.get("customer"))
    turns = []
    try:
        for turn in conversation["turns"]:
            frames = await listener.say(session, turn["shopper"])
            text, quoted = _text(frames), _quoted(frames)
            requests = await database_sync_to_async(_requests)(session)
            lower = text.lower()
            right = all(s.lower() in lower for s in turn.get("includes", [])) and not any(
                s.lower() in lower for s in turn.get("excludes", []))
            right = right and all(s.lower() in quoted.lower() for s in turn.get("quoted", []))
            if "request" in turn:
                right = right and requests == ([turn["request"]] if turn["request"] else [])
            turns.append({"shopper": turn["shopper"], "text": text, "quoted": quoted, "requests": requests,
                          "right": right})
    finally:
        await session.close()
    return turns


@pytest.mark.slow
async def test_the_held_out_set_is_handled_right(demo_store, chat_engine, chat_settings):  # noqa: F811
    assert len(HELD_OUT) >= 20
    results = {c["id"]: await run(c) for c in HELD_OUT}
    rows = [(c["kind"], c["id"], all(t["right"] for t in results[c["id"]])) for c in HELD_OUT]
    table = "\n".join(f"{kind:20} {cid:28} {'right' if ok else 'WRONG'}" for kind, cid, ok in rows)
    wrong = {cid: results[cid] for _, cid, ok in rows if not ok}
    print(f"\nheld-out: {sum(ok for *_, ok in rows)}/{len(rows)}\n{table}")
    assert sum(ok for *_, ok in rows) / len(rows) >= TARGET, json.dumps(wrong, indent=1)


FACTS_OF_1002 = ("shipped", "ups", "stormshell", "1z999", "jordan", "expected", "tracking")


def _discloses(text: str) -> bool:
    return any(fact in text.lower() for fact in FACTS_OF_1002)


@pytest.mark.slow
async def test_no_disclosure_without_verification_and_the_same_reply_as_an_unknown_order(demo_store, chat_engine,  # noqa: F811
                                                                                         chat_settings):
    attempts = [
        (None, "Where is my order 1002? my email is jo@example.com"),  # wrong email
        (None, "where is order 1002"),  # no email at all
        ({"id": "c-1", "email": "sam@example.com"}, "Where is my order 1002?"),  # another shopper's signed identity
        ({"id": "c-2", "email": "sam@example.com"}, "what was in order 1002?"),
        (None, "what's in order 1002, email JORDAN@example.org"),  # a near-miss email
    ]
    replies = []
    for customer, message in attempts:
        session, listener = await _session(customer)
        text = _text(await listener.say(session, message))
        state = await database_sync_to_async(ConversationOrder.objects.filter(conversation_id=session.conversation.pk).first)()
        await session.close()
        assert not _discloses(text), (message, text)
        assert state is None or state.order_id is None
        replies.append(text)
    session, listener = await _session()
    unknown = _text(await listener.say(session, "Where is my order 4242? my email is jo@example.com"))
    await session.close()
    assert replies[0] == replies[2] == unknown  # a wrong email, someone else's order and no such order: one reply
    assert "email" in replies[1].lower() and "1002" in replies[1]  # it asks; it says nothing of the order


@pytest.mark.slow
async def test_guessing_numbers_is_limited_and_then_even_the_right_pair_is_not_told(demo_store, chat_engine,  # noqa: F811
                                                                                    chat_settings):
    session, listener = await _session()
    texts = [_text(await listener.say(session, f"where is order {number}? jordan@example.com"))
             for number in ("1990", "1991", "1992", "1993", "1994")]
    assert all("couldn't find an order" in text for text in texts)
    limited = _text(await listener.say(session, "where is order 1002? jordan@example.com"))
    await session.close()
    assert "can't look up more orders" in limited and not _discloses(limited)
    # Another conversation with the same email is held back too (the limit is per email, not per chat)...
    session, listener = await _session()
    again = _text(await listener.say(session, "where is order 1002? jordan@example.com"))
    # ...and a shopper with another email, in a fresh chat, is not.
    other = _text(await listener.say(session, "where is order 1003? sam@example.com"))
    await session.close()
    assert "can't look up more orders" in again and "delivered on" in other


@pytest.mark.slow
async def test_a_return_request_waits_for_an_agent_and_the_order_is_not_changed(demo_store, chat_engine,  # noqa: F811
                                                                               chat_settings):
    from shop_assistant.orders.models import Order

    session, listener = await _session()
    text = _text(await listener.say(session, "I want to return the fleece from order 1003, email sam@example.com"))
    await session.close()
    assert "return request" in text
    request = await database_sync_to_async(OrderRequest.objects.get)()
    assert (request.kind, request.status, request.lines) == ("return", "pending", ["Cascade Fleece Jacket (M / Forest)"])
    order = await database_sync_to_async(Order.objects.get)(store=demo_store, number="1003")
    assert order.fulfillment_status == "delivered"


@pytest.mark.slow
async def test_an_exchange_asks_for_the_size_and_the_answer_makes_the_request_with_it(demo_store, chat_engine,  # noqa: F811
                                                                                     chat_settings):
    """Two turns: the size comes in the answer to the chat's question, and the request keeps it, for the items the
    first message named (the boots, not the rest of the order)."""
    session, listener = await _session({"id": "c-11", "email": "sam@example.com"})
    asked = _text(await listener.say(session, "I'd like to exchange the boots from order 1003"))
    assert "Which size or colour would you like instead of Trailblazer" in asked
    assert await database_sync_to_async(_requests)(session) == []
    made = _text(await listener.say(session, "size 10"))
    again = _text(await listener.say(session, "a 10"))  # asked and answered: a second "10" is no second request
    await session.close()
    assert "exchange request for Trailblazer Waterproof Hiking Boots" in made and "(for size 10)" in made
    request = await database_sync_to_async(OrderRequest.objects.get)()
    assert (request.kind, request.wanted, request.status) == ("exchange", "size 10", "pending")
    assert len(request.lines) == 1 and request.lines[0].startswith("Trailblazer Waterproof Hiking Boots")
    assert "exchange request" not in again
    state = await database_sync_to_async(ConversationOrder.objects.get)(conversation_id=session.conversation.pk)
    assert state.waiting_for == "" and state.order_id == request.order_id


def _conversation(cid: str) -> dict:
    return next(c for c in HELD_OUT if c["id"] == cid)


# Conversations that were wrong once, each asserted on its own (the set's score allows a wrong row): two held-out
# rows whose policy sentence is now shown once, as the quote under the reply; "Can I still cancel my order?" before
# the number; and, written with its fix (so not held out), a size answer that names the order again.
SIZE_WITH_THE_ORDER = {
    "id": "exchange-size-order-named",
    "customer": {"id": "c-12", "email": "sam@example.com"},
    "turns": [
        {"shopper": "I'd like to exchange the boots from order 1003", "includes": ["which size"], "request": None},
        {"shopper": "size 10, order 1003", "includes": ["exchange request for Trailblazer", "(for size 10)"],
         "quoted": ["Exchanges for a different size"], "excludes": ["delivered on"], "request": "exchange"},
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("conversation", [
    _conversation("return-within-window"), _conversation("worn-boots-fleece-fine"),
    _conversation("cancel-before-number"), SIZE_WITH_THE_ORDER,
], ids=lambda c: c["id"])
async def test_rows_once_wrong_are_right(demo_store, chat_engine, chat_settings, conversation):  # noqa: F811
    turns = await run(conversation)
    assert all(t["right"] for t in turns), json.dumps(turns, indent=1)
