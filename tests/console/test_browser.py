"""Real headless Chromium, two browser contexts: the shopper's widget and the agent's console, on daphne with the
Redis layer and a Celery worker. The handoff request arrives in the inbox; the agent takes over, replies, and
hands back. Screenshots of the flow go to docs/console/ when SAVE_SCREENSHOTS=1."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone

from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.events import announce_handoff
from tests.chat.conftest import FRAME_TIMEOUT, run_daphne, run_worker
from tests.chat.test_widget import browser  # noqa: F401  (the real Chromium fixture)
from tests.conftest import REPO_ROOT

from .conftest import session_cookie

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.services]
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
            "JSON.parse(Object.entries(localStorage).find(([k]) => k.startsWith('shop-assistant:'))[1]).conversation"
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
        assert errors == []
