"""The studio in real headless Chromium against daphne: an owner logs in, edits a draft, previews it next to
the published version, publishes; the next new shopper's first answer starts from the pre-warmed prompt."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async

from tests.chat.conftest import FRAME_TIMEOUT
from tests.chat.test_widget import browser, page  # noqa: F401  (the real Chromium fixtures)
from tests.conftest import screenshot_dir

from .conftest import PASSWORD, make_user, wait_until_ready

# The UI over services that the PostgreSQL pass tests on their own (publish, preview, pre-warm).
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]

SCREENSHOTS = screenshot_dir("studio")
NEW_PROMPT = (
    "You are Captain Ahoy, the pirate shopping assistant of Demo Outfitters. Always start every answer with "
    "'Ahoy matey!' and talk like a pirate. Only recommend products from the catalog results."
)
# A prompt states no policy (issue 40): the returns answer quotes the knowledge document under either version.
QUESTIONS = ["What is your return policy?", "Do you have rain jackets?"]

SHOPPER_JS = """async ([url, question]) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const tokens = [];
    ws.onmessage = (event) => {
        const frame = JSON.parse(event.data);
        if (frame.type === 'ready') ws.send(JSON.stringify({type: 'message', text: question}));
        if (frame.type === 'token') tokens.push(frame.text);
        if (frame.type === 'error') reject(new Error(frame.message));
        if (frame.type === 'end') { ws.close(); resolve({text: tokens.join(''), usage: frame.usage}); }
    };
    ws.onerror = () => reject(new Error('websocket failed'));
})"""


async def test_owner_edits_previews_publishes_and_the_next_shopper_gets_it_warm(daphne_server, demo_store, page):
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    await database_sync_to_async(make_user)("owner-olga", demo_store, "owner")
    base = daphne_server.http
    await wait_until_ready(page, base)

    # Logged out, the studio sends the owner to the login page; after it, to the studio of the owner's one store.
    await page.goto(f"{base}/studio/")
    await expect(page.get_by_role("heading", name="Staff login")).to_be_visible()
    await page.get_by_label("Username").fill("owner-olga")
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page).to_have_url(f"{base}/studio/demo/")
    await expect(page.get_by_role("heading", name=re.compile(r"Published: v1"))).to_be_visible()

    # The preview's sample questions are the store's own, edited here.
    await page.locator("#questions textarea").fill("\n".join(QUESTIONS))
    await page.get_by_role("button", name="Save questions").click()
    await expect(page.get_by_text("Sample questions saved.")).to_be_visible()

    # A new draft from the published prompt; edit it and watch the token count follow the text.
    await page.get_by_role("button", name="New draft from the published version").click()
    await expect(page.get_by_role("heading", name="Draft v2")).to_be_visible()
    tokens = page.locator("[data-budget] [data-tokens]")
    await expect(tokens).to_have_text(re.compile(r"^\d+$"), timeout=timeout)
    before = int(await tokens.text_content())
    await page.get_by_label("System prompt").fill(NEW_PROMPT)
    # No policies field: the editor points to the knowledge documents, their one copy.
    await expect(page.get_by_label("Policies")).to_have_count(0)
    await expect(page.locator(".policies-note")).to_contain_text("knowledge documents")
    await page.get_by_label("Note").fill("pirate voice")
    await expect(tokens).not_to_have_text(str(before), timeout=timeout)
    await page.get_by_role("button", name="Save draft").click()
    await expect(page.get_by_text("Draft v2 saved.")).to_be_visible()
    await expect(page.locator(".diff .d-add").first).to_contain_text("Captain Ahoy")
    full_blocks = int(await page.locator("[data-budget] [data-full-blocks]").text_content())
    block_size = int(re.search(r"KV blocks of (\d+)", await page.locator("[data-budget]").text_content()).group(1))

    # Preview: every sample question under the draft and under the published version, streamed side by side.
    await page.get_by_role("button", name="Run preview").click()
    answers = page.locator(".preview-table td.answer")
    await expect(answers).to_have_count(2 * len(QUESTIONS))
    await expect(page.locator(".preview-table td.answer.done")).to_have_count(2 * len(QUESTIONS), timeout=timeout)
    await expect(page.locator(".preview-table td.answer.failed")).to_have_count(0)
    draft_answers, published_answers = {}, {}
    for question in QUESTIONS:
        row = page.locator("tr", has=page.get_by_role("rowheader", name=question))
        draft_answers[question] = await row.locator('[data-side="draft"] .text').text_content()
        published_answers[question] = await row.locator('[data-side="published"] .text').text_content()
        assert draft_answers[question].strip() and published_answers[question].strip()
    # The policy is quoted from its document under both versions: nothing in a prompt can say otherwise.
    policy = page.locator("tr", has=page.get_by_role("rowheader", name=QUESTIONS[0]))
    for side in ("draft", "published"):
        quotes = policy.locator(f'[data-side="{side}"] .quotes')
        await expect(quotes).to_contain_text("within 30 days of delivery")
    # Cards as the shopper sees them, with the shipped pictures (no broken image).
    jackets = page.locator("tr", has=page.get_by_role("rowheader", name="Do you have rain jackets?"))
    await expect(jackets.locator('[data-side="draft"] .card-item').first).to_be_visible()
    image = jackets.locator('[data-side="draft"] .card-image').first
    assert "/static/demo/" in await image.get_attribute("src")
    loaded = "img => img.complete && img.naturalWidth > 0"
    await page.wait_for_function(loaded, arg=await image.element_handle(), timeout=timeout)
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.screenshot(path=str(SCREENSHOTS / "draft-and-preview.png"), full_page=True)
    assert page.errors == []

    # Publish: published at once and scored afterwards in the background (studio.tasks); a draft scored before
    # and lower than the published prompt would be held back, and the owner would publish anyway. The store page
    # shows v2 and, a moment later, that its prefix has been pre-warmed.
    await page.get_by_role("button", name="Save and publish").click()
    scored = page.get_by_text(re.compile(r"Published v2|scores worse than the published")).first
    await expect(scored).to_be_visible(timeout=600_000)
    if await page.get_by_role("button", name="Publish anyway").count():
        await page.get_by_role("button", name="Publish anyway").click()
    await expect(page).to_have_url(f"{base}/studio/demo/")
    await expect(page.get_by_role("heading", name=re.compile(r"Published: v2"))).to_be_visible()
    # The page follows the nodes by itself (no reload): this node reports the new prompt's tokens cached.
    await expect(page.locator("p.nodes")).to_have_text(re.compile(r"^Pre-warmed on 1 of 1 node: \S+ \(\d+ tokens\)\.$"))
    await page.screenshot(path=str(SCREENSHOTS / "published-and-history.png"), full_page=True)

    # A new shopper (another browser context, nothing shared) asks the first sample question.
    context = await page.context.browser.new_context()
    shopper = await context.new_page()
    await shopper.goto(f"{base}/")
    result = await shopper.evaluate(SHOPPER_JS, [daphne_server.ws + "?store=demo", QUESTIONS[0]])
    await context.close()
    assert result["usage"]["cached_tokens"] >= full_blocks * block_size > 0, result
    # It follows the new prompt (its blocks are the ones cached above): word for word the draft's preview answer
    # (temperature 0), the returns document quoted.
    assert "within 30 days of delivery" in result["text"], result
    assert result["text"] == draft_answers[QUESTIONS[0]], (result, draft_answers)


def add_dead_image(store) -> str:
    from catalog.models import Product, ProductImage

    product = Product.objects.filter(store=store).order_by("title").first()
    ProductImage.objects.create(product=product, src="http://127.0.0.1:9/gone.jpg", position=0)
    return product.title


async def test_storefront_shows_shipped_pictures_and_a_placeholder_for_a_broken_one(daphne_server, demo_store, page):
    from playwright.async_api import expect

    broken_title = await database_sync_to_async(add_dead_image)(demo_store)
    await page.goto(daphne_server.http + "/")
    products = page.locator(".product")
    await expect(products.first).to_be_visible()
    count = await products.count()
    assert count == 26
    # The grid's pictures load lazily: ask for all of them now, then wait until each has loaded or failed (a
    # failed one loses its src).
    await page.evaluate("() => document.querySelectorAll('img.product-image').forEach(i => { i.loading = 'eager'; })")
    settled = "() => [...document.querySelectorAll('img.product-image')].every(i => i.complete || !i.src)"
    await page.wait_for_function(settled, timeout=FRAME_TIMEOUT * 1000)
    images = await page.evaluate(
        """() => [...document.querySelectorAll('.product')].map(p => {
            const img = p.querySelector('img.product-image');
            return {title: p.querySelector('.product-title').textContent.trim(), src: img.getAttribute('src'),
                    width: img.naturalWidth, placeholder: img.classList.contains('placeholder')};
        })"""
    )
    broken = [image for image in images if image["title"] == broken_title]
    assert broken == [{"title": broken_title, "src": None, "width": 0, "placeholder": True}]
    others = [image for image in images if image["title"] != broken_title]
    assert all(i["src"].startswith("/static/demo/") and i["width"] > 0 and not i["placeholder"] for i in others), others
