"""Orders end to end in real headless Chromium, on daphne with the Redis layer and a Celery worker (issue 38):

- a shopper asks "where is my order?", is asked for the number and email, gives them, and reads the order's status,
  carrier and tracking link, each word from the order's row;
- a shopper with a wrong email reads nothing about the order;
- another shopper asks to return an item: the returns policy's sentence is quoted and a request is created; an
  agent finds it in the console's queue, sees the verified order in the conversation's context panel, accepts it
  with a note, and the shopper's widget shows the outcome;
- the owner's studio orders page, with its imports, on a phone.

Every page visited is checked at 390 px for sideways scrolling. Pictures go to docs/orders/ with SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from shop_assistant.orders import replies, verification
from shop_assistant.orders.models import ConversationOrder, Order, OrderRequest
from tests.chat.conftest import FRAME_TIMEOUT, daphne_server, demo_store, run_daphne, run_worker  # noqa: F401
from tests.chat.test_widget import browser, page  # noqa: F401  (the real Chromium fixtures)
from tests.conftest import screenshot_dir
from tests.console.conftest import session_cookie
from tests.studio.conftest import make_user, wait_until_ready
from tests.studio.test_insight_browser import log_in

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.services, pytest.mark.backend_agnostic]

SHOTS = screenshot_dir("orders")
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
NOTE = "Print the label we emailed you and drop the parcel at any USPS office."


@pytest.fixture
def orders_redis_url(redis_url) -> str:
    """A Redis database of this walk's own (12): Celery queues and channel-layer groups are per database, so the
    worker of another browser walk on the same Redis (the console's uses 13) never takes this walk's tasks."""
    import redis

    base, _, db = redis_url.rpartition("/")
    url = f"{base}/12" if db.isdigit() else redis_url.rstrip("/") + "/12"
    redis.Redis.from_url(url).flushdb()  # tasks left queued by an earlier, interrupted run
    return url


@pytest.fixture(autouse=True)
def fresh_limits():
    verification.reset()
    yield
    verification.reset()


def _order(number: str) -> Order:
    return Order.objects.prefetch_related("lines").get(store__slug="demo", number=number)


def _returns_document_body() -> str:
    from catalog.models import StoreDocument

    return StoreDocument.objects.get(store__slug="demo", kind=StoreDocument.Kind.RETURNS).body


def _requests(conversation_id: str) -> list[OrderRequest]:
    return list(OrderRequest.objects.filter(conversation_id=conversation_id).select_related("order"))


def _verified_number(conversation_id: str) -> str | None:
    state = ConversationOrder.objects.filter(conversation_id=conversation_id).select_related("order").first()
    return state.order.number if state is not None and state.order is not None else None


def _cookies() -> dict[str, str]:
    User = get_user_model()
    return {who: session_cookie(User.objects.get(username=who)).split("=", 1)[1] for who in ("agent", "owner")}


async def eventually(read, *args, seconds: float = 30.0):
    """``read(*args)`` in a database thread until it is truthy: the chat records after the answer is shown."""
    import asyncio
    import time

    deadline = time.monotonic() + seconds
    while not (value := await database_sync_to_async(read)(*args)) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return value


async def no_sideways_scroll(page, where: str) -> None:
    """The page at the phone's width: nothing wider than the screen (the owner or shopper would pan to read)."""
    width = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"{where}: {width[0]} px wide at {width[1]} px"


async def open_widget(browser, server, errors: list[str]):  # noqa: F811
    from playwright.async_api import expect

    context = await browser.new_context(viewport=DESKTOP)
    page = await context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(server.http + "/")
    await page.get_by_role("button", name="Chat with us").click()
    await expect(page.locator(".sa-status")).to_have_text("Online", timeout=FRAME_TIMEOUT * 1000)
    return page


async def conversation_of(page) -> str:
    # Not the widget's outbox (`...:outbox`), which may come first in the storage's order.
    return await page.evaluate(
        "JSON.parse(Object.entries(localStorage).find(([k]) => k.startsWith('shop-assistant:')"
        " && !k.endsWith(':outbox'))[1]).conversation"
    )


async def ask(page, text: str):
    """Send ``text`` and wait for the new answer to be finished; its bubble."""
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    answers = page.locator(".sa-assistant")
    before = await answers.count()
    box = page.get_by_label("Your message")
    await box.fill(text)
    await box.press("Enter")
    await expect(answers).to_have_count(before + 1, timeout=timeout)
    await expect(page.locator(".sa-assistant[aria-busy]")).to_have_count(0, timeout=timeout)
    return answers.last


async def widget_shots(page, name: str) -> None:
    """The open widget at desktop width (the panel alone) and on a phone (the panel fills the screen)."""
    await page.locator(".sa-panel").screenshot(path=str(SHOTS / f"{name}.png"))
    await page.set_viewport_size(PHONE)
    await no_sideways_scroll(page, f"widget, {name}")
    await page.screenshot(path=str(SHOTS / f"phone-{name}.png"))
    await page.set_viewport_size(DESKTOP)


async def test_status_return_and_the_agents_decision_in_the_widget_and_the_console(
    orders_redis_url, demo_store, browser, settings, tmp_path  # noqa: F811
):
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [orders_redis_url]}}}
    cookies = await database_sync_to_async(_cookies)()
    in_transit = await database_sync_to_async(_order)("1002")
    delivered = await database_sync_to_async(_order)("1003")
    with run_worker(tmp_path, orders_redis_url), run_daphne(tmp_path, REDIS_URL=orders_redis_url) as server:
        errors: list[str] = []
        # The engine loads in the background; a question asked before it is ready waits for it (and the first
        # build of its CPU kernels can take minutes on a busy machine).
        probe = await browser.new_page()
        await wait_until_ready(probe, server.http, seconds=600)
        await probe.close()

        # 1. Where is my order? The assistant asks for both; the number and email bring the order's own words.
        jordan = await open_widget(browser, server, errors)
        asked = await ask(jordan, "where is my order?")
        await expect(asked.locator(".sa-text")).to_have_text(replies.NEED_NUMBER)
        status = await ask(jordan, "1002, jordan@example.com")
        text = status.locator(".sa-text")
        await expect(text).to_contain_text(f"Order #{in_transit.number} shipped on {replies.day(in_transit.fulfilled_at)}")
        await expect(text).to_contain_text(f"with {in_transit.carrier}")
        await expect(text).to_contain_text(f"expected {replies.day(in_transit.expected_on)}")
        link = text.get_by_role("link")
        await expect(link).to_have_attribute("href", in_transit.tracking_url)
        await expect(link).to_have_attribute("target", "_blank")
        assert await eventually(_verified_number, await conversation_of(jordan)) == "1002"
        await widget_shots(jordan, "widget-status")

        # 2. A wrong email: the same words as for no such order, and nothing of order 1002 on screen.
        stranger = await open_widget(browser, server, errors)
        refused = await ask(stranger, "Where is my order 1002? my email is jo@example.com")
        await expect(refused.locator(".sa-text")).to_have_text(replies.NOT_FOUND)
        panel = (await stranger.locator(".sa-panel").text_content()).lower()
        facts = [in_transit.carrier, in_transit.tracking_number, in_transit.tracking_url,
                 replies.day(in_transit.fulfilled_at), "shipped", *(line.title for line in in_transit.lines.all())]
        assert not [fact for fact in facts if fact.lower() in panel], panel
        assert await stranger.locator(".sa-panel a[href*='ups.com']").count() == 0
        assert await database_sync_to_async(_verified_number)(await conversation_of(stranger)) is None

        # The agent has the queue open: a new request is announced there, live.
        agent_ctx = await browser.new_context(viewport=DESKTOP)
        await agent_ctx.add_cookies([{"name": "sessionid", "value": cookies["agent"], "url": server.http}])
        console = await agent_ctx.new_page()
        console.on("pageerror", lambda e: errors.append(str(e)))
        await console.goto(server.http + "/console/orders/")
        await expect(console.locator("#console-live")).to_have_text("live", timeout=timeout)
        await expect(console.locator("#new-requests")).to_be_hidden()

        # 3. A return: asked for the order, then the policy's own sentence quoted and a request for the agents.
        sam = await open_widget(browser, server, errors)
        await ask(sam, "I want to return the fleece jacket from my order")
        returned = await ask(sam, "1003, sam@example.com")
        await expect(returned.locator(".sa-text")).to_contain_text(
            f"return request for Cascade Fleece Jacket (M / Forest) from order #{delivered.number}")
        quote = (await returned.locator(".sa-quote").first.text_content()).strip()
        body = await database_sync_to_async(_returns_document_body)()
        assert quote in body and "30 days" in quote, quote
        sam_conversation = await conversation_of(sam)
        requests = await eventually(_requests, sam_conversation)
        assert [(r.kind, r.status, r.order.number) for r in requests] == [("return", "pending", "1003")]
        request = requests[0]
        await widget_shots(sam, "widget-return")

        # 4. The agent: the queue, the conversation's context panel, the decision with a note.
        await expect(console.locator("#new-requests")).to_be_visible(timeout=timeout)
        await console.locator("#new-requests").get_by_role("link", name="Show it").click()
        await expect(console.locator("#console-live")).to_have_text("live", timeout=timeout)
        card = console.locator(f"#request-{request.pk}")
        await expect(card).to_contain_text(f"order #{delivered.number}")
        await expect(card.locator(".badge")).to_have_text("Pending")
        await expect(card.locator(".request-lines")).to_have_text("Cascade Fleece Jacket (M / Forest)")
        await card.get_by_label("Note to the shopper").fill(NOTE)
        await card.screenshot(path=str(SHOTS / "console-queue.png"))

        await card.get_by_role("link", name="Open the conversation").click()
        await expect(console).to_have_url(f"{server.http}/console/c/{sam_conversation}/")
        order_panel = console.locator("#order")
        await expect(order_panel.locator("h2")).to_contain_text(f"Order #{delivered.number}")
        await expect(order_panel.locator("h2")).to_contain_text("verified by e-mail")
        await expect(order_panel).to_contain_text(delivered.carrier)
        await expect(order_panel.get_by_role("link", name=re.compile("usps"))).to_have_attribute(
            "href", delivered.tracking_url)
        for line in delivered.lines.all():
            await expect(order_panel.locator(".order-items")).to_contain_text(
                f"{line.quantity} × {line.title} ({line.variant}) · {line.price} {delivered.currency}")
        await expect(order_panel).to_contain_text("return (pending)")
        await order_panel.screenshot(path=str(SHOTS / "console-context.png"))

        await console.go_back()
        await card.get_by_label("Note to the shopper").fill(NOTE)
        await card.get_by_role("button", name="Accept").click()
        await expect(console.locator(".flash")).to_contain_text(
            f"Return for order #{delivered.number} accepted; the shopper was told.")
        await expect(console.locator(f"#request-{request.pk} .decided")).to_contain_text("Accepted by Dana")

        outcome = sam.locator(".sa-msg.sa-agent").last
        await expect(outcome).to_contain_text(
            f"Your return request for order #{delivered.number} was accepted. {NOTE}", timeout=timeout)
        await expect(outcome.locator(".sa-agent-name")).to_have_text("Dana")
        await widget_shots(sam, "widget-outcome")

        # 5. Each console page on a phone, the queue and the context panel photographed there too.
        await console.set_viewport_size(PHONE)
        await console.goto(server.http + "/console/orders/")
        await expect(console.locator("#console-live")).to_have_text("live", timeout=timeout)
        await no_sideways_scroll(console, "console queue")
        # The card's header stacks there: no line of it starts with the wide layout's "·" separator.
        separators = await console.locator(f"#request-{request.pk} header .request-meta").evaluate_all(
            "els => els.map(e => getComputedStyle(e, '::before').content)")
        assert separators and all(c in ("none", "normal") for c in separators), separators
        await console.screenshot(path=str(SHOTS / "phone-console-queue.png"))
        await console.goto(f"{server.http}/console/c/{sam_conversation}/")
        await expect(console.locator("#order")).to_be_visible()
        await no_sideways_scroll(console, "console conversation")
        box = await console.locator("#order").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
        await console.locator("#order").screenshot(path=str(SHOTS / "phone-console-context.png"))

        assert errors == []



