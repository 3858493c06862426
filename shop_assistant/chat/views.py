from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from catalog.models import Product, ProductImage, Store, Variant



def _http_url(url: str) -> str:
    """Only http(s) links reach the page: an imported row could hold any scheme (javascript:, data:)."""
    return url if url.lower().startswith(("http://", "https://")) else ""


def _image_url(url: str) -> str:
    """An http(s) image, or one this site serves itself (a path: the demo store ships its pictures)."""
    return url if url.startswith("/") and not url.startswith("//") and "\\" not in url else _http_url(url)


def storefront_products(store: Store, limit: int = 48) -> list[dict[str, Any]]:
    """The store's active products as the page shows them: price, stock and image straight from catalog rows."""
    products = (
        Product.objects.filter(store=store, status=Product.Status.ACTIVE)
        .select_related("store")
        .prefetch_related(
            Prefetch("variants", queryset=Variant.objects.order_by("position", "id")),
            Prefetch("images", queryset=ProductImage.objects.order_by("position", "id")),
        )
        .order_by("title")[:limit]
    )
    items = []
    for product in products:
        variants = list(product.variants.all())
        images = list(product.images.all())
        image = images[0].src if images else next((v.image_src for v in variants if v.image_src), "")
        prices = sorted(v.price for v in variants)
        items.append(
            {
                "title": product.title,
                "url": _http_url(product.url),
                "vendor": product.vendor,
                "type": product.product_type,
                "price": prices[0] if prices else None,
                "price_varies": len(set(prices)) > 1,
                "currency": variants[0].currency if variants else store.currency,
                "in_stock": any(v.in_stock for v in variants),
                "image": _image_url(image),
                "image_alt": images[0].alt_text if images else product.title,
            }
        )
    return items


def storefront(request: HttpRequest) -> HttpResponse:
    """The demo store's page, with the chat widget embedded by one script tag."""
    slug = request.GET.get("store")
    stores = Store.objects.order_by("pk")
    store = (stores.filter(slug=slug).first() if slug else None) or stores.first()
    products = storefront_products(store) if store else []
    return render(request, "storefront.html", {"store": store, "products": products})

