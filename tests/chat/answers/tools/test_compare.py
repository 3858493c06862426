"""``compare_products`` on the demo store: the cards shown ordered on what is asked, products named compared on
the catalog's fields and first sentences, a kind's products by price; every figure a catalog figure."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.utils import translation

from catalog.models import Variant
from shop_assistant.chat.answers.composition import COMPARE, MODEL, NO_MATCH
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.tools.registry import call
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db


def compare(shop, text: str = "", shown=(), **arguments):
    return execute(Context(shop, text, retrieve, "", shown), [call("compare_products", **arguments)])


def figures(text: str) -> set[Decimal]:
    return {Decimal(number) for number in re.findall(r"\d+\.\d\d", text)}


def catalog_figures(composition) -> set[Decimal]:
    """The cards' prices and the differences between them: what a comparison may state."""
    prices = {Variant.objects.get(sku=c["sku"]).price for c in composition.cards}
    return prices | {abs(a - b) for a in prices for b in prices}


def test_your_two_sleeping_bags_are_compared_on_their_own_words(shop):
    composition = compare(shop, "What's the difference between your two sleeping bags?", products=["two sleeping bags"])
    assert composition.kind == COMPARE and composition.fixed
    assert {c["sku"] for c in composition.cards} == {"DO-ADB-REG", "DO-BSB"}
    assert "comfortable to -7 °C" in composition.reply and "synthetic fill" in composition.reply
    assert composition.reply.endswith(
        "The Alpine Down Sleeping Bag (319.00 USD) costs 230.00 USD more than the Breeze Synthetic Sleeping Bag (89.00 USD)."
    )
    assert figures(composition.reply) <= catalog_figures(composition)


def test_two_tents_named_are_compared_on_price_weight_and_people(shop):
    composition = compare(shop, "Compare the Ridgeline and the Basecamp tents", products=["Ridgeline", "Basecamp tents"])
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE", "DO-BC6"]
    assert composition.reply.startswith(
        "The Ridgeline 2-Person Tent (249.00 USD, 1.6 kg, for 2): A freestanding three-season tent for two that packs "
        "down to the size of a loaf of bread. The Basecamp 6 Family Tent (429.00 USD, for 6): Room for six"
    )
    assert composition.reply.endswith("The Basecamp 6 Family Tent (429.00 USD) costs 180.00 USD more than the Ridgeline 2-Person Tent (249.00 USD).")
    assert figures(composition.reply) <= catalog_figures(composition)


def test_the_waterproofing_is_a_point_of_comparison(shop):
    composition = compare(shop, "Boots vs trail runners?", products=["hiking boots", "trail running shoes"])
    assert [c["sku"][:6] for c in composition.cards] == ["DO-TB-", "DO-STR"]
    boots = composition.reply.split("): ")[0]
    assert boots.startswith("The Trailblazer Waterproof Hiking Boots (159.00 USD, ") and "waterproof" in boots


@pytest.mark.parametrize(
    ("kind", "ascending", "first", "sentence"),
    [
        ("backpack", True, "DO-DT22", "The Daytripper 22L Daypack is the least expensive at 69.00 USD, then the Summit 40L Backpack (149.00 USD)."),
        ("sleeping bag", True, "DO-BSB", "The Breeze Synthetic Sleeping Bag is the least expensive at 89.00 USD"),
        ("sleeping bag", False, "DO-ADB-REG", "The Alpine Down Sleeping Bag is the most expensive at 319.00 USD"),
    ],
)
def test_a_kinds_products_by_price(shop, kind, ascending, first, sentence):
    composition = compare(shop, f"cheapest {kind}?", products=[kind], attribute="price", ascending=ascending)
    assert composition.cards[0]["sku"] == first
    assert composition.reply.startswith(sentence)
    assert figures(composition.reply) <= catalog_figures(composition)


