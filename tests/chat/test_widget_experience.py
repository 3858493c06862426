"""The shopper's widget as people expect it from Intercom Messenger or Shopify Inbox (issue 24), in real headless
Chromium against daphne: the greeting and suggested questions, follow-ups about the cards shown, thumbs, quotes and
status after a reload, the out-of-hours email, the rating after an agent resolves, and the phone layout.

Screenshots of each walk go to docs/experience/shopper-*.png."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.conftest import screenshot_dir

from .conftest import FRAME_TIMEOUT
from .test_widget import browser, page, said  # noqa: F401 - the same Chromium fixtures

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]

SHOTS = screenshot_dir("experience")
TIMEOUT = FRAME_TIMEOUT * 1000


async def shot(page, name: str) -> None:
    await page.screenshot(path=str(SHOTS / f"shopper-{name}.png"))


async def open_chat(page, server) -> None:
    from playwright.async_api import expect

    await page.goto(server.http + "/")
    await page.get_by_role("button", name="Chat with us").click()
    await expect(page.locator(".sa-status")).not_to_have_text("Connecting\u2026", timeout=TIMEOUT)


async def ask(page, text: str) -> None:
    from playwright.async_api import expect

    answers = page.locator(".sa-assistant")
    before = await answers.count()
    box = page.get_by_label("Your message")
    await box.fill(text)
    await box.press("Enter")
    await expect(answers).to_have_count(before + 1, timeout=TIMEOUT)  # its `start`
    await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=TIMEOUT)  # its `end`


async def conversation_id(page) -> str:
    # The widget's saved conversation, not its outbox (shop-assistant:<host>:<store>:outbox, a list).
    saved = await page.evaluate(
        "Object.entries(localStorage).find(([k]) => k.startsWith('shop-assistant:') && !k.endsWith(':outbox'))[1]")
    return json.loads(saved)["conversation"]


async def set_hours(store, hours: dict) -> None:
    from shop_assistant.chat.models import AnswerSettings

    await database_sync_to_async(AnswerSettings.objects.update_or_create)(store=store, defaults={"support_hours": hours})


async def test_greeting_suggestions_and_a_follow_up_comparing_the_cards(daphne_server, demo_store, page):
    from playwright.async_api import expect

    from shop_assistant.chat.models import CardClick, Message
    from shop_assistant.demo.store import SAMPLE_QUESTIONS

    await open_chat(page, daphne_server)
    await expect(page.locator(".sa-log > *").first).to_have_class("sa-msg sa-greeting")
    suggestions = page.locator(".sa-suggestion")
    await expect(suggestions).to_have_text(list(SAMPLE_QUESTIONS))
    await shot(page, "greeting")

    # A suggestion is asked as it reads, and the suggestions go once the shopper has said something.
    await suggestions.filter(has_text="Do you have rain jackets?").click()
    await expect(page.locator(".sa-msg.sa-user")).to_have_text(said("Do you have rain jackets?"))
    await expect(suggestions).to_have_count(0)
    await expect(page.locator(".sa-assistant")).to_have_count(1, timeout=TIMEOUT)
    await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=TIMEOUT)
    await expect(page.locator(".sa-assistant .sa-card").first).to_be_visible()

    await ask(page, "Do you have backpacks?")
    cards = page.locator(".sa-assistant").last.locator(".sa-card-title")
    titles = [text.strip() for text in await cards.all_text_contents()]
    assert len(titles) >= 2 and any("Daytripper" in t for t in titles) and any("Summit" in t for t in titles), titles

    # "Which of those is cheaper?" is about the backpacks just shown: the cheapest first, the cards again.
    await ask(page, "Which of those is cheaper?")
    reply = page.locator(".sa-assistant").last
    await expect(reply).to_have_attribute("data-reply", "compare")
    await expect(reply.locator(".sa-text")).to_contain_text("The Daytripper 22L Daypack is the least expensive at 69.00 USD")
    again = [text.strip() for text in await reply.locator(".sa-card-title").all_text_contents()]
    assert again[0].startswith("Daytripper 22L Daypack") and sorted(again) == sorted(titles)
    # The card's price reads as the sentence above it writes it.
    await expect(reply.locator(".sa-card-price").first).to_have_text("69.00 USD")

    # The log follows the answer to its end, thumbs included (they come after the last text): before any click,
    # which would scroll them into view itself.
    at_end = "log => log.scrollHeight - log.scrollTop - log.clientHeight < 2"
    await expect(reply.locator(".sa-rating")).to_be_visible()
    assert await page.locator(".sa-log").evaluate(at_end)

    # Thumbs up on the comparison: stored, shown pressed; pressed again takes it back.
    helpful = reply.get_by_role("button", name="Helpful", exact=True)
    await helpful.click()
    await expect(helpful).to_have_attribute("aria-pressed", "true")
    message_id = await reply.get_attribute("data-message-id")
    assert await database_sync_to_async(lambda: Message.objects.get(pk=message_id).rating)() == 1
    await shot(page, "compare")
    await reply.get_by_role("button", name="Not helpful").click()
    await expect(reply.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")
    await expect(helpful).to_have_attribute("aria-pressed", "false")
    assert await database_sync_to_async(lambda: Message.objects.get(pk=message_id).rating)() == -1

    # Opening a card's link is reported for the store's analytics (the product page itself is the shop's).
    await page.context.route("https://demo-outfitters.example/**", lambda route: route.fulfill(body="product page"))
    async with page.context.expect_page() as opened:
        await reply.locator(".sa-card-title a").first.click()
    await (await opened.value).close()
    clicks = lambda: list(CardClick.objects.values_list("message_id", "product__title"))  # noqa: E731
    for _ in range(100):
        if await database_sync_to_async(clicks)():
            break
        await asyncio.sleep(0.1)
    assert [(str(m), title) for m, title in await database_sync_to_async(clicks)()] == [
        (message_id, "Daytripper 22L Daypack")
    ]
    assert page.errors == []


async def test_a_reload_keeps_the_quotes_the_thumbs_and_the_status(daphne_server, demo_store, page):
    from playwright.async_api import expect

    await set_hours(demo_store, {})  # agents always there: the handoff asks for no email
    await open_chat(page, daphne_server)
    await ask(page, "What is your return policy?")
    quote = page.locator(".sa-assistant .sa-source").first
    await expect(quote.locator(".sa-quote")).to_contain_text("within 30 days of delivery")
    await page.locator(".sa-assistant").first.get_by_role("button", name="Not helpful").click()
    await expect(page.locator(".sa-assistant").first.get_by_role("button", name="Not helpful")).to_have_attribute(
        "aria-pressed", "true"
    )
    await ask(page, "Can I talk to a person?")
    await expect(page.locator(".sa-status")).to_have_text("A person has been asked to join")
    assert await page.locator(".sa-email").count() == 0

    await page.reload()
    await expect(page.locator(".sa-msg.sa-user")).to_have_count(2, timeout=TIMEOUT)
    await expect(page.locator(".sa-status")).to_have_text("A person has been asked to join")
    first = page.locator(".sa-assistant").first
    await expect(first.locator(".sa-source .sa-quote")).to_contain_text("within 30 days of delivery")
    await expect(first.locator(".sa-source-title")).to_have_text("Returns and refunds")
    await expect(first.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")
    assert await page.locator(".sa-suggestion").count() == 0
    await shot(page, "reload")
    assert page.errors == []


async def test_out_of_hours_the_handoff_says_when_and_takes_an_email(daphne_server, demo_store, page):
    from playwright.async_api import expect

    from shop_assistant.chat.models import Conversation

    # Hours that exclude the present moment ("now" frozen through the store's hours): opening in two hours.
    now = timezone.now()
    opens, closes = (now + timedelta(hours=2)).strftime("%H:00"), (now + timedelta(hours=3)).strftime("%H:00")
    await set_hours(demo_store, {"timezone": "America/New_York", "open": opens, "close": closes})
    await open_chat(page, daphne_server)
    await ask(page, "Can I talk to a person?")
    reply = page.locator(".sa-assistant").last
    await expect(reply.locator(".sa-text")).to_contain_text("agents are back at")
    await expect(reply.locator(".sa-text")).to_contain_text("(America/New_York)")
    offer = page.locator(".sa-email")
    await expect(offer).to_be_visible()
    await expect(offer.locator("label")).to_contain_text("(America/New_York)")

    field = page.get_by_label("Our team is back at", exact=False)
    await field.fill("not-an-email")
    await offer.get_by_role("button", name="Save").click()
    await expect(offer).to_be_visible()  # the browser's own check refuses it; nothing sent
    await field.fill("sam@example.com")
    await shot(page, "away-email")
    await offer.get_by_role("button", name="Save").click()
    await expect(page.locator(".sa-notice").last).to_have_text("Thanks! We'll email you at sam@example.com if we can't answer you here.")
    await expect(offer).to_have_count(0)
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=await conversation_id(page))
    assert conversation.shopper_email == "sam@example.com" and conversation.status == "handoff"

    await page.reload()  # the email is known: no second offer
    await expect(page.locator(".sa-status")).to_have_text("A person has been asked to join", timeout=TIMEOUT)
    assert await page.locator(".sa-email").count() == 0
    assert page.errors == []


async def test_resolved_by_an_agent_the_shopper_sees_the_end_and_rates_it(daphne_server, demo_store, page):
    from playwright.async_api import expect

    from shop_assistant.chat.models import Conversation
    from tests.console.conftest import session_cookie
    from tests.console.test_server import StaffHttp

    await set_hours(demo_store, {})
    await open_chat(page, daphne_server)
    await ask(page, "Can I talk to a person?")
    conversation = await conversation_id(page)

    # The agent resolves it in the console (the view calls console.services.close in daphne's process).
    agent = await database_sync_to_async(get_user_model().objects.get)(username="agent")
    staff = StaffHttp(daphne_server, await database_sync_to_async(session_cookie)(agent))
    await staff.get(f"/console/c/{conversation}/")
    assert (await staff.post(f"/console/c/{conversation}/close"))["status"] == "closed"

    await expect(page.locator(".sa-status")).to_have_text("Conversation ended", timeout=TIMEOUT)
    card = page.locator(".sa-csat")
    await expect(card).to_be_visible()
    send = card.get_by_role("button", name="Send rating")
    await expect(send).to_be_disabled()
    await card.get_by_role("radio", name="4 of 5").click()
    await card.get_by_label("Comment").fill("Quick and kind.")
    await shot(page, "csat")
    await send.click()
    await expect(page.locator(".sa-csat-thanks")).to_have_text("Thanks for rating this conversation (4 of 5).")
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation)
    assert (row.csat_rating, row.csat_comment) == (4, "Quick and kind.") and row.csat_at is not None

    await page.reload()  # still ended, already rated
    await expect(page.locator(".sa-status")).to_have_text("Conversation ended", timeout=TIMEOUT)
    await expect(page.locator(".sa-csat-thanks")).to_be_visible()
    assert await page.locator(".sa-csat form, form.sa-csat").count() == 0

    # Writing again: the assistant answers as before (the app's behaviour after a resolution).
    await ask(page, "Do you have rain jackets?")
    await expect(page.locator(".sa-status")).to_have_text("Online")
    await expect(page.locator(".sa-assistant .sa-card").last).to_be_visible()
    assert page.errors == []


async def test_times_an_unread_badge_for_an_agent_and_the_shopper_ends_the_chat(daphne_server, demo_store, page):
    """Issue 40, as an Intercom Messenger user expects it: each message shows its time (<time datetime>, the server's
    time after a reload); an agent's message to a closed widget puts a count on the launcher and "(1) New message"
    in the tab's title until the widget is opened; "End chat" (after a confirm step) resolves the conversation as
    an agent's resolve does, brings the rating card, and "Start a new chat" begins a new conversation."""
    from playwright.async_api import expect

    from shop_assistant.chat.models import Conversation, Message
    from shop_assistant.console.models import Action
    from tests.console.conftest import session_cookie
    from tests.console.test_server import StaffHttp

    await set_hours(demo_store, {})
    await open_chat(page, daphne_server)
    await ask(page, "Can I talk to a person?")
    conversation = await conversation_id(page)

    # Times: under every message, the shopper's local time, machine-readable; after a reload, the server's.
    mine = page.locator(".sa-msg.sa-user time.sa-time")
    await expect(mine).to_have_count(1)
    await expect(page.locator(".sa-assistant time.sa-time")).to_have_count(1)
    await page.reload()
    await expect(mine).to_have_count(1, timeout=TIMEOUT)
    said_at = await database_sync_to_async(
        lambda: Message.objects.get(conversation_id=conversation, role="user").created_at)()
    stamp = await mine.get_attribute("datetime")
    assert abs(datetime.fromisoformat(stamp.replace("Z", "+00:00")) - said_at) < timedelta(milliseconds=2)
    shown = await mine.text_content()
    assert shown == await mine.evaluate(
        "t => new Date(t.dateTime).toLocaleTimeString([], {hour: 'numeric', minute: '2-digit'})")

    # The shopper closes the widget; an agent takes the chat over and writes: the launcher counts, the title says so.
    # (Reloaded with the panel closed: the widget connects anyway, since the conversation has messages.)
    title = await page.title()
    await page.keyboard.press("Escape")
    await page.reload()
    launcher = page.locator(".sa-launcher")
    await expect(launcher).to_be_visible()
    await expect(page.locator(".sa-status")).to_have_text("A person has been asked to join", timeout=TIMEOUT)
    await expect(launcher.locator(".sa-badge")).to_be_hidden()
    agent = await database_sync_to_async(get_user_model().objects.get)(username="agent")
    staff = StaffHttp(daphne_server, await database_sync_to_async(session_cookie)(agent))
    await staff.get(f"/console/c/{conversation}/")
    await staff.post(f"/console/c/{conversation}/take")
    await staff.post(f"/console/c/{conversation}/reply", text="Hi, I'm here. What can I do for you?")
    await expect(launcher.locator(".sa-badge")).to_have_text("1", timeout=TIMEOUT)
    await expect(page).to_have_title(f"(1) New message \u2013 {title}")
    await expect(page.get_by_role("button", name="Chat with us, 1 unread message")).to_be_visible()
    await staff.post(f"/console/c/{conversation}/reply", text="Are you still there?")
    await expect(launcher.locator(".sa-badge")).to_have_text("2", timeout=TIMEOUT)
    await expect(page).to_have_title(f"(2) New messages \u2013 {title}")
    await shot(page, "unread")
    await launcher.click()  # opening reads them
    await expect(page).to_have_title(title)
    await expect(page.locator(".sa-msg.sa-agent")).to_have_count(2)
    assert await page.locator(".sa-badge").evaluate("b => b.hidden")

    # End chat asks first: "Keep chatting" changes nothing.
    end = page.get_by_role("button", name="End chat", exact=True).first
    await end.click()
    confirm = page.get_by_role("alertdialog")
    await expect(confirm).to_contain_text("End this chat?")
    await confirm.get_by_role("button", name="Keep chatting").click()
    await expect(confirm).to_be_hidden()
    assert (await database_sync_to_async(Conversation.objects.get)(pk=conversation)).status == "agent"
    await end.click()
    await shot(page, "end-confirm")
    await confirm.get_by_role("button", name="End chat").click()
    await expect(page.locator(".sa-status")).to_have_text("Conversation ended", timeout=TIMEOUT)
    card = page.locator(".sa-csat")
    await expect(card).to_be_visible()
    await expect(end).to_be_hidden()
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation)
    assert row.status == "closed"
    closed_by = await database_sync_to_async(
        lambda: list(Action.objects.filter(conversation_id=conversation, kind="close").values_list("user", "detail")))()
    assert closed_by == [(None, {"by": "shopper"})]
    console_page = (await staff.get(f"/console/c/{conversation}/")).decode()
    assert "Shopper · Close (the shopper ended the chat)" in console_page
    await card.get_by_role("radio", name="5 of 5").click()
    await card.get_by_role("button", name="Send rating").click()
    await expect(page.locator(".sa-csat-thanks")).to_have_text("Thanks for rating this conversation (5 of 5).")
    await shot(page, "ended-by-shopper")

    # A new chat is a new conversation; the ended one stays resolved, with its rating.
    await page.get_by_role("button", name="Start a new chat").click()
    await expect(page.locator(".sa-status")).to_have_text("Online", timeout=TIMEOUT)
    await expect(page.locator(".sa-log > *").first).to_have_class("sa-msg sa-greeting")
    await expect(page.locator(".sa-suggestion").first).to_be_visible()
    assert await page.locator(".sa-msg.sa-user").count() == 0
    fresh = await conversation_id(page)
    assert fresh != conversation
    row = await database_sync_to_async(Conversation.objects.get)(pk=conversation)
    assert (row.status, row.csat_rating) == ("closed", 5)
    assert page.errors == []


