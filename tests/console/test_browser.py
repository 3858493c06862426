"""Real headless Chromium, two browser contexts: the shopper's widget and the agent's console, on daphne with the
Redis layer and a Celery worker. The handoff request arrives in the inbox; the agent takes over, replies, and
hands back. Screenshots of the flow go to docs/console/ when SAVE_SCREENSHOTS=1."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import http.server
import os
import re
import threading
import time

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone

from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.protocol.events import announce_handoff
from tests.chat.conftest import FRAME_TIMEOUT, run_daphne, run_worker
from tests.chat.test_widget import browser  # noqa: F401  (the real Chromium fixture)
from tests.conftest import REPO_ROOT

from .conftest import session_cookie

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.services, pytest.mark.backend_agnostic]
SHOTS = REPO_ROOT / "docs" / "console"


async def shot(page, name: str) -> None:
    if os.environ.get("SAVE_SCREENSHOTS"):
        await page.screenshot(path=str(SHOTS / name))


def _message_count(conversation_id: str) -> int:
    return Message.objects.filter(conversation_id=conversation_id).count()


async def test_widget_and_console_handoff_take_over_reply_hand_back(
    console_redis_url, demo_store, browser, settings, tmp_path
):
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    # This process announces the handoff (as the chat does after recording it) through the same Redis.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [console_redis_url]}}}
    cookie = await database_sync_to_async(session_cookie)(
        await database_sync_to_async(get_user_model().objects.get)(username="agent")
    )
    with run_worker(tmp_path, console_redis_url), run_daphne(tmp_path, REDIS_URL=console_redis_url) as server:
        errors: list[str] = []
        agent_ctx = await browser.new_context(viewport={"width": 1100, "height": 760})
        await agent_ctx.add_cookies([{"name": "sessionid", "value": cookie.split("=", 1)[1], "url": server.http}])
        console = await agent_ctx.new_page()
        console.on("pageerror", lambda e: errors.append(str(e)))
        shop_ctx = await browser.new_context(viewport={"width": 900, "height": 760})
        widget = await shop_ctx.new_page()
        widget.on("pageerror", lambda e: errors.append(str(e)))

        await console.goto(server.http + "/console/")
        await expect(console.locator("#console-live")).to_have_text("live", timeout=timeout)

        # The shopper chats with the bot; the conversation appears in the inbox under "Now chatting".
        await widget.goto(server.http + "/")
        await widget.get_by_role("button", name="Chat with us").click()
        await expect(widget.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        conversation_id = await widget.evaluate(
            # Not the widget's outbox (`...:outbox`), which may come first in the storage's order.
            "JSON.parse(Object.entries(localStorage).find(([k]) => k.startsWith('shop-assistant:')"
            " && !k.endsWith(':outbox'))[1]).conversation"
        )
        box = widget.get_by_label("Your message")
        await box.fill("Do you have rain jackets?")
        await box.press("Enter")
        await expect(widget.locator(".sa-assistant")).to_have_count(1, timeout=timeout)
        await expect(widget.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)
        # A conversation is saved with its first message (nothing said, nothing stored): then it is listed.
        row = console.locator(f'[data-section="live"] [data-conversation="{conversation_id}"]')
        await expect(row).to_be_visible(timeout=timeout)

        # A handoff request (recorded as the answers code does it) arrives live: badge, section, wait time.
        def request_handoff() -> Conversation:
            from shop_assistant.console.models import CannedReply

            CannedReply.objects.create(store=demo_store, shortcut="greet",
                                       text="Hi {first_name}, I'm {agent_name}. How can I help?")
            Conversation.objects.filter(pk=conversation_id).update(status="handoff",
                                                                   handoff_requested_at=timezone.now())
            return Conversation.objects.get(pk=conversation_id)

        await announce_handoff(await database_sync_to_async(request_handoff)())
        waiting = console.locator(f'[data-section="waiting"] [data-conversation="{conversation_id}"]')
        await expect(waiting).to_be_visible(timeout=timeout)
        await expect(waiting.locator(".wait")).to_contain_text("waiting")
        await expect(console).to_have_title("(1) Inbox", timeout=timeout)
        await shot(console, "inbox-handoff.png")

        # The worker has logged the first exchange before the agent opens it.
        deadline = time.monotonic() + 60
        while await database_sync_to_async(_message_count)(conversation_id) < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        await waiting.locator("a").click()
        await expect(console.locator("#console-live")).to_have_text("live", timeout=timeout)
        await expect(console.locator(".msg-user").first).to_contain_text("Do you have rain jackets?")

        # Take over: the widget shows Dana joined; the bot stays silent; the shopper's message reaches the agent.
        await console.get_by_role("button", name="Take over").click()
        await expect(widget.locator(".sa-notice")).to_have_text("Dana joined the chat", timeout=timeout)
        await expect(widget.locator(".sa-status")).to_have_text("Chatting with Dana")

        await box.fill("Can a person check my order 1234?")
        await box.press("Enter")
        await expect(console.locator(".msg-user").last).to_contain_text("Can a person check my order 1234?",
                                                                        timeout=timeout)
        reply = console.get_by_label("Reply")
        await reply.fill("Hi, Dana here. Order 1234 ships today.")
        await expect(widget.locator(".sa-typing")).to_be_visible(timeout=timeout)  # the agent is typing
        await reply.press("Enter")
        agent_bubble = widget.locator(".sa-msg.sa-agent")
        await expect(agent_bubble).to_contain_text("Hi, Dana here. Order 1234 ships today.", timeout=timeout)
        await expect(agent_bubble.locator(".sa-agent-name")).to_have_text("Dana")
        await expect(console.locator(".msg-agent").last).to_contain_text("Order 1234 ships today.", timeout=timeout)

        # A canned reply to this anonymous shopper (issue 40): {agent_name} is filled, {first_name} is not known,
        # so the console says so and selects it; sent as it is, the server refuses it; typing replaces it.
        await reply.type("/greet")
        await reply.press("Enter")
        await expect(reply).to_have_value("Hi {first_name}, I'm Dana. How can I help?")
        error = console.locator("#action-error")
        await expect(error).to_contain_text("{first_name} (the shopper's first name is not known")
        await reply.press("Enter")  # sent anyway: refused by the server, nothing reaches the shopper
        await expect(error).to_have_text("replace {first_name} (the shopper's first name is not known in this "
                                         "conversation) before sending", timeout=timeout)
        await expect(reply).to_have_value("Hi {first_name}, I'm Dana. How can I help?")
        await reply.evaluate("box => box.setSelectionRange(3, 15)")  # the placeholder, as the insert selected it
        await reply.type("there")
        await reply.press("Enter")
        await expect(widget.locator(".sa-msg.sa-agent").last).to_have_text(
            re.compile(r"Hi there, I'm Dana\. How can I help\?"), timeout=timeout)
        assert "{" not in await widget.locator(".sa-msg.sa-agent").last.text_content()
        await expect(error).to_have_text("")
        await expect(widget.locator(".sa-assistant")).to_have_count(1)  # still no bot answer
        await shot(console, "conversation-taken-over.png")
        await shot(widget, "widget-agent-joined.png")

        # Hand back: the bot answers again, and the console watches it stream.
        await console.get_by_role("button", name="Hand back to the bot").click()
        await expect(widget.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        await box.fill("Thanks! Do you have tents?")
        await box.press("Enter")
        await expect(widget.locator(".sa-assistant")).to_have_count(2, timeout=timeout)
        await expect(widget.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)
        await expect(console.locator(".msg-assistant")).to_have_count(2, timeout=timeout)
        answer = (await widget.locator(".sa-assistant .sa-text").last.text_content()).strip()
        await expect(console.locator(".msg-assistant .text").last).to_have_text(answer, timeout=timeout)
        # The cards the shopper saw arrive live too, as cards: the catalog's titles, linked, with their prices.
        shown = await widget.locator(".sa-assistant").last.locator(".sa-card").count()
        live_cards = console.locator(".msg-assistant").last.locator(".card")
        await expect(live_cards).to_have_count(shown)
        if shown:
            await expect(live_cards.first.locator("a")).to_have_attribute("href", re.compile(r"^https?://"))
            await expect(live_cards.first.locator(".price")).not_to_be_empty()
        quoted = await widget.locator(".sa-assistant").last.locator(".sa-quote").count()
        await expect(console.locator(".msg-assistant").last.locator(".quotes blockquote")).to_have_count(quoted)
        assert errors == []


EXPERIENCE_SHOTS = REPO_ROOT / "docs" / "experience"
ADA = '{"id": "c-42", "name": "Ada Lovelace", "email": "ada@example.com"}'


async def experience_shot(page, name: str) -> None:
    if os.environ.get("SAVE_SCREENSHOTS"):
        EXPERIENCE_SHOTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(EXPERIENCE_SHOTS / name))


def _seed_experience(shop: str) -> dict:
    """A conversation of the demo store with an answer that showed cards and a quote, a preset label and a canned
    reply; the store's page (``shop``, another origin than the assistant's) may embed the widget."""
    from catalog.models import Store
    from shop_assistant.chat.protocol import identity
    from shop_assistant.chat.log.conversations import new_conversation
    from shop_assistant.chat.models import WidgetSettings
    from shop_assistant.console.models import CannedReply, Label

    store = Store.objects.get(slug="demo")
    WidgetSettings.objects.update_or_create(store=store, defaults={"allowed_origins": shop})
    conversation, token = new_conversation(store)
    now = timezone.now()
    Message.objects.create(conversation=conversation, role="user", text="Do you have rain jackets?", created_at=now)
    Message.objects.create(
        conversation=conversation, role="assistant", text="Yes, the Storm jacket.", finish_reason="stop", rating=1,
        created_at=now + dt.timedelta(seconds=1),
        products=[{"sku": "J1", "title": "Storm jacket", "price": "120.00", "currency": "EUR",
                   "url": "https://shop.test/p/storm", "image": ""}],
        quotes=[{"title": "Returns", "text": "Returns are free within 30 days."}],
    )
    Label.objects.create(store=store, name="vip", color="#8250df")
    CannedReply.objects.create(store=store, shortcut="returns", text="Hi {first_name}, returns are free for 30 days.")
    User = get_user_model()
    return {
        "conversation": str(conversation.pk), "token": token, "signature": identity.sign(store, ADA),
        "dana": session_cookie(User.objects.get(username="agent")).split("=", 1)[1],
        "olivia": session_cookie(User.objects.get(username="owner")).split("=", 1)[1],
    }


async def test_two_agents_assign_note_label_canned_reply_context_and_export(
    console_redis_url, demo_store, browser, settings, tmp_path
):
    """Agent A (Dana) assigns to agent B (Olivia), who is told live; A's note and label appear in B's open
    conversation; B answers with "/ret" + Enter; the sidebar shows the page and the signed e-mail; the export has
    the note."""
    import html
    import json

    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    with run_worker(tmp_path, console_redis_url), run_daphne(tmp_path, REDIS_URL=console_redis_url) as server:
        errors: list[str] = []

        # The store's own site, another origin (its own port) whose page embeds the widget with the customer its
        # server signed; served for real, as Chromium lets no public page reach a loopback address.
        shop_dir = tmp_path / "shop"
        (shop_dir / "products").mkdir(parents=True)
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(shop_dir))
        shop_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=shop_server.serve_forever, daemon=True).start()
        shop = f"http://127.0.0.1:{shop_server.server_address[1]}"
        seed = await database_sync_to_async(_seed_experience)(shop)
        conversation = seed["conversation"]
        (shop_dir / "products" / "trail-boots.html").write_text(
            "<!doctype html><title>Trail boots</title><h1>Trail boots</h1>"
            f'<script src="{server.http}/static/widget/widget.js" data-store="demo" data-open="true" '
            f'data-customer="{html.escape(ADA)}" data-customer-signature="{seed["signature"]}" '
            "data-cart='[{\"title\": \"Trail boots\", \"quantity\": 1, \"price\": \"89.90\", \"currency\": \"EUR\"}]'>"
            "</script>"
        )

        async def console_page(cookie: str):
            ctx = await browser.new_context(viewport={"width": 1200, "height": 820})
            await ctx.add_cookies([{"name": "sessionid", "value": cookie, "url": server.http}])
            page = await ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            return page

        shop_ctx = await browser.new_context(viewport={"width": 900, "height": 760})
        host = server.http.split("//", 1)[1]
        await shop_ctx.add_init_script(
            f"localStorage.setItem('shop-assistant:{host}:demo', "
            f"JSON.stringify({{token: {json.dumps(seed['token'])}, conversation: {json.dumps(conversation)}}}));"
        )
        widget = await shop_ctx.new_page()
        widget.on("pageerror", lambda e: errors.append(str(e)))
        await widget.goto(f"{shop}/products/trail-boots.html")
        await expect(widget.locator(".sa-status")).to_have_text("Online", timeout=timeout)

        dana = await console_page(seed["dana"])
        olivia = await console_page(seed["olivia"])
        await olivia.goto(server.http + "/console/")
        await expect(olivia.locator("#console-live")).to_have_text("live", timeout=timeout)
        await dana.goto(f"{server.http}/console/c/{conversation}/")
        await expect(dana.locator("#console-live")).to_have_text("live", timeout=timeout)

        # The sidebar: the signed customer (verified), the page the shopper is on, the cart; the answer's card
        # and quote as the shopper saw them, and their thumbs up.
        await expect(dana.locator("#customer-email")).to_contain_text("ada@example.com")
        await expect(dana.locator("#customer-email .verified")).to_have_text("verified")
        await expect(dana.locator("#customer-page")).to_contain_text(f"{shop}/products/trail-boots.html")
        await expect(dana.locator("#cart")).to_contain_text("1 × Trail boots · 89.90 EUR")
        await expect(dana.locator(".msg-assistant .card a")).to_have_text("Storm jacket")
        await expect(dana.locator(".msg-assistant .quotes")).to_contain_text("Returns are free within 30 days.")
        await expect(dana.locator(".msg-assistant .thumb")).to_have_text("rated helpful")
        await experience_shot(dana, "console-context.png")

        # A assigns the conversation to B: B's bell rings in the inbox, live; the shopper sees B's name.
        await dana.get_by_label("Assign to").select_option(label="Olivia")
        await dana.get_by_role("button", name="Assign", exact=True).click()
        await expect(olivia.locator("#bell-count")).to_have_text("1", timeout=timeout)
        await expect(widget.locator(".sa-status")).to_have_text("Chatting with Olivia", timeout=timeout)
        # The inbox follows: the conversation is now under "Assigned to me", named after the customer.
        mine = olivia.locator(f'[data-section="mine"] [data-conversation="{conversation}"]')
        await expect(mine).to_contain_text("Ada Lovelace", timeout=timeout)
        await olivia.locator("#bell summary").click()
        link = olivia.locator("#bell-list a").first
        await expect(link).to_have_text("Dana assigned you Ada Lovelace")
        await experience_shot(olivia, "console-notification.png")
        await link.click()
        await expect(olivia.locator("#console-live")).to_have_text("live", timeout=timeout)
        await expect(olivia.locator("#bell-count")).to_be_hidden()  # opening it read the notification

        # A's note and label appear in B's open conversation without a reload.
        note = dana.get_by_label("New note")
        await note.fill("VIP: ask about sizes")
        await dana.get_by_role("button", name="Add note").click()
        await dana.locator('#labels input[data-label="vip"]').check()
        await expect(olivia.locator("#notes")).to_contain_text("VIP: ask about sizes", timeout=timeout)
        await expect(olivia.locator('#labels input[data-label="vip"]')).to_be_checked(timeout=timeout)
        await expect(olivia.locator("#activity")).to_contain_text("Dana · Label vip")
        await experience_shot(olivia, "console-live-note-label.png")

        # Keyboard: "r" focuses the reply box; "/ret", arrows and Enter insert the canned reply, filled in.
        await olivia.locator("body").click()
        await olivia.keyboard.press("?")
        await expect(olivia.locator("#shortcuts")).to_be_visible()
        await experience_shot(olivia, "console-shortcuts.png")
        await olivia.keyboard.press("Escape")
        await olivia.keyboard.press("r")
        reply = olivia.get_by_label("Reply")
        await expect(reply).to_be_focused()
        await reply.type("/ret")  # r, e and t typed in a field: no shortcut fires (e would resolve)
        picker = olivia.locator("#canned-picker")
        await expect(picker).to_be_visible()
        await expect(picker.locator("li.active")).to_contain_text("/returns")
        await experience_shot(olivia, "console-canned-picker.png")
        await reply.press("Enter")
        await expect(reply).to_have_value("Hi Ada, returns are free for 30 days.")
        await reply.press("Enter")
        await expect(widget.locator(".sa-msg.sa-agent")).to_contain_text("Hi Ada, returns are free for 30 days.",
                                                                         timeout=timeout)
        await expect(dana.locator("#activity")).to_contain_text("Olivia · Canned /returns", timeout=timeout)

        # The export carries the note, the label and the activity.
        exported = await dana.request.get(f"{server.http}/console/c/{conversation}/export.json")
        data = (await exported.json())["conversations"][0]
        assert data["labels"] == ["vip"] and data["notes"][0]["text"] == "VIP: ask about sizes"
        assert {"assign", "note", "label", "canned"} <= {a["kind"] for a in data["activity"]}
        assert data["customer"]["email"] == "ada@example.com"
        csv_text = await (await dana.request.get(f"{server.http}/console/c/{conversation}/export.csv")).text()
        assert "VIP: ask about sizes" in csv_text and ",note," in csv_text

        # On a phone (issue 40: the conversation page was 551 px wide at 390 px, the customer panel cut off): no
        # console page scrolls sideways, and none logs an invalid pattern (the canned page's v-flag error).
        phone = {"width": 390, "height": 844}
        wide: dict[str, int] = {}
        logged: list[str] = []
        for who, paths in ((seed["dana"], ["/console/", f"/console/c/{conversation}/", "/console/canned/",
                                           "/console/labels/"]),
                           (seed["olivia"], ["/console/identity/"])):
            ctx = await browser.new_context(viewport=phone, is_mobile=True, has_touch=True)
            await ctx.add_cookies([{"name": "sessionid", "value": who, "url": server.http}])
            page = await ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: logged.append(m.text) if "pattern" in m.text.lower() else None)
            for path in paths:
                response = await page.goto(server.http + path)
                assert response.status == 200, (path, response.status)
                await expect(page.locator("main")).to_be_visible()
                width = await page.evaluate("document.documentElement.scrollWidth")
                if width > phone["width"]:
                    wide[path] = width
                if path.startswith("/console/c/"):
                    panel = await page.locator("#customer").bounding_box()  # the customer panel, whole
                    assert panel["x"] >= 0 and panel["x"] + panel["width"] <= phone["width"], panel
                    await shot(page, "phone-conversation.png")
            await ctx.close()
        assert not wide, f"console pages wider than the phone's {phone['width']} px: {wide}"
        assert logged == []
        assert errors == []
        shop_server.shutdown()
