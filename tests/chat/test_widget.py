"""The widget in real headless Chromium against daphne: ask, watch the answer stream in with a card, reload."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from channels.db import database_sync_to_async

from .conftest import FRAME_TIMEOUT, run_daphne

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]


def said(text: str) -> re.Pattern[str]:
    """A shopper's bubble as a whole: what a screen reader hears before it, the message, then its time (issue 40),
    in the browser's locale ("9:30 PM", "21:30"; the date before it on another day)."""
    return re.compile("^You said:" + re.escape(text) + r"(\w{3} \d{1,2}, )?\d{1,2}:\d{2}(\s?[AP]M)?$")


# The widget's saved conversation in localStorage (not its outbox, whose key ends in ":outbox").
SAVED_JS = "Object.entries(localStorage).find(([k]) => k.startsWith('shop-assistant:') && !k.endsWith(':outbox'))[1]"

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
async def browser():
    """Debian's headless Chromium (Playwright never downloads a browser here); fails in CI when missing."""
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        message = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


@pytest.fixture
async def page(browser):
    context = await browser.new_context()
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    yield page
    await context.close()


async def test_ask_stream_card_and_history_after_reload(daphne_server, demo_store, page):
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    await page.goto(daphne_server.http + "/")
    launcher = page.get_by_role("button", name="Chat with us")
    await expect(launcher).to_be_visible()
    await launcher.press("Enter")  # keyboard only

    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
    box = page.get_by_label("Your message")
    await expect(box).to_be_focused()

    # Watch the assistant's text arrive: its length, and whether the answer was still being written, each time the
    # DOM changes.
    await page.evaluate(
        """() => {
            const root = document.querySelector('#shop-assistant-widget').shadowRoot;
            window.__lengths = [];
            new MutationObserver(() => {
                const answers = root.querySelectorAll('.sa-assistant');
                const last = answers[answers.length - 1];
                if (last) window.__lengths.push([last.querySelector('.sa-text').textContent.length,
                                                 last.hasAttribute('aria-busy')]);
            }).observe(root.querySelector('.sa-log'), {subtree: true, childList: true, characterData: true});
        }"""
    )
    await box.fill("Do you have rain jackets?")
    await box.press("Enter")

    user = page.locator(".sa-msg.sa-user")
    await expect(user).to_have_text(said("Do you have rain jackets?"))
    card = page.locator(".sa-assistant .sa-card").first
    await expect(card).to_be_visible(timeout=timeout)
    answer = page.locator(".sa-assistant .sa-text").last
    await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)  # `end` arrived
    text = (await answer.text_content()).strip()
    assert text
    # The opening (composed from the catalog) is on screen while the model is still writing: the answer streams.
    seen = await page.evaluate("window.__lengths")
    assert any(length and busy for length, busy in seen), f"no text before the answer ended: {seen}"

    # The card shows the catalog's data: a price, a stock badge and an http(s) link.
    card_title = (await card.locator(".sa-card-title").text_content()).strip()
    assert card_title
    assert (await card.locator(".sa-card-price").text_content()).strip()
    assert (await card.locator(".sa-stock").text_content()) in {"In stock", "Out of stock"}
    link = await card.locator("a").get_attribute("href")
    assert link is None or link.startswith(("http://", "https://"))

    # Reload: the panel reopens, resumes from localStorage and shows the history with its card.
    token = await page.evaluate(SAVED_JS)
    await page.reload()
    await expect(page.get_by_role("dialog")).to_be_visible()
    await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
    await expect(page.locator(".sa-msg.sa-user")).to_have_text(said("Do you have rain jackets?"))
    await expect(page.locator(".sa-assistant .sa-text").last).to_have_text(text)
    await expect(page.locator(".sa-assistant .sa-card-title").first).to_have_text(card_title)
    assert await page.evaluate(SAVED_JS) == token

    # Escape closes the panel and gives focus back to the launcher.
    await page.get_by_label("Your message").press("Escape")
    await expect(page.get_by_role("dialog")).to_be_hidden()
    await expect(page.get_by_role("button", name="Chat with us")).to_be_focused()
    assert page.errors == []