def test_a_kinds_products_by_warmth_and_a_kind_without_ratings_says_what_their_descriptions_say(shop):
    bags = compare(shop, "Which sleeping bag is warmer?", products=["sleeping bag"], attribute="warmth")
    assert [c["sku"] for c in bags.cards] == ["DO-ADB-REG", "DO-BSB"]
    assert bags.reply.startswith("The Alpine Down Sleeping Bag is the warmest, comfortable to -7 °C")
    # No jacket has a comfort rating: nothing to rank on. Before, the search's listing answered ("The least
    # expensive is ..."), as if warmth had not been asked; now the reply says so and quotes what the descriptions
    # say of warmth, the product that says it first.
    jackets = compare(shop, "What's your warmest jacket?", products=["jacket"], attribute="warmth")
    assert jackets.kind == "compare" and jackets.cards[0]["sku"].startswith("DO-CF")
    assert jackets.reply.startswith("Our catalog doesn't list a comfort temperature for ")
    assert "so I can't tell which is warmer. The Cascade Fleece Jacket: A soft, warm mid layer made from recycled polyester fleece. " in jackets.reply
    assert jackets.reply.endswith("A member of our team can check: ask for a person.") and "least expensive" not in jackets.reply
    # in Spanish, no English description quoted into the answer
    with translation.override("es"):
        spanish = compare(shop, "¿Cuál es la chaqueta más abrigada?", products=["jacket"], attribute="warmth")
    assert spanish.reply.startswith("Nuestro catálogo no indica la temperatura de confort de ") and "warm" not in spanish.reply


def test_a_ranking_of_another_kind_than_the_cards_shown_ranks_that_kind(shop):
    jackets = cards_of(shop, "Men's Stormshell Rain Jacket", "Women's Stormshell Rain Jacket")
    bags = compare(shop, "Which sleeping bag is warmer?", shown=jackets)  # as the planner sends a follow-up
    assert [c["sku"] for c in bags.cards] == ["DO-ADB-REG", "DO-BSB"]
    assert bags.reply.startswith("The Alpine Down Sleeping Bag is the warmest, comfortable to -7 °C")
    waterproof = compare(shop, "Which jackets are waterproof?", shown=cards_of(shop, "Ridgeline 2-Person Tent"))
    assert waterproof.kind != COMPARE  # not a ranking: the search answers


def test_the_cards_shown_are_ordered_on_what_is_asked(shop):
    shown = cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")
    cheaper = compare(shop, "Which one is cheaper?", shown)  # the attribute read from the words
    assert cheaper.reply == "The Ridgeline 2-Person Tent is the least expensive at 249.00 USD, then the Basecamp 6 Family Tent (429.00 USD)."
    pricier = compare(shop, "and the other way round?", shown, attribute="price", ascending=False)  # from the planner
    assert [c["sku"] for c in pricier.cards] == ["DO-BC6", "DO-RT2-SAGE"]
    assert pricier.reply.startswith("The Basecamp 6 Family Tent is the most expensive at 429.00 USD")


def test_a_question_not_about_the_cards_shown_is_a_search(shop):
    shown = cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")
    composition = compare(shop, "which jackets are waterproof?", shown)
    assert composition.kind == MODEL
    assert composition.cards and all("Tent" not in c["title"] for c in composition.cards)
    assert any("Stormshell" in c["title"] for c in composition.cards)


def test_nothing_to_compare_is_a_no_match(shop):
    composition = compare(shop, "kayaks vs canoes?", products=["kayak", "canoe"])
    assert composition.kind == NO_MATCH and composition.cards == []


def test_a_cheaper_one_after_a_card_ranks_that_cards_kind(shop):
    """"Do you have a cheaper one?" after the Summit backpack: the planner names the card's product, ranked with its
    kind by price; the daypack comes first."""
    shown = cards_of(shop, "Summit 40L Backpack")
    composition = compare(shop, "Do you have a cheaper one?", shown, products=["Summit 40L Backpack"], attribute="price")
    assert composition.reply == "The Daytripper 22L Daypack is the least expensive at 69.00 USD, then the Summit 40L Backpack (149.00 USD)."


def test_nothing_named_and_nothing_shown_ranks_the_whole_catalog_by_price(shop):
    """"What's the cheapest thing you sell?" got "Sorry, we don't carry what's cheapest thing."."""
    cheapest = compare(shop, "What's the cheapest thing you sell?", products=[], attribute="price")
    assert cheapest.reply == ("The Merino Wool Beanie is the least expensive at 22.00 USD, then the Merino Hiking Socks "
                              "(3-Pack) (24.00 USD) and the Titanium Camp Mug 450 ml (27.00 USD).")
    dearest = compare(shop, "what is your most expensive item?", products=[], attribute="price", ascending=False)
    assert dearest.reply.startswith("The Basecamp 6 Family Tent is the most expensive at 429.00 USD")


def test_a_kind_named_with_its_modifier_compares_the_products_called_that(shop):
    # The down vest is of the same type (Jackets) and was compared as a third "rain jacket".
    text = "What's the difference between the two rain jackets?"
    composition = compare(shop, text, products=["two rain jackets"])
    assert [card["title"].split(" (")[0] for card in composition.cards] == [
        "Men's Stormshell Rain Jacket", "Women's Stormshell Rain Jacket"]
    # A kind alone is every product of its type.
    assert len(compare(shop, "Compare your jackets", products=["jackets"]).cards) == 3


