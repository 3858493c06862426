"""The demo store ships its pictures: every image the demo catalog names is a small file served from static/."""

from __future__ import annotations

import json

from django.test import Client

from tests.conftest import REPO_ROOT

CATALOG = REPO_ROOT / "shop_assistant" / "demo" / "demo_catalog.json"


def demo_image_urls() -> list[str]:
    products = json.loads(CATALOG.read_text())["products"]
    return [src for product in products for src in product.get("images", [])] + [
        variant["image"] for product in products for variant in product["variants"] if variant.get("image")
    ]


def test_every_demo_image_is_shipped_and_small():
    urls = demo_image_urls()
    assert len(urls) >= 26
    for url in urls:
        assert url.startswith("/static/demo/"), url
        path = REPO_ROOT / "static" / url.removeprefix("/static/")
        assert path.is_file() and 0 < path.stat().st_size < 4096, path
        assert path.read_text().startswith("<svg") and "<script" not in path.read_text()


def test_storefront_links_the_shipped_pictures_and_falls_back_to_a_placeholder(db):
    from shop_assistant.demo.store import load_demo_store

    load_demo_store(embed=False)
    page = Client().get("/").content.decode()
    assert page.count('src="/static/demo/') == 26
    # A failed load shows the neutral placeholder, from a static script: the CSP forbids inline handlers.
    assert 'src="/static/storefront.js"' in page and "onerror" not in page
    script = (REPO_ROOT / "static" / "storefront.js").read_text()
    assert 'classList.add("placeholder")' in script and 'addEventListener("error"' in script
    response = Client().get(demo_image_urls()[0])
    assert response.status_code == 200 and response["Content-Type"].startswith("image/svg+xml")
