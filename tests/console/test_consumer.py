"""The console socket: role rules, and the live flow with the real engine (in-memory channel layer):
watch tokens stream, take over (the bot goes silent), reply, hand back (the bot answers with the whole transcript)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from shop_assistant.chat.models import AnswerSettings, Conversation, Message
from shop_assistant.console import services
from shop_assistant.chat.protocol.events import announce_handoff

from .conftest import ALLOWED, ROLES, Console, build_world, make_conversation, session_cookie


async def console_for(app, user, origin=None):
    cookie = await database_sync_to_async(session_cookie)(user)
    console = Console(app, cookie, **({"origin": origin} if origin else {}))
    return console


@pytest.mark.parametrize("role", ROLES)
async def test_console_socket_role_rules(asgi_app, transactional_db, role):
    world = await database_sync_to_async(build_world)()
    conversation = await database_sync_to_async(make_conversation)(world.store_a)
    console = await console_for(asgi_app, world.users[role])
    first = await console.connect()
    if role in ("anonymous", "plain"):
        assert first == {"type": "closed", "code": 4403}
        return
    assert first["type"] == "hello"
    await console.send({"type": "watch", "conversation": str(conversation.pk)})
    answer = await console.receive(10)
    if role in ALLOWED:
        assert answer == {"type": "watching", "conversation": str(conversation.pk)}
    else:
        assert answer == {"type": "error", "code": "forbidden", "conversation": str(conversation.pk)}
        # and it hears nothing of that conversation
        await database_sync_to_async(services.take_over)(world.users["agent"], conversation.pk)
        assert await console.comm.receive_nothing(timeout=0.5)
    await console.close()


async def test_console_socket_refuses_other_origins(asgi_app, transactional_db):
    world = await database_sync_to_async(build_world)()
    console = await console_for(asgi_app, world.users["agent"], origin="https://evil.example")
    connected, _ = await console.comm.connect(timeout=10)
    assert not connected


def _demo_agent():
    return get_user_model().objects.get(username="agent")


async def test_watch_take_over_reply_and_hand_back(chat_engine, chat_settings, demo_store, ws, asgi_app, monkeypatch):
    from shop_assistant.chat.guard import pipeline as pipeline_module  # where the prompt is assembled

    prompts: list[list] = []
    real_assemble = pipeline_module.assemble

    def spy(tokenizer, system_prompt, turns, latest, **kwargs):  # records what the model is given, then builds it
        prompts.append([(t.role, t.content) for t in turns] + [("user", latest)])
        return real_assemble(tokenizer, system_prompt, turns, latest, **kwargs)

    monkeypatch.setattr(pipeline_module, "assemble", spy)
    agent = await database_sync_to_async(_demo_agent)()
    console = await console_for(asgi_app, agent)
    assert (await console.connect())["type"] == "hello"

    shopper = await ws()
    other_tab = await ws(f"/ws/chat/?store=demo&resume={shopper.ready['resume_token']}")
    conversation = shopper.ready["conversation"]
    started, _ = await console.receive_until(lambda f: f["type"] == "inbox")
    assert started == {"type": "inbox", "kind": "started", "conversation": conversation}
    await console.send({"type": "watch", "conversation": conversation})
    await console.receive_until(lambda f: f["type"] == "watching")

    # 1. The console watches the bot's answer stream: the shopper's message, start, tokens, end.
    answer = await shopper.ask("Do you have rain jackets?")
    end, frames = await console.receive_until(lambda f: f["type"] == "frame" and f["frame"]["type"] == "end")
    mirrored = [f["frame"] for f in frames if f["type"] == "frame"]
    assert mirrored[0] == {"type": "message", "role": "user", "text": "Do you have rain jackets?", "held": False}
    assert mirrored[1] == answer.start
    assert "".join(f["text"] for f in mirrored if f["type"] == "token") == answer.text
    assert all(isinstance(f["t"], float) for f in mirrored if f["type"] == "token")
    assert end["frame"]["finish_reason"] == answer.end["finish_reason"]

    # 2. Shopper typing shows in the console; agent typing in the widget.
    await shopper.send({"type": "typing"})
    typing, _ = await console.receive_until(lambda f: f["type"] == "shopper_typing")
    assert typing["conversation"] == conversation
    await console.send({"type": "typing", "conversation": conversation})
    assert await shopper.receive(10) == {"type": "agent_typing", "agent": "Dana"}
    assert await other_tab.receive(10) == {"type": "agent_typing", "agent": "Dana"}

    # 3. Take over: both tabs see Dana join; the bot stays silent; the message reaches the console.
    await database_sync_to_async(services.take_over)(agent, conversation)
    assert await shopper.receive(10) == {"type": "agent_joined", "agent": "Dana"}
    assert await other_tab.receive(10) == {"type": "agent_joined", "agent": "Dana"}
    await shopper.send({"type": "message", "text": "I want to talk about my order 1234"})
    held, _ = await console.receive_until(lambda f: f["type"] == "frame")
    assert held["frame"] == {"type": "message", "role": "user", "text": "I want to talk about my order 1234",
                             "held": True}
    assert await shopper.comm.receive_nothing(timeout=1.0)  # no `start`: the bot does not answer

    # A tab opened now learns at once that a person is there.
    late_tab = await ws(f"/ws/chat/?store=demo&resume={shopper.ready['resume_token']}")
    assert await late_tab.receive(10) == {"type": "agent_joined", "agent": "Dana"}

    # 4. The agent's reply reaches every tab and the console.
    await database_sync_to_async(services.reply)(agent, conversation, "Hi, Dana here. Order 1234 ships today.")
    for tab in (shopper, other_tab, late_tab):
        assert await tab.receive(10) == {"type": "agent_message", "text": "Hi, Dana here. Order 1234 ships today.",
                                         "agent": "Dana"}
    reply, _ = await console.receive_until(lambda f: f["type"] == "agent_message")
    assert reply["agent"] == "Dana"

    # 5. Hand back: the bot answers again, and its prompt holds the whole transcript, the agent's turn included.
    await database_sync_to_async(services.hand_back)(agent, conversation)
    assert await shopper.receive(10) == {"type": "agent_left", "agent": "Dana"}
    prompts.clear()
    again = await shopper.ask("Thanks! And do you sell tents?")
    assert again.text
    (turns,) = prompts
    contents = [content for _, content in turns]
    assert any("order 1234" in c and c.endswith("Shopper: I want to talk about my order 1234") for c in contents)
    assert ("assistant", "Hi, Dana here. Order 1234 ships today.") in turns
    assert turns[-1][1].endswith("Shopper: Thanks! And do you sell tents?")

    # The held message was logged too.
    def roles():
        return list(Message.objects.filter(conversation_id=conversation).order_by("created_at")
                    .values_list("role", flat=True))
    for _ in range(100):
        if await database_sync_to_async(roles)() == ["user", "assistant", "user", "agent", "user", "assistant"]:
            break
        await asyncio.sleep(0.05)
    assert await database_sync_to_async(roles)() == ["user", "assistant", "user", "agent", "user", "assistant"]
    await console.close()


async def test_handoff_announcement_reaches_the_stores_consoles(demo_store, asgi_app, transactional_db):
    from django.utils import timezone

    agent = await database_sync_to_async(_demo_agent)()
    console = await console_for(asgi_app, agent)
    assert (await console.connect())["type"] == "hello"
    conversation = await database_sync_to_async(make_conversation)(
        demo_store, "handoff", handoff_requested_at=timezone.now()
    )
    await announce_handoff(conversation)
    frame = await console.receive(10)
    assert frame["type"] == "inbox" and frame["kind"] == "handoff" and frame["conversation"] == str(conversation.pk)
    assert frame["requested_at"] == conversation.handoff_requested_at.isoformat()
    # Another store's handoff is not announced here.
    other = await database_sync_to_async(build_world)()
    await announce_handoff(await database_sync_to_async(make_conversation)(other.store_b, "handoff"))
    assert await console.comm.receive_nothing(timeout=0.5)
    await console.close()
    assert await database_sync_to_async(Conversation.objects.filter(status="handoff").count)() == 2


async def test_taking_over_stops_the_answer_being_written(chat_engine, chat_settings, demo_store, ws):
    chat_settings.CHAT = {**chat_settings.CHAT, "max_tokens": 200}
    # The model writes on for as long as it is let (its sentences not checked): only the take-over stops it.
    unchecked = {"model_text": AnswerSettings.ModelText.UNCHECKED}
    await database_sync_to_async(AnswerSettings.objects.update_or_create)(store=demo_store, defaults=unchecked)
    agent = await database_sync_to_async(_demo_agent)()
    shopper = await ws()
    await shopper.send({"type": "message", "text": "Tell me everything about your tents and sleeping bags."})
    frames = [await shopper.receive()]
    while frames[-1]["type"] != "token":
        frames.append(await shopper.receive())
    # An agent takes over what the inbox shows: a conversation whose first message has been recorded (the
    # answer's opening may reach the shopper before that write).
    recorded = Conversation.objects.filter(pk=shopper.ready["conversation"]).exists
    for _ in range(100):
        if await database_sync_to_async(recorded)():
            break
        await asyncio.sleep(0.05)
    await database_sync_to_async(services.take_over)(agent, shopper.ready["conversation"])
    while frames[-1]["type"] != "end":
        frames.append(await shopper.receive())
    assert {"type": "agent_joined", "agent": "Dana"} in frames
    assert frames[-1]["finish_reason"] == "abort" and frames[-1]["usage"]["completion_tokens"] < 200


async def test_notes_labels_and_assignments_reach_every_console_watching_live(asgi_app, ws):
    """Agent A's note, label and assignment appear at once in agent B's open conversation; B's bell rings; the
    shopper's socket hears none of it, and another store's console hears nothing."""
    from shop_assistant.chat.log.conversations import new_conversation
    from shop_assistant.console.models import Label

    world = await database_sync_to_async(build_world)()
    conversation, token = await database_sync_to_async(new_conversation)(world.store_a)
    await database_sync_to_async(Label.objects.create)(store=world.store_a, name="vip", color="#8250df")
    dana, olivia = world.users["agent"], world.users["owner"]
    watcher = await console_for(asgi_app, olivia)
    outsider = await console_for(asgi_app, world.users["other_agent"])
    assert (await watcher.connect())["type"] == "hello" and (await outsider.connect())["type"] == "hello"
    await watcher.send({"type": "watch", "conversation": str(conversation.pk)})
    await watcher.receive_until(lambda f: f["type"] == "watching")
    shopper = await ws(f"/ws/chat/?store=alpha&resume={token}")

    await database_sync_to_async(services.take_over)(dana, conversation.pk)
    taken, _ = await watcher.receive_until(lambda f: f["type"] == "activity")
    assert taken["kind"] == "take_over" and taken["by"] == "Dana"

    await database_sync_to_async(services.add_note)(dana, conversation.pk, "Asked twice already")
    note, _ = await watcher.receive_until(lambda f: f["type"] == "activity")
    assert note["kind"] == "note" and note["by"] == "Dana" and note["note"]["text"] == "Asked twice already"
    await database_sync_to_async(services.set_label)(dana, conversation.pk, "vip", True)
    label, _ = await watcher.receive_until(lambda f: f["type"] == "activity")
    assert label["label"] == {"name": "vip", "color": "#8250df", "on": True} and label["text"] == "Label vip"

    await database_sync_to_async(services.assign)(dana, conversation.pk, olivia.pk)
    bell, frames = await watcher.receive_until(lambda f: f["type"] == "notification")
    assigned = next(f for f in frames if f["type"] == "activity")
    assert assigned["kind"] == "assign" and assigned["assigned_to"] == "Olivia"
    assert bell["unread"] == 1 and bell["url"] == f"/console/c/{conversation.pk}/"
    assert bell["text"] == f"Dana assigned you {str(conversation.pk)[:8]}"
    # The shopper sees only that Dana left and Olivia joined; nothing of notes, labels or the bell.
    seen = [await shopper.receive()]
    while seen[-1] != {"type": "agent_joined", "agent": "Olivia"}:
        seen.append(await shopper.receive())
    # (its connection may have told it Dana is there twice: once on opening, racing the take-over, once live)
    assert {f["type"] for f in seen} == {"agent_joined", "agent_left"}
    assert seen[-2:] == [{"type": "agent_left", "agent": "Dana"}, {"type": "agent_joined", "agent": "Olivia"}]
    assert await shopper.comm.receive_nothing(timeout=0.3)
    assert await outsider.comm.receive_nothing(timeout=0.3)
    await watcher.close()
    await outsider.close()


async def test_the_live_activity_list_is_the_one_a_reload_shows(asgi_app, ws):
    """Issue 40: replies (and transcript downloads) were logged but never sent live, so a watching agent's
    activity list missed them until a reload. Every action of the conversation now reaches the watchers, in the
    order the page lists them."""
    from shop_assistant.chat.log.conversations import new_conversation
    from shop_assistant.console.models import Action, CannedReply

    from .conftest import http_client

    world = await database_sync_to_async(build_world)()
    conversation, _ = await database_sync_to_async(new_conversation)(world.store_a)
    template = await database_sync_to_async(CannedReply.objects.create)(
        store=world.store_a, shortcut="hours", text="We answer 9 to 5.")
    dana = world.users["agent"]
    watcher = await console_for(asgi_app, world.users["owner"])
    assert (await watcher.connect())["type"] == "hello"
    await watcher.send({"type": "watch", "conversation": str(conversation.pk)})
    await watcher.receive_until(lambda f: f["type"] == "watching")

    await database_sync_to_async(services.take_over)(dana, conversation.pk)
    await database_sync_to_async(services.reply)(dana, conversation.pk, "Hello, Dana here.")
    await database_sync_to_async(services.reply)(dana, conversation.pk, "We answer 9 to 5.", template.pk)
    client = await database_sync_to_async(http_client)(dana)
    exported = await database_sync_to_async(client.get)(f"/console/c/{conversation.pk}/export.csv")
    assert exported.status_code == 200
    await database_sync_to_async(services.hand_back)(dana, conversation.pk)

    def after_reload() -> list[tuple[str, str]]:
        return [(a.kind, services.describe(a)) for a in Action.objects.filter(conversation=conversation)]

    listed = await database_sync_to_async(after_reload)()
    assert [kind for kind, _ in listed] == ["take_over", "reply", "canned", "reply", "export", "hand_back"]
    live = []
    while len(live) < len(listed):
        frame, _ = await watcher.receive_until(lambda f: f["type"] == "activity")
        live.append((frame["kind"], frame["text"]))
    assert live == listed
    assert ("export", "Export (CSV)") in live
    await watcher.close()
