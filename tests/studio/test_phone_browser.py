"""Every studio page on a phone (390 x 844, real headless Chromium against daphne): none scrolls sideways.

Wide tables scroll inside their own box and inline forms wrap (static/studio/studio.css); a page whose content
is wider than the screen would make the owner pan the whole page to reach its buttons."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from tests.chat.test_widget import browser, page  # noqa: F401  (the real Chromium fixtures)

from tests.conftest import screenshot_dir

from .conftest import make_user
from .seed import seed_week
from .test_insight_browser import log_in

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]

PHONE = {"width": 390, "height": 844}
SCREENSHOTS = screenshot_dir("studio")
SHOTS = {"catalog/": "phone-catalog.png", "analytics/": "phone-analytics.png", "knowledge/": "phone-knowledge.png"}


def _pages(store) -> list[str]:
    """The path of every studio page an owner of ``store`` can open, with a draft of each kind to show."""
    from catalog.models import StoreDocument
    from shop_assistant.studio import documents, services

    first = services.published_prompt(store)
    published = services.publish(services.create_draft(store, first.system_prompt + "\nBe brief.", first.policies))
    draft = services.create_draft(store, published.system_prompt + "\nAnswer in two sentences.", published.policies)
    document = StoreDocument.objects.filter(store=store).order_by("pk").first()
    document_draft = documents.create_draft(document)
    product = store.products.order_by("pk").first()
    base = f"/studio/{store.slug}"
    return [
        "/studio/",
        f"{base}/",
        f"{base}/drafts/{draft.pk}/",
        f"{base}/versions/{first.pk}/",
        f"{base}/versions/{first.pk}/rollback/confirm",
        f"{base}/compare/?a={draft.pk}&b={published.pk}",
        f"{base}/settings",
        f"{base}/catalog/",
        f"{base}/catalog/products/{product.pk}/",
        f"{base}/knowledge/",
        f"{base}/knowledge/{document.pk}/",
        f"{base}/knowledge/{document.pk}/drafts/{document_draft.pk}/",
        f"{base}/analytics/?start=2026-11-02&end=2026-11-08",
        f"{base}/playground/",
    ]


async def test_no_studio_page_scrolls_sideways_on_a_phone(daphne_server, demo_store, page):
    await database_sync_to_async(make_user)("owner-pia", demo_store, "owner")
    await database_sync_to_async(seed_week)(demo_store)
    paths = await database_sync_to_async(_pages)(demo_store)
    base = daphne_server.http
    await page.set_viewport_size(PHONE)
    await log_in(page, base, "owner-pia")

    wide: dict[str, int] = {}
    for path in paths:
        response = await page.goto(f"{base}{path}")
        assert response.status == 200, (path, response.status)
        width = await page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[path] = width
        for ending, name in SHOTS.items():
            if path.split("?")[0].endswith(f"/{ending}"):
                await page.screenshot(path=str(SCREENSHOTS / name), full_page=name != "phone-catalog.png")
    assert not wide, f"pages wider than the phone's {PHONE['width']} px: {wide}"
    assert not page.errors, page.errors