async def test_quotes_no_match_and_handoff_replies(daphne_server, demo_store, page):
    """A policy answer shows the store's own sentence as a quote; no-match and handoff are fixed replies."""
    from playwright.async_api import expect

    from shop_assistant.chat.models import Conversation

    timeout = FRAME_TIMEOUT * 1000
    await page.goto(daphne_server.http + "/")
    await page.get_by_role("button", name="Chat with us").click()
    await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
    box = page.get_by_label("Your message")
    done = page.locator(".sa-assistant[aria-busy]")

    await box.fill("What is your return policy?")
    await box.press("Enter")
    quote = page.locator(".sa-assistant .sa-source").last
    await expect(quote.locator(".sa-quote")).to_contain_text("within 30 days of delivery", timeout=timeout)
    await expect(quote.locator(".sa-source-title")).to_have_text("Returns and refunds")
    await expect(done).to_have_count(0, timeout=timeout)

    await box.fill("Do you sell laptops?")
    await box.press("Enter")
    reply = page.locator(".sa-assistant").last
    await expect(reply.locator(".sa-text")).to_contain_text("we don't carry laptops", timeout=timeout)
    await expect(reply).to_have_attribute("data-reply", "no_match", timeout=timeout)
    assert await reply.locator(".sa-card").count() == 0

    await box.fill("Can I talk to a person?")
    await box.press("Enter")
    reply = page.locator(".sa-assistant").last
    await expect(reply).to_have_attribute("data-reply", "handoff", timeout=timeout)
    await expect(reply.locator(".sa-text")).to_contain_text("team", timeout=timeout)
    await expect(page.locator(".sa-status")).to_have_text("A person has been asked to join")
    token = await page.evaluate(SAVED_JS)
    conversation_id = json.loads(token)["conversation"]
    conversation = await database_sync_to_async(Conversation.objects.get)(pk=conversation_id)
    assert conversation.status == "handoff" and conversation.handoff_requested_at is not None
    assert page.errors == []


async def test_the_store_s_greeting_is_the_first_bubble_shown_as_text(daphne_server, demo_store, page):
    """The studio's greeting (owner text) opens the conversation, before the history, never parsed as HTML."""
    from playwright.async_api import expect

    from shop_assistant.chat.models import AnswerSettings

    greeting = 'Welcome to **Demo Outfitters**!\n<img src=x onerror="window.pwned=1"> Ask away.'
    await database_sync_to_async(AnswerSettings.objects.update_or_create)(
        store=demo_store, defaults={"greeting": greeting}
    )

    await page.goto(daphne_server.http + "/")
    await page.get_by_role("button", name="Chat with us").click()
    await expect(page.locator(".sa-status")).to_have_text("Online", timeout=FRAME_TIMEOUT * 1000)
    first = page.locator(".sa-log > *").first
    await expect(first).to_have_class("sa-msg sa-greeting")
    await expect(first.locator(".sa-text")).to_have_text(greeting)  # the characters as written, markup and all
    assert await first.locator("img, strong").count() == 0
    assert await page.evaluate("window.pwned") is None
    assert await page.locator(".sa-assistant").count() == 0  # shown, not an answer of the conversation
    assert page.errors == []


