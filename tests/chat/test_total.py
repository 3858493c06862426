"""shop_assistant.chat.answers.tools.total (and capacity's sentences): what several products cost, in the shopper's
language, every term and the sum the catalog's own figures."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import translation

from catalog.grounding import ProductFacts
from shop_assistant.chat.answers.tools.capacity import CapacityArguments, _need, _says, capacity_of
from shop_assistant.chat.answers.tools.references import Product
from shop_assistant.chat.answers.tools.total import _sum, difference_sentence


def product(title: str, price: str, description: str = "", in_stock: bool = True) -> Product:
    facts = ProductFacts(
        title=title, variant="", price=Decimal(price), currency="USD", compare_at_price=None, in_stock=in_stock,
        others_in_stock=False, product_type="Lighting", vendor="Northpeak", tags=(), options="",
        description=description,
    )  # fmt: skip
    return Product({"sku": title, "title": title}, facts)


LAMP = product("Trailbeam Headlamp", "39.00")
TENT = product("Ridgeline 2-Person Tent", "249.00", "A freestanding tent with room for two.")


@pytest.mark.parametrize(
    ("language", "total", "difference"),
    [
        ("en", "2 × Trailbeam Headlamp at 39.00 USD = 78.00 USD in total.",
         "The Ridgeline 2-Person Tent (249.00 USD) costs 210.00 USD more than the Trailbeam Headlamp (39.00 USD)."),
        ("es", "2 × Trailbeam Headlamp a 39.00 USD = 78.00 USD en total.",
         "Ridgeline 2-Person Tent (249.00 USD) cuesta 210.00 USD más que Trailbeam Headlamp (39.00 USD)."),
        ("fr", "2 × Trailbeam Headlamp à 39.00 USD = 78.00 USD au total.",
         "Ridgeline 2-Person Tent (249.00 USD) coûte 210.00 USD de plus que Trailbeam Headlamp (39.00 USD)."),
        ("de", "2 × Trailbeam Headlamp zu 39.00 USD = 78.00 USD insgesamt.",
         "Ridgeline 2-Person Tent (249.00 USD) kostet 210.00 USD mehr als Trailbeam Headlamp (39.00 USD)."),
    ],
)
def test_a_total_and_a_difference_in_the_shoppers_language(language, total, difference):
    with translation.override(language):
        assert _sum([(2, LAMP)], []) == total
        assert difference_sentence(LAMP, TENT) == difference


def test_what_the_catalog_lacks_is_said_in_the_shoppers_language():
    with translation.override("es"):
        sentence = _sum([(1, LAMP)], ["kayak", "canoe"])
    assert sentence == (
        "Trailbeam Headlamp cuesta 39.00 USD. No he encontrado 'kayak' o 'canoe' en nuestro catálogo, así que el "
        "total no lo incluye."
    )
    with translation.override("en"):
        assert _sum([(1, LAMP)], ["kayak"]) == (
            "The Trailbeam Headlamp costs 39.00 USD. I couldn't find 'kayak' in our catalog, so the total leaves it out."
        )


def test_capacity_sentences_say_the_count_as_the_catalog_writes_it_in_the_shoppers_language():
    need = CapacityArguments(product="tent", people=3, weight_kg=100)
    with translation.override("fr"):
        assert _need(need) == "3 personnes et 100 kg"
        assert _says(TENT.facts, capacity_of(TENT.facts)) == "Ridgeline 2-Person Tent est prévu pour 2 personnes"
    with translation.override("en"):
        assert _need(need) == "3 people and 100 kg"
        assert _need(CapacityArguments(product="tent", people=1)) == "1 person"
        assert _says(TENT.facts, capacity_of(TENT.facts)) == "the Ridgeline 2-Person Tent is made for 2 people"
        cookset = product("Camp Cookset", "59.00", "Cooks dinner for two.").facts
        assert _says(cookset, capacity_of(cookset)) == "the Camp Cookset is made for two people"
    with translation.override("fr"):  # the catalog's English word is not put in a French sentence: the figure is
        assert _says(cookset, capacity_of(cookset)) == "Camp Cookset est prévu pour 2 personnes"