def _luminance(rgb: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


async def test_on_a_phone_the_panel_is_the_screen_and_keeps_the_focus(daphne_server, demo_store, browser):  # noqa: F811
    from playwright.async_api import expect

    context = await browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        await open_chat(page, daphne_server)
        panel = page.get_by_role("dialog")
        box = await panel.bounding_box()
        assert (box["x"], box["y"], box["width"], box["height"]) == (0, 0, 390, 844), box
        overflow = await page.evaluate("[getComputedStyle(document.documentElement).overflow, getComputedStyle(document.body).overflow]")
        assert overflow == ["hidden", "hidden"]  # the page behind does not scroll
        message = page.get_by_label("Your message")
        assert await message.evaluate("e => getComputedStyle(e).fontSize") == "16px"  # no zoom on focus in iOS
        await expect(message).to_be_focused()

        # The focus ring: 3:1 or more against the panel's white.
        ring = await message.evaluate("e => getComputedStyle(e).outlineColor")
        rgb = tuple(int(part) for part in ring[ring.index("(") + 1 : ring.index(")")].split(",")[:3])
        assert contrast(rgb, (255, 255, 255)) >= 3, ring
        await shot(page, "phone")

        # Tab and Shift+Tab cycle inside the panel; they never reach the page behind.
        inside = "() => { const host = document.querySelector('#shop-assistant-widget'); " \
                 "return document.activeElement === host && !!host.shadowRoot.activeElement && " \
                 "!!host.shadowRoot.activeElement.closest('#sa-panel'); }"  # fmt: skip
        seen = set()
        for _ in range(12):
            await page.keyboard.press("Tab")
            assert await page.evaluate(inside)
            seen.add(await page.evaluate("document.querySelector('#shop-assistant-widget').shadowRoot.activeElement.className"))
        assert {"sa-close", "sa-input"} <= seen, seen
        for _ in range(12):
            await page.keyboard.press("Shift+Tab")
            assert await page.evaluate(inside)

        # Escape closes, gives the focus back to the launcher, and the page scrolls again.
        await page.keyboard.press("Escape")
        await expect(panel).to_be_hidden()
        await expect(page.get_by_role("button", name="Chat with us")).to_be_focused()
        assert await page.evaluate("getComputedStyle(document.body).overflow") != "hidden"
        assert errors == []
    finally:
        await context.close()
