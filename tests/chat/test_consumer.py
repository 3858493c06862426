"""The chat protocol end to end through the ASGI app (origin check, routing, consumer) on the real engine."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from django.utils import translation

from shop_assistant.chat.models import Conversation, Message, hash_token

from .conftest import ANSWERED, TEST_MAX_TOKENS, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_engine", "chat_settings")]


def messages_of(conversation_id: str) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("created_at"))


async def test_protocol_end_to_end(ws, demo_store):
    client = await ws("/ws/chat/?store=demo")
    ready = client.ready
    assert ready["history"] == [] and ready["conversation"] and ready["resume_token"]
    greeting = "Hi! I'm Demo Outfitters' shopping assistant. Ask me about our products, sizes, shipping or returns."
    assert ready["store"] == {"slug": "demo", "name": demo_store.name, "greeting": greeting}  # no greeting set: the default

    asked = time.perf_counter()
    answer = await client.ask("Hello! What can you help me with?")
    waited_ms = (time.perf_counter() - asked) * 1000
    assert answer.tokens and answer.text.strip()
    end = answer.end
    assert end["finish_reason"] in ANSWERED
    usage = end["usage"]
    assert set(usage) == {"prompt_tokens", "completion_tokens", "cached_tokens"}
    assert usage["prompt_tokens"] > 50  # the store's system prompt is in there
    assert 1 <= usage["completion_tokens"] <= TEST_MAX_TOKENS
    assert end["timing"]["engine_ttft_ms"] > 0
    await client.close()

    # Logged through the (eager) Celery task: the shopper's words and exactly the streamed answer.
    rows = await database_sync_to_async(messages_of)(ready["conversation"])
    assert [(m.role, m.text) for m in rows] == [("user", "Hello! What can you help me with?"), ("assistant", answer.text)]
    assert str(rows[1].id) == answer.start["message_id"]
    assert rows[1].finish_reason == end["finish_reason"]
    assert rows[1].prompt_tokens == usage["prompt_tokens"] and rows[1].completion_tokens == usage["completion_tokens"]
    # How long the shopper waited for the first words (the studio's analytics): the server's preparation and more
    # (the first words are the answer's opening, sent before the engine gets the request, so the engine's time to
    # first token is not part of it), and no more than the whole answer took as this client saw it.
    assert int(end["timing"]["prepare_ms"]) <= rows[1].first_token_ms <= waited_ms
    assert "Catalog results" in rows[0].model_text  # what the model saw, kept for byte-identical replay


async def test_products_come_from_catalog_rows(ws, demo_store):
    from catalog.models import Variant

    client = await ws("/ws/chat/?store=demo")
    first_product = await database_sync_to_async(lambda: demo_store.products.order_by("pk").first())()
    answer = await client.ask(f"Do you have the {first_product.title}?")
    await client.close()

    assert answer.products, "the catalog should match a product named in the question"
    # products arrives before the text, so the widget can show cards while the answer streams
    assert [f["type"] for f in answer.frames[:2]] == ["start", "products"]
    for item in answer.products:
        assert set(item) == {"sku", "title", "price", "currency", "url", "image", "in_stock"}
        variant = await database_sync_to_async(Variant.objects.select_related("product").get)(
            store=demo_store, sku=item["sku"]
        )
        assert Decimal(item["price"]) == variant.price
        assert item["currency"] == variant.currency
        assert item["in_stock"] == variant.in_stock
        assert item["title"].startswith(variant.product.title)


async def test_resume_restores_the_conversation_and_its_history(ws, demo_store):
    first = await ws("/ws/chat/?store=demo")
    ready = first.ready
    answer = await first.ask("Hi, I am looking for a tent.")
    await first.close()

    token = ready["resume_token"]
    again = await ws(f"/ws/chat/?store=demo&resume={token}")
    resumed = again.ready
    assert resumed["conversation"] == ready["conversation"]
    assert resumed["resume_token"] == token
    history = resumed["history"]
    assert [(h["role"], h["text"]) for h in history] == [("user", "Hi, I am looking for a tent."), ("assistant", answer.text)]

    # The follow-up replays the first exchange byte for byte, so the engine reuses its blocks.
    follow_up = await again.ask("Something under 300 dollars?")
    await again.close()
    block = 16
    previous = answer.end["usage"]["prompt_tokens"]
    assert follow_up.end["usage"]["cached_tokens"] >= previous // block * block

    # Only a hash of the token is stored.
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=ready["conversation"])
    assert conversation.resume_token_hash == hash_token(token) != token


async def test_an_invalid_or_foreign_token_gets_a_new_conversation(ws, demo_store):
    owner = await ws("/ws/chat/?store=demo")
    ready = owner.ready
    await owner.ask("My secret question")
    await owner.close()

    for path in (
        "/ws/chat/?store=demo&resume=not-a-real-token",
        f"/ws/chat/?store=demo&resume={ready['resume_token'][:-2]}",
    ):
        stranger = await ws(path)
        other = stranger.ready
        await stranger.close()
        assert other["conversation"] != ready["conversation"]
        assert other["history"] == [] and other["resume_token"] != ready["resume_token"]


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def test_the_event_loop_only_moves_frames_checking_runs_in_a_worker_thread(ws, demo_store, settings, monkeypatch):
    """The sentence checker and the evidence's word index are CPU work: each real call records whether the
    thread it runs in is running an event loop (the consumer's), and none may."""
    from functools import cached_property

    from shop_assistant.chat.guard import checker

    calls: list[tuple[str, bool]] = []
    real_check, real_words = checker.check, checker.Evidence.__dict__["words"].func

    def check(*args, **kwargs):
        calls.append(("check", _loop_running()))
        return real_check(*args, **kwargs)

    def words(self):
        calls.append(("words", _loop_running()))
        return real_words(self)

    recorded_words = cached_property(words)
    recorded_words.__set_name__(checker.Evidence, "words")
    monkeypatch.setattr(checker, "check", check)
    monkeypatch.setattr(checker.Evidence, "words", recorded_words)
    settings.CHAT = {**settings.CHAT, "max_tokens": 48}
    client = await ws("/ws/chat/?store=demo")
    answer = await client.ask("Hello! What can you help me with?")
    await client.close()

    assert answer.end["finish_reason"] in ANSWERED
    assert ("check", False) in calls, calls  # the model's sentences were checked (words: when a rule needed them)
    assert [call for call in calls if call[1]] == []


async def test_stop_aborts_and_frees_blocks_and_the_socket_stays_usable(ws, demo_store, settings, chat_engine):
    settings.CHAT = {**settings.CHAT, "max_tokens": 200}
    client = await ws("/ws/chat/?store=demo")
    await client.send({"type": "message", "text": "Tell me everything about your tents and sleeping bags, in a long poem."})
    start = await client.receive()
    assert start["type"] == "start"
    frame = await client.receive()
    while frame["type"] != "token":
        frame = await client.receive()
    assert await wait_for(lambda: chat_engine.stats()["num_blocks_used"] > 0)  # the request holds KV blocks
    await client.send({"type": "stop"})
    frames = [frame]
    while frame["type"] != "end":
        frame = await client.receive()
        frames.append(frame)
    assert frame["finish_reason"] == "abort"
    assert frame["usage"]["completion_tokens"] < 200
    assert await wait_for(lambda: chat_engine.stats()["num_blocks_used"] == 0, timeout=5)

    # stop with nothing running is harmless, and the next message is answered (and can be stopped again)
    await client.send({"type": "stop"})
    await client.send({"type": "message", "text": "Thanks. Do you ship abroad?"})
    assert (await client.receive())["type"] == "start"
    frame = await client.receive()
    await client.send({"type": "stop"})
    while frame["type"] != "end":
        frame = await client.receive()
    # Aborted, or ended on its own before the stop arrived (the checker may end a short answer at once): not an error.
    assert frame["finish_reason"] in {"abort", "stop", "length", "unsupported", "unsupported_figure", "repetition"}
    await client.close()


async def test_disconnect_aborts_the_request_and_frees_its_blocks_at_once(ws, demo_store, settings, chat_engine):
    settings.CHAT = {**settings.CHAT, "max_tokens": 300}
    client = await ws("/ws/chat/?store=demo")
    ready = client.ready
    await client.send({"type": "message", "text": "Tell me everything about your tents and sleeping bags, in a long poem."})
    frame = await client.receive()
    while frame["type"] != "token":
        frame = await client.receive()
    assert await wait_for(lambda: chat_engine.stats()["num_running"] == 1)
    stats = chat_engine.stats()
    assert stats["num_blocks_used"] > 0
    aborted_before = stats["num_requests_aborted"]

    await client.close()
    assert await wait_for(lambda: chat_engine.stats()["num_blocks_used"] == 0, timeout=2)
    stats = chat_engine.stats()
    assert stats["num_running"] == 0 and stats["num_requests_aborted"] == aborted_before + 1

    rows = await database_sync_to_async(messages_of)(ready["conversation"])
    assert rows[-1].role == "assistant" and rows[-1].finish_reason == "abort"
    assert rows[-1].completion_tokens is not None and rows[-1].completion_tokens < 300


async def test_bad_frames_get_errors_and_the_socket_stays_usable(ws, demo_store, settings):
    settings.CHAT = {**settings.CHAT, "max_message_chars": 100}
    client = await ws("/ws/chat/?store=demo")

    async def error_for(**send) -> dict:
        await client.comm.send_to(**send)
        frame = await client.receive()
        assert frame["type"] == "error", frame
        assert frame["message"]
        return frame

    assert (await error_for(text_data="{not json"))["code"] == "bad_json"
    assert (await error_for(bytes_data=b"\x00\x01"))["code"] == "bad_frame"
    assert (await error_for(text_data="[1, 2]"))["code"] == "bad_frame"
    assert (await error_for(text_data='{"text": "no type"}'))["code"] == "bad_frame"
    assert (await error_for(text_data='{"type": "dance"}'))["code"] == "unknown_type"
    assert (await error_for(text_data='{"type": "message"}'))["code"] == "bad_frame"
    assert (await error_for(text_data='{"type": "message", "text": 42}'))["code"] == "bad_frame"
    assert (await error_for(text_data='{"type": "message", "text": "   "}'))["code"] == "empty_message"
    too_long = await error_for(text_data=json.dumps({"type": "message", "text": "x" * 101}))
    assert too_long["code"] == "message_too_long" and too_long["limit"] == 100
    huge = await error_for(text_data=json.dumps({"type": "message", "text": "x" * 100_000}))
    assert huge["code"] == "frame_too_large"

    # typing is accepted silently
    await client.send({"type": "typing"})
    assert await client.comm.receive_nothing(timeout=0.3)

    answer = await client.ask("Still there?")
    assert answer.end["finish_reason"] in ANSWERED
    await client.close()


async def test_a_second_message_while_generating_is_refused(ws, demo_store, settings):
    settings.CHAT = {**settings.CHAT, "max_tokens": 24}
    client = await ws("/ws/chat/?store=demo")
    await client.send({"type": "message", "text": "First question: do you have tents?"})
    await client.send({"type": "message", "text": "Second question, too soon"})
    frames = []
    while True:
        frame = await client.receive()
        frames.append(frame)
        if frame["type"] == "end":
            break
    errors = [f for f in frames if f["type"] == "error"]
    assert [e["code"] for e in errors] == ["busy"]
    assert frames[-1]["finish_reason"] in ANSWERED  # the first answer was not disturbed
    assert sum(f["type"] == "start" for f in frames) == 1
    await client.close()


async def test_messages_per_minute_limit(ws, demo_store, settings):
    settings.CHAT = {**settings.CHAT, "messages_per_minute": 2}
    client = await ws("/ws/chat/?store=demo")
    await client.ask("one")
    await client.ask("two")
    await client.send({"type": "message", "text": "three"})
    frame = await client.receive()
    assert frame["type"] == "error" and frame["code"] == "rate_limited"
    assert 0 < frame["retry_after"] <= 60
    await client.close()


async def test_messages_per_minute_0_turns_the_limit_off(ws, demo_store, settings):
    """Before: every message failed with an IndexError in the limiter (issue 39, item 12)."""
    settings.CHAT = {**settings.CHAT, "messages_per_minute": 0}
    client = await ws("/ws/chat/?store=demo")
    for text in ("one", "two", "three"):
        answer = await client.ask(text)  # an answer (a fixed reply to these words), not an error frame
        assert answer.end["type"] == "end" and answer.text
    await client.close()


async def test_a_prompt_longer_than_the_model_reads_is_refused(ws, demo_store, settings, chat_engine):
    settings.CHAT = {**settings.CHAT, "max_message_chars": 50_000}
    client = await ws("/ws/chat/?store=demo")
    await client.send({"type": "message", "text": "boots " * 2000})
    frame = await client.receive()
    assert frame["type"] == "error" and frame["code"] == "prompt_too_long"
    assert frame["limit"] == chat_engine.max_model_len
    answer = await client.ask("OK, short one then: any socks?")
    assert answer.end["finish_reason"] in ANSWERED
    await client.close()


async def test_long_history_is_trimmed_oldest_first(ws, demo_store, settings, chat_engine):
    """A conversation longer than the model's context still gets answers: the oldest turns are left out."""
    settings.CHAT = {**settings.CHAT, "max_message_chars": 5000}
    client = await ws("/ws/chat/?store=demo")
    ready = client.ready
    limit = chat_engine.max_model_len
    prompt_tokens = []
    for i in range(5):
        answer = await client.ask(f"Question {i}: " + "I like long walks in the mountains. " * 12)
        assert answer.end["finish_reason"] in ANSWERED
        prompt_tokens.append(answer.end["usage"]["prompt_tokens"])
    await client.close()
    assert prompt_tokens[1] > prompt_tokens[0]  # earlier turns are replayed ...
    assert all(tokens + TEST_MAX_TOKENS <= limit for tokens in prompt_tokens)  # ... only as many as fit
    # without trimming, five turns would not fit
    assert prompt_tokens[0] + 4 * (prompt_tokens[1] - prompt_tokens[0]) > limit
    rows = await database_sync_to_async(messages_of)(ready["conversation"])
    assert len(rows) == 10  # trimming only shortens the prompt, never the stored conversation


async def test_agent_messages_reach_the_shopper_and_the_history(ws, demo_store):
    from shop_assistant.chat.log.agents import asend_agent_message

    client = await ws("/ws/chat/?store=demo")
    ready = client.ready
    await asend_agent_message(ready["conversation"], "Hi, this is Ana from support.", "Ana")
    frame = await client.receive()
    assert frame == {"type": "agent_message", "text": "Hi, this is Ana from support.", "agent": "Ana"}
    await client.close()

    again = await ws(f"/ws/chat/?resume={ready['resume_token']}")
    resumed = again.ready
    await again.close()
    (item,) = resumed["history"]
    assert datetime.fromisoformat(item.pop("at")).tzinfo is not None  # when it was said (the widget's time)
    assert item == {"role": "agent", "text": "Hi, this is Ana from support.", "agent": "Ana"}


async def test_unknown_store_is_refused_with_a_reason(asgi_app, demo_store):
    from channels.testing import WebsocketCommunicator

    comm = WebsocketCommunicator(asgi_app, "/ws/chat/?store=no-such-store", headers=[(b"origin", b"http://testserver")])
    connected, _ = await comm.connect(timeout=30)
    assert connected
    frame = json.loads(await comm.receive_from(timeout=30))
    assert frame["type"] == "error" and frame["code"] == "no_store"
    closed = await comm.receive_output(timeout=30)
    assert closed == {"type": "websocket.close", "code": 4404}


@pytest.mark.parametrize("origin", [None, "https://evil.example", "null"])
async def test_foreign_origins_are_refused(asgi_app, demo_store, origin):
    from channels.testing import WebsocketCommunicator

    headers = [(b"origin", origin.encode())] if origin else []
    comm = WebsocketCommunicator(asgi_app, "/ws/chat/?store=demo", headers=headers)
    connected, _ = await comm.connect(timeout=30)
    assert not connected
    assert await database_sync_to_async(Conversation.objects.count)() == 0


async def test_widget_origins_from_settings_are_allowed(demo_store, settings):
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example.com"]
    from shop_assistant.chat.routing import allowed_origins

    assert "https://shop.example.com" in allowed_origins()
    assert "testserver" in allowed_origins()


async def test_two_connections_to_one_conversation_both_see_agent_messages(ws, demo_store):
    one = await ws("/ws/chat/?store=demo")
    ready = one.ready
    two = await ws(f"/ws/chat/?resume={ready['resume_token']}")
    from shop_assistant.chat.log.agents import asend_agent_message

    await asend_agent_message(ready["conversation"], "Both tabs see this", "Sam")
    for client in (one, two):
        assert (await client.receive())["text"] == "Both tabs see this"
    await asyncio.gather(one.close(), two.close())


async def test_fixed_replies_quotes_and_the_handoff_record(ws, demo_store):
    client = await ws("/ws/chat/?store=demo")
    policy = await client.ask("How much does express shipping cost?")
    assert [f["type"] for f in policy.frames[:2]] == ["start", "sources"]
    assert any("14.95" in item["text"] for item in policy.sources)
    assert policy.end["finish_reason"] in ANSWERED

    no_match = await client.ask("Do you sell laptops?")
    assert no_match.products is None and no_match.end["finish_reason"] == "fixed"
    assert no_match.end["reply"] == "no_match" and "don't carry laptops" in no_match.text

    handoff = await client.ask("Can I talk to a person?")
    assert handoff.end["reply"] == "handoff" and handoff.text
    await client.close()
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=client.ready["conversation"])
    assert conversation.status == "handoff" and conversation.handoff_requested_at is not None
    rows = await database_sync_to_async(messages_of)(client.ready["conversation"])
    assert [m.finish_reason for m in rows if m.role == "assistant"][1:] == ["fixed", "fixed"]