async def test_the_studio_orders_page_and_its_imports_fit_a_phone(daphne_server, demo_store, page, tmp_path):  # noqa: F811
    """An owner uploads an orders feed on a phone: the Imports table (When, From, counts, the failure's message)
    stays inside the screen, scrolling in its own box; the page itself never scrolls sideways."""
    from playwright.async_api import expect

    await database_sync_to_async(make_user)("owner-oma", demo_store, "owner")
    base = daphne_server.http
    await page.set_viewport_size(PHONE)
    await log_in(page, base, "owner-oma")
    await page.goto(f"{base}/studio/demo/orders/")
    await no_sideways_scroll(page, "studio orders, no imports")
    # One import that worked and one that failed (its message is the longest cell), through the upload form.
    feed = tmp_path / "orders-export-from-the-shop-2026-12-01.json"
    feed.write_text(json.dumps({"orders": [{"number": "2001", "email": "kim@example.com",
                                            "placed_at": "2026-11-30T10:00:00+00:00", "currency": "USD",
                                            "lines": [{"title": "Trail Mug", "sku": "TM", "price": "12.00"}]}]}))
    broken = tmp_path / "orders-export-broken.json"
    broken.write_text('{"orders": [')
    for upload in (feed, broken):
        await page.locator("#upload input[type=file]").set_input_files(str(upload))
        await page.locator("#upload").get_by_role("button", name="Import").click()
        await expect(page.locator("#imports tbody tr").first).to_contain_text(upload.name)
    await page.goto(f"{base}/studio/demo/orders/")
    await no_sideways_scroll(page, "studio orders")
    # Every cell whole on the screen: none cut at the card's edge, nothing to find by swiping the table.
    clipped = await page.locator("#imports table").evaluate("""table => {
        const box = table.getBoundingClientRect();
        const cut = [...table.querySelectorAll('tbody td')].filter(td => td.offsetParent !== null)
            .map(td => [td.textContent.trim(), td.getBoundingClientRect()])
            .filter(([, r]) => r.left < Math.max(box.left, 0) || r.right > Math.min(box.right, innerWidth))
            .map(([text]) => text);
        return {cut, scroll: [table.scrollWidth, table.clientWidth]};
    }""")
    assert clipped["cut"] == [] and clipped["scroll"][0] <= clipped["scroll"][1], clipped
    failed = page.locator("#imports tbody tr").first
    for label in ("When", "From", "Added", "Updated", "Refused"):
        await expect(failed.locator(f'td[data-label="{label}"]')).to_be_visible()
    await expect(failed.locator(".error-text")).to_be_visible()
    await page.locator("#imports").screenshot(path=str(SHOTS / "phone-studio-imports.png"))
    assert page.errors == []