def test_two_named_without_the_measure_asked_are_compared_on_what_the_catalog_says(shop):
    """"Which is warmer, the fleece or the down vest?": neither has a comfort rating, so both are described (the
    search listed the vest, the fleece and a sleeping bag); a kind named alone is still searched."""
    composition = compare(shop, "Which is warmer, the fleece or the down vest?", products=["fleece", "down vest"],
                          attribute="warmth")
    assert composition.kind == COMPARE
    assert [p.title for p in composition.products] == ["Cascade Fleece Jacket", "Featherlight Down Vest"]
    assert composition.reply.startswith("The Cascade Fleece Jacket (79.00 USD): A soft, warm mid layer")
    assert figures(composition.reply) <= catalog_figures(composition)
    lighter = compare(shop, "Is the tent or the hammock lighter?", products=["tent", "hammock"], attribute="weight")
    assert lighter.reply == (
        "The Ridgeline 2-Person Tent weighs 1.6 kg. Our catalog doesn't list the weight of the Drift Camping Hammock.")


@pytest.mark.parametrize(("language", "reply"), [
    ("en", "We have nothing cheaper of that kind than the Aluminium Trekking Poles (Pair) (59.00 USD)."),
    ("es", "No tenemos nada más económico de ese tipo que Aluminium Trekking Poles (Pair) (59.00 USD)."),
])
def test_nothing_cheaper_of_the_cards_kind_is_said(shop, language, reply):
    """"Do you have something cheaper?" after the trekking poles, the only accessory: its description was the answer."""
    from django.utils import translation

    poles = cards_of(shop, "Aluminium Trekking Poles (Pair)")
    with translation.override(language):
        composition = compare(shop, "Do you have something cheaper?", poles, products=["Aluminium Trekking Poles (Pair)"],
                              attribute="price")
    assert composition.kind == COMPARE and composition.reply == reply
    assert [c["sku"] for c in composition.cards] == [poles[0]["sku"]]


def test_bigger_is_the_volume_its_name_or_description_gives_else_the_people_it_is_made_for(shop):
    """"which one is bigger?" after the backpacks was "Sorry, we don't carry which one bigger."; tents give no
    volume, and bigger is then what each is made for; a product that gives neither is said not to."""
    packs = cards_of(shop, "Daytripper 22L Daypack", "Summit 40L Backpack")
    bigger = compare(shop, "which one is bigger?", packs)
    assert bigger.reply == "The Summit 40L Backpack is the biggest at 40L, then the Daytripper 22L Daypack (22L)."
    assert [c["sku"] for c in bigger.cards][0].startswith("DO-S40")
    smaller = compare(shop, "which is smaller?", packs)
    assert smaller.reply == "The Daytripper 22L Daypack is the smallest at 22L, then the Summit 40L Backpack (40L)."
    tents = compare(shop, "Which tent is bigger?", products=["tent"], attribute="volume", ascending=False)
    assert tents.reply == ("The Basecamp 6 Family Tent is made for six people. The Ridgeline 2-Person Tent is made for "
                           "2 people.")
    tents_shown = cards_of(shop, "Basecamp 6 Family Tent", "Ridgeline 2-Person Tent")
    assert compare(shop, "which is smaller?", tents_shown).reply.startswith("The Ridgeline 2-Person Tent is made for 2")
    assert compare(shop, "which one is bigger?", tents_shown).reply.startswith("The Basecamp 6 Family Tent is made for six")
    bags = compare(shop, "which one is bigger?", cards_of(shop, "Breeze Synthetic Sleeping Bag", "Alpine Down Sleeping Bag"))
    assert bags.reply.startswith("Our catalog doesn't give the volume of the Breeze Synthetic Sleeping Bag or the Alpine")


def test_a_volume_in_millilitres_and_not_what_a_filter_handles():
    from shop_assistant.chat.answers import comparison
    from catalog.grounding import ProductFacts

    def facts(title: str, description: str) -> ProductFacts:
        return ProductFacts(title=title, variant="", price=Decimal("1"), currency="USD", compare_at_price=None,
                            in_stock=True, others_in_stock=False, product_type="", vendor="", tags=(), options="",
                            description=description)  # fmt: skip

    assert comparison.volume_of(facts("Titanium Camp Mug 450 ml", "")) == (0.45, "450 ml")
    assert comparison.volume_of(facts("Daypack", "A light 22-litre daypack.")) == (22.0, "22-litre")
    assert comparison.volume_of(facts("Pocket Water Filter", "Filters up to 400,000 litres.")) is None