async def test_markdown_is_rendered_safely(daphne_server, page):
    await page.goto(daphne_server.http + "/static/widget/widget.css")  # any same-origin page without the widget
    await page.set_content(
        f'<body><script src="{daphne_server.http}/static/widget/widget.js" data-store="none"></script></body>'
    )
    await page.wait_for_function("window.ShopAssistant !== undefined")
    result = await page.evaluate(
        """() => {
            const source = [
                'Hello **bold** and *italic* <img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>',
                '- one [shop](https://shop.example/p?a=1&b=2)',
                '- two [bad](javascript:alert(1)) [worse](data:text/html,hi)',
                'Shipped, tracking: https://track.example/t?n=1Z_9_A, expected Dec 6. Not javascript:alert(3).',
                '1. first',
                '2. second',
            ].join('\\n');
            const div = document.createElement('div');
            div.appendChild(window.ShopAssistant.renderMarkdown(source));
            document.body.appendChild(div);
            return {
                html: div.innerHTML,
                text: div.textContent,
                strong: [...div.querySelectorAll('strong')].map(e => e.textContent),
                em: [...div.querySelectorAll('em')].map(e => e.textContent),
                links: [...div.querySelectorAll('a')].map(a => [a.textContent, a.getAttribute('href'), a.rel]),
                ul: div.querySelectorAll('ul > li').length,
                ol: div.querySelectorAll('ol > li').length,
                dangerous: div.querySelectorAll('img, script, iframe').length,
                xss: window.pwned || 0,
            };
        }"""
    )
    assert result["dangerous"] == 0 and result["xss"] == 0
    assert '<img src=x onerror="window.pwned=1">' in result["text"]  # shown as text, not parsed
    assert result["strong"] == ["bold"] and result["em"] == ["italic"]
    # A bare address (the order replies' tracking link) is a link, without the sentence's comma after it.
    assert result["links"] == [["shop", "https://shop.example/p?a=1&b=2", "noopener noreferrer nofollow"],
                               ["https://track.example/t?n=1Z_9_A", "https://track.example/t?n=1Z_9_A",
                                "noopener noreferrer nofollow"]]
    assert "https://track.example/t?n=1Z_9_A, expected Dec 6. Not javascript:alert(3)." in result["text"]
    assert "[bad](javascript:alert(1))" in result["text"]  # non-http(s) links stay plain text
    assert result["ul"] == 2 and result["ol"] == 2


async def test_reconnects_after_a_server_restart_and_resumes(demo_store, page, tmp_path):
    """The server goes away mid-conversation; the widget backs off, reconnects and shows the same history."""
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    with run_daphne(tmp_path) as server:
        port = server.port
        await page.goto(server.http + "/")
        await page.get_by_role("button", name="Chat with us").click()
        await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        box = page.get_by_label("Your message")
        await box.fill("Hello, anyone there?")
        await box.press("Enter")
        await expect(page.locator(".sa-assistant")).to_have_count(1, timeout=timeout)
        await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)
        answer = (await page.locator(".sa-assistant .sa-text").text_content()).strip()

    await expect(page.locator(".sa-status")).to_contain_text("reconnecting", timeout=timeout)
    with run_daphne(tmp_path, port=port):
        await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        await expect(page.locator(".sa-msg.sa-user")).to_have_text(said("Hello, anyone there?"))
        await expect(page.locator(".sa-assistant .sa-text")).to_have_text(answer)
        assert page.errors == []


def _page_files(base: str) -> dict[str, tuple[str, bytes]]:
    """The storefront page and its scripts and styles, by path: (content type, body)."""
    import re
    import urllib.request

    files = {}
    with urllib.request.urlopen(base + "/") as response:
        files["/"] = (response.headers["Content-Type"], response.read())
    for path in set(re.findall(rb'(?:src|href)="(/static/[^"]+\.(?:js|css))"', files["/"][1])):
        with urllib.request.urlopen(base + path.decode()) as response:
            files[path.decode()] = (response.headers["Content-Type"], response.read())
    return files


async def _from_cache(route, files: dict[str, tuple[str, bytes]]) -> None:
    from urllib.parse import urlsplit

    path = urlsplit(route.request.url).path
    if path in files:
        await route.fulfill(status=200, content_type=files[path][0], body=files[path][1])
    else:
        await route.abort()


def _user_rows(text: str) -> list[tuple[str, str | None]]:
    from shop_assistant.chat.models import Message

    return [(m.text, str(m.client_id) if m.client_id else None) for m in Message.objects.filter(role="user", text=text)]


