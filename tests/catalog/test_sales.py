"""catalog.sales: what is on sale, from the variants' compare-at prices, for questions that name no product."""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog import sales
from catalog.grounding import ground
from catalog.models import Variant
from tests.chat.conftest import demo_store  # noqa: F401 (the demo store as load_demo_store makes it)


@pytest.mark.parametrize(
    ("text", "general"),
    [
        ("Do you have anything on sale?", True),
        ("Any deals right now?", True),
        ("What is on sale?", True),
        ("What discounts do you offer?", True),
        ("Do you have kayaks on sale?", False),  # names a product: search answers it
        ("Are there discounts on tents?", False),
        ("Is the tent on sale?", False),
        ("Can I return sale items?", False),  # a policy question
        ("Do you have a rain jacket?", False),
    ],
)
def test_a_sale_question_that_names_no_product(text, general):
    assert sales.asks_about_sales(text) is general


def test_the_marked_down_products_deepest_markdown_first_one_card_each(demo_store):  # noqa: F811
    marked = Variant.objects.filter(store=demo_store, compare_at_price__isnull=False)
    expected = {v.product.title for v in marked if v.compare_at_price > v.price}
    hits = sales.on_sale(demo_store, k=10)
    assert {hit.product.title for hit in hits} == expected and len(hits) == len(expected) >= 2
    markdowns = [(h.variant.compare_at_price - h.variant.price) / h.variant.compare_at_price for h in hits]
    assert markdowns == sorted(markdowns, reverse=True)
    assert all(h.variant.compare_at_price > h.variant.price for h in hits)

    result = ground(demo_store, "Do you have anything on sale?")
    assert result.found and [c["title"].split(" (")[0] for c in result.cards] == [h.product.title for h in hits][:3]
    assert all(p.on_sale for p in result.products)


def test_nothing_marked_down_means_no_sale_cards(demo_store):  # noqa: F811
    Variant.objects.filter(store=demo_store).update(compare_at_price=None)
    assert sales.on_sale(demo_store) == []
    assert not ground(demo_store, "Do you have anything on sale?").found
    # A markdown on a product that is not active does not count.
    variant = Variant.objects.filter(store=demo_store).select_related("product").first()
    variant.compare_at_price = variant.price + Decimal("10")
    variant.save()
    variant.product.status = "draft"
    variant.product.save()
    assert sales.on_sale(demo_store) == []
