"""The studio's insight in real headless Chromium against daphne: an owner opens the analytics of a seeded week,
asks the playground a question under a draft and the published version, publishes a draft whose score follows in
the background, and is held back (with a warning) from publishing a draft it scored worse."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async

from tests.chat.conftest import FRAME_TIMEOUT
from tests.chat.test_widget import browser, page  # noqa: F401  (the real Chromium fixtures)
from tests.conftest import screenshot_dir

from .conftest import PASSWORD, make_user, wait_until_ready
from .seed import seed_week

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]

SCREENSHOTS = screenshot_dir("studio")
SCORING_TIMEOUT = 600_000  # ms: a score is the live model answering the store's evaluation questions


async def log_in(page, base: str, username: str) -> None:
    from playwright.async_api import expect

    await wait_until_ready(page, base)
    await page.goto(f"{base}/studio/")
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page).to_have_url(f"{base}/studio/demo/")


def seed_languages(store) -> None:
    """Two Spanish questions on the Wednesday of the seeded week: one the store truly does not sell (the Spanish
    no-match reply), one it sells but the bundled model could not read (the not-understood reply)."""
    from .seed import _conversation, _message, at

    sold = _conversation(store, at(2, 9))
    _message(sold, "user", "¿Venden bicicletas?", at(2, 9, 1))
    _message(sold, "assistant", "Lo siento, no vendemos bicicletas.", at(2, 9, 2), finish_reason="fixed",
             kind="no_match")
    unread = _conversation(store, at(2, 10))
    _message(unread, "user", "¿Tienen chaquetas impermeables?", at(2, 10, 1))
    _message(unread, "assistant", "Lo siento, no he entendido tu mensaje.", at(2, 10, 2), finish_reason="fixed",
             kind="not_understood")


async def test_owner_reads_analytics_asks_the_playground_and_publishes_a_scored_draft(daphne_server, demo_store, page):
    from playwright.async_api import expect

    timeout = FRAME_TIMEOUT * 1000
    await database_sync_to_async(make_user)("owner-ida", demo_store, "owner")
    week = await database_sync_to_async(seed_week)(demo_store)
    base = daphne_server.http
    await log_in(page, base, "owner-ida")
    await page.set_viewport_size({"width": 1280, "height": 900})

    # Analytics over the seeded week, from the studio's navigation.
    await page.get_by_role("link", name="Analytics").click()
    await page.get_by_label("From").fill("2026-11-02")
    await page.get_by_label("To").fill("2026-11-08")
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator('[data-kpi="conversations"] .kpi-value')).to_have_text("7")
    await expect(page.locator('[data-kpi="deflection"] .kpi-value')).to_have_text("57.1%")
    await expect(page.locator('[data-kpi="handoffs"] .kpi-label')).to_contain_text("median first human reply 360 s")
    await expect(page.locator('[data-kpi="cache"] .kpi-value')).to_have_text("37.5%")
    await expect(page.locator("svg.chart")).to_have_count(2)
    kayak = page.locator("#no-match tr", has_text="Do you have a kayak?")
    await expect(kayak.locator("td").nth(1)).to_have_text("3")
    await expect(kayak.get_by_role("link")).to_have_count(2)
    assert await kayak.get_by_role("link").first.get_attribute("href") == f"/console/c/{week.conversations['kayak-again'].pk}/"
    async with page.expect_download() as download:
        await page.locator("#no-match").get_by_role("link", name="Export CSV").click()
    assert (await download.value).suggested_filename == "demo-no_match-2026-11-02-2026-11-08.csv"
    await page.screenshot(path=str(SCREENSHOTS / "analytics-week.png"), full_page=True)

    # Issue 40 item 7: what the store does not sell is told apart from what was not understood, in any language
    # (the answers' stored kind, not their English words).
    await database_sync_to_async(seed_languages)(demo_store)
    await page.reload()
    await expect(page.locator("#no-match tr", has_text="¿Venden bicicletas?")).to_have_count(1)
    await expect(page.locator("#no-match tr", has_text="chaquetas")).to_have_count(0)
    await expect(page.locator("#not-understood tr", has_text="¿Tienen chaquetas impermeables?")).to_have_count(1)
    await page.locator("#no-match").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "analytics-languages.png"), full_page=True)

    # A draft with the published text and a new note, then the playground: any question, draft against published.
    await page.get_by_role("link", name="Prompt").click()
    await page.get_by_role("button", name="New draft from the published version").click()
    await expect(page.get_by_role("heading", name="Draft v2")).to_be_visible()
    await page.get_by_label("Note").fill("same words, a note for the history")
    await page.get_by_role("button", name="Save draft").click()
    await expect(page.get_by_text("Draft v2 saved.")).to_be_visible()
    await page.get_by_role("link", name="Playground").click()
    await page.get_by_label("Question").fill("What is your return policy?")
    await page.get_by_role("button", name="Ask").click()
    await expect(page.locator("#playground td.answer.done")).to_have_count(2, timeout=timeout)
    await expect(page.locator("#playground td.answer.failed")).to_have_count(0)
    for side in ("left", "right"):
        cell = page.locator(f'#playground [data-side="{side}"]')
        assert (await cell.locator(".text").text_content()).strip()
        await expect(cell.locator(".quote").first).to_contain_text("30 days")  # the policy quoted, as in the widget
    await expect(page.locator('[data-head="left"]')).to_have_text("v2 (draft)")
    await page.screenshot(path=str(SCREENSHOTS / "playground-policy.png"), full_page=True)
    await page.get_by_label("Question").fill("I need a tent for two people.")
    await page.get_by_role("button", name="Ask").click()
    await expect(page.locator("#playground td.answer.done")).to_have_count(2, timeout=timeout)
    await expect(page.locator('#playground [data-side="left"] .card-item').first).to_be_visible()
    await page.screenshot(path=str(SCREENSHOTS / "playground-cards.png"), full_page=True)

    # Publish: published at once, then scored in the background; the prompt page follows the score until it is in.
    await page.goto(f"{base}/studio/demo/")
    await page.get_by_role("link", name="Draft v2").click()
    await page.get_by_role("button", name="Save and publish").click()
    await expect(page).to_have_url(f"{base}/studio/demo/")
    await expect(page.get_by_role("heading", name=re.compile(r"Published: v2"))).to_be_visible()
    await expect(page.locator('[data-score-of="v2"]')).to_have_text(re.compile(r"^\d+\.\d$"), timeout=SCORING_TIMEOUT)
    await expect(page.locator("p.nodes")).to_contain_text("Pre-warmed on 1 of 1 node")
    await page.screenshot(path=str(SCREENSHOTS / "score-history.png"), full_page=True)

    # A draft far longer than the model's context fails every model answer: scored on its page first, it is held
    # back from publishing, with the warning.
    await page.get_by_role("button", name="New draft from the published version").click()
    await page.get_by_label("System prompt").fill("Always be helpful and polite to every shopper. " * 400)
    await page.get_by_role("button", name="Save draft").click()
    await page.get_by_role("button", name="Score this draft now").click()
    await expect(page.get_by_text("This draft scores worse than the published version.")).to_be_visible(
        timeout=SCORING_TIMEOUT
    )
    await page.get_by_role("button", name="Save and publish").click()
    await expect(page.get_by_text("This draft scores worse than the published version.")).to_be_visible()
    await expect(page.get_by_text(re.compile(r"worse than the published v2"))).to_be_visible()
    await expect(page.get_by_role("heading", name="Draft v3")).to_be_visible()
    await page.locator("#score").scroll_into_view_if_needed()
    await page.screenshot(path=str(SCREENSHOTS / "score-worse.png"))
    await page.get_by_role("link", name="Compare").click()
    await expect(page.locator(".diff .d-add").first).to_contain_text("Always be helpful")
    await page.screenshot(path=str(SCREENSHOTS / "score-compare.png"))
    assert page.errors == []