def _waiting_for_a_person(conversation_ids: list[str]) -> set[str]:
    """The conversations the demo store's agent (Dana) sees in the inbox's "Waiting for a person" section."""
    from django.contrib.auth import get_user_model

    from shop_assistant.console import inbox

    agent = get_user_model().objects.get(username="agent")
    return {str(item.conversation.pk) for item in inbox.sections(agent).waiting} & set(conversation_ids)


def _in_language(function, language: str):
    def run(*args):
        with translation.override(language):
            return function(*args)

    return run


async def test_requests_for_a_person_in_other_words_reach_the_inbox(ws, demo_store):
    """Issue 40: "Can a human help me?", "Is there anyone I can chat with?" and "agent please" got a bot answer
    and the inbox listed the chats as "Bot". Each now gets the handoff reply and waits for a person."""
    from shop_assistant.chat.log.handoff import reply_for

    asked = []
    for text in ("Can a human help me?", "Is there anyone I can chat with?", "agent please",
                 "r u a bot? i want a human", "quiero hablar con un agente"):  # fmt: skip
        client = await ws("/ws/chat/?store=demo")
        answer = await client.ask(text)
        assert answer.end["reply"] == "handoff" and answer.end["finish_reason"] == "fixed", (text, answer.end)
        language = "es" if text.startswith("quiero") else "en"  # the reply is in the shopper's language
        assert answer.text == await database_sync_to_async(_in_language(reply_for, language))(demo_store), text
        await client.close()
        asked.append(client.ready["conversation"])
    waiting = await database_sync_to_async(_waiting_for_a_person)(asked)
    assert waiting == set(asked)

    # A question that only mentions people stays with the assistant.
    client = await ws("/ws/chat/?store=demo")
    answer = await client.ask("Is the family tent big enough for four people?")
    assert answer.end.get("reply") != "handoff"
    await client.close()
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=client.ready["conversation"])
    assert conversation.status == "bot"