@pytest.fixture
async def offline_page(browser):
    """A page whose reload may come from the test's cache while the server is down (``page.route``): Chromium takes
    such a page for a public one and would refuse its socket to 127.0.0.1 (Local Network Access), so here that
    check is off."""
    own = await browser.browser_type.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS + ["--disable-features=LocalNetworkAccessChecks"]
    )
    page = await (await own.new_context()).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    yield page
    await own.close()


async def test_the_outbox_keeps_a_message_through_a_kill_and_a_reload_and_it_is_stored_once(
    demo_store, offline_page, tmp_path
):
    """Sent while the server is down (kill -9), then the page reloaded: the message waits in the outbox (shown as not
    sent yet, not failed) and goes once the server is back. Then one sent and the server killed at once: sent again
    after the restart, stored once, answered."""
    import os
    import signal

    from playwright.async_api import expect

    page = offline_page
    timeout = FRAME_TIMEOUT * 1000
    outbox = "() => JSON.parse(Object.entries(localStorage).find(([k]) => k.endsWith(':outbox'))?.[1] || '[]')"
    with run_daphne(tmp_path, CHAT_SPOOL_DIR=str(tmp_path / "spool")) as server:
        port = server.port
        await page.goto(server.http + "/")
        await page.get_by_role("button", name="Chat with us").click()
        await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        files = _page_files(server.http)
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=30)
        await expect(page.locator(".sa-status")).to_contain_text("reconnecting", timeout=timeout)
        box = page.get_by_label("Your message")
        await box.fill("Do you sell tents?")
        await box.press("Enter")
        pending = page.locator(".sa-msg.sa-user.sa-pending")
        await expect(pending).to_contain_text("Not sent yet")
        assert await page.locator(".sa-failed").count() == 0
        [entry] = await page.evaluate(outbox)
        assert entry["text"] == "Do you sell tents?"
        # Reloaded while the server is down (the page and the widget's files as a browser cache would keep them): the
        # outbox is in localStorage, so the message is still there, still waiting.
        await page.route(server.http + "/**", lambda route: _from_cache(route, files))
        await page.reload()
        await expect(page.locator(".sa-msg.sa-user.sa-pending")).to_contain_text("Do you sell tents?")
        await page.unroute(server.http + "/**")

    with run_daphne(tmp_path, port=port, CHAT_SPOOL_DIR=str(tmp_path / "spool")) as server:
        await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        await expect(page.locator(".sa-assistant")).to_have_count(1, timeout=timeout)
        await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)  # its `end` came
        await expect(page.locator(".sa-msg.sa-user")).to_have_text(said("Do you sell tents?"))
        assert await page.evaluate(outbox) == []
        assert await database_sync_to_async(_user_rows)("Do you sell tents?") == [("Do you sell tents?", entry["id"])]

        box = page.get_by_label("Your message")
        await box.fill("Do you have rain jackets?")
        await box.press("Enter")
        os.kill(server.process.pid, signal.SIGKILL)  # at once: before or after the server kept it, nobody knows
        server.process.wait(timeout=30)

    with run_daphne(tmp_path, port=port, CHAT_SPOOL_DIR=str(tmp_path / "spool")):
        await expect(page.locator(".sa-status")).to_have_text("Online", timeout=timeout)
        await expect(page.locator(".sa-msg.sa-user").last).to_have_text(said("Do you have rain jackets?"),
                                                                         timeout=timeout)
        await expect(page.locator(".sa-assistant:not(.sa-interrupted)")).to_have_count(2, timeout=timeout)
        await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)
        await expect(page.locator(".sa-pending")).to_have_count(0)
        assert await page.evaluate(outbox) == []
        assert len(await database_sync_to_async(_user_rows)("Do you have rain jackets?")) == 1
        assert await page.locator(".sa-msg.sa-user").count() == 2
        assert page.errors == []
