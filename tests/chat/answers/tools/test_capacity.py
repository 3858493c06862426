"""``check_capacity`` on the demo store: yes or no with the catalog's own words, the products of the kind that
fit, and "doesn't say" when the catalog does not."""

from __future__ import annotations

import pytest
from django.utils import translation

from catalog.grounding import product_facts
from catalog.search import search
from shop_assistant.chat.answers.composition import NO_MATCH
from shop_assistant.chat.answers.planning import rules
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, PlanError, execute
from shop_assistant.chat.answers.tools.capacity import CAPACITY, capacity_of
from shop_assistant.chat.answers.tools.registry import call
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db


def check(shop, text: str = "", **arguments):
    return execute(Context(shop, text, retrieve), [call("check_capacity", **arguments)])


def facts_of(shop, title: str):
    hit = next(h for h in search(title, 3, store=shop) if h.product.title == title)
    return product_facts(hit)


@pytest.mark.parametrize(
    ("title", "people", "words", "word", "where", "load"),
    [
        ("Ridgeline 2-Person Tent", 2, "2-Person", "2", "name", None),
        ("Basecamp 6 Family Tent", 6, "Room for six", "six", "description", None),
        ("Camp Cookset (4 Pieces)", 2, "Cooks dinner for two", "two", "description", None),  # 4 pieces, not 4 people
        ("Folding Camp Chair", None, "", "", "description", 120),
        ("Drift Camping Hammock", None, "", "", "description", None),  # "between two trees" is not for two
        ("Summit 40L Backpack", None, "", "", "description", None),
    ],
)
def test_capacity_is_read_from_the_products_own_words(shop, title, people, words, word, where, load):
    facts = facts_of(shop, title)
    capacity = capacity_of(facts)
    assert (capacity.people, capacity.people_words, capacity.people_word, capacity.load_kg) == (people, words, word, load)
    if words:
        assert capacity.people_in == where
        assert words in (facts.title if where == "name" else facts.description)


def test_the_ridgeline_for_three_is_no_and_the_basecamp_is_suggested(shop):
    composition = check(shop, product="Ridgeline tent", people=3)
    assert composition.kind == CAPACITY and composition.fixed
    assert composition.reply == (
        "No: the Ridgeline 2-Person Tent is made for 2 people. "
        "For 3 people: the Basecamp 6 Family Tent is made for six people."  # the count as each product's text writes it
    )
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE", "DO-BC6"]


def test_the_ridgeline_for_two_is_yes_and_nothing_else_is_suggested(shop):
    composition = check(shop, product="Ridgeline tent", people=2)
    assert composition.reply == "Yes: the Ridgeline 2-Person Tent is made for 2 people."
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE"]


def test_a_family_of_five_and_a_kind_gets_only_the_tent_that_fits(shop):
    composition = check(shop, "We're a family of five, which tent fits us?", product="tent", people=5)
    assert composition.reply == "For 5 people: the Basecamp 6 Family Tent is made for six people."
    assert [c["sku"] for c in composition.cards] == ["DO-BC6"]
    # and through the rule planner
    context = Context(shop, "We're a family of five, which tent fits us?", retrieve)
    assert [c["sku"] for c in execute(context, rules.plan(context)).cards] == ["DO-BC6"]


def test_the_kind_for_two_lists_the_snuggest_fit_first(shop):
    """"What's the best tent for two?": the tent made for two before the one with room for six (search order put
    the family tent first)."""
    composition = check(shop, "What's the best tent for two?", product="tent", people=2)
    assert composition.reply == (
        "For 2 people: the Ridgeline 2-Person Tent is made for 2 people and the Basecamp 6 Family Tent is made for six people."
    )
    assert [c["sku"] for c in composition.cards] == ["DO-RT2-SAGE", "DO-BC6"]


def test_no_product_of_the_kind_is_big_enough(shop):
    composition = check(shop, product="tent", people=8)
    assert composition.reply == "None of our tents says it is made for 8 people."
    assert {c["sku"] for c in composition.cards} == {"DO-RT2-SAGE", "DO-BC6"}


def test_the_cookset_for_four_is_no_for_two(shop):
    composition = check(shop, "Does the cookset cook for four people?", product="cookset", people=4)
    assert composition.reply == "No: the Camp Cookset (4 Pieces) is made for two people."  # "Cooks dinner for two"
    assert [c["sku"] for c in composition.cards] == ["DO-CCS"]


def test_the_chair_holds_110_kg_yes_120(shop):
    composition = check(shop, "Will the camp chair hold someone who weighs 110 kg?", product="camp chair", weight_kg=110)
    assert composition.reply == "Yes: the Folding Camp Chair holds up to 120 kg."
    assert [c["sku"] for c in composition.cards] == ["DO-FCC"]
    assert check(shop, product="camp chair", weight_kg=130).reply.startswith("No: the Folding Camp Chair holds up to 120 kg.")


def test_a_product_whose_text_gives_no_capacity_doesnt_say(shop):
    composition = check(shop, product="Summit backpack", people=2)
    assert composition.reply == "Our catalog doesn't say whether the Summit 40L Backpack is right for 2 people."
    assert [c["sku"] for c in composition.cards] == ["DO-S40-SLT"]
    # "sets up between two trees" is not a load, nor a number of people
    hammock = check(shop, product="hammock", weight_kg=100)
    assert hammock.reply == "Our catalog doesn't say whether the Drift Camping Hammock is right for 100 kg."
    assert [c["sku"] for c in hammock.cards] == ["DO-DCH"]


def test_those_are_the_cards_shown_and_how_much_gives_each_price(shop):
    # "How much is it for 3 people?" after the tents was "Sorry, we don't carry it."
    tents = cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")
    composition = execute(Context(shop, "How much is it for 3 people?", retrieve, "", tents),
                          [call("check_capacity", product="those", people=3)])  # fmt: skip
    assert composition.reply == "For 3 people: the Basecamp 6 Family Tent (429.00 USD) is made for six people."
    assert [c["sku"] for c in composition.cards] == ["DO-BC6"]
    with translation.override("es"):
        spanish = execute(Context(shop, "¿Cuánto cuesta para 3 personas?", retrieve, "", tents),
                          [call("check_capacity", product="those", people=3)])  # fmt: skip
    assert spanish.reply == "Para 3 personas: Basecamp 6 Family Tent (429.00 USD) es para 6 personas."
    # no price asked, none said
    assert check(shop, "Which tent is for two people?", product="tent", people=2).reply == (
        "For 2 people: the Ridgeline 2-Person Tent is made for 2 people and the Basecamp 6 Family Tent is made for six people."
    )


def test_a_product_the_catalog_does_not_have_is_a_no_match(shop):
    composition = check(shop, "is the kayak big enough for two?", product="kayak", people=2)
    assert composition.kind == NO_MATCH and composition.cards == []


def test_a_capacity_call_counts_at_least_one_person():
    with pytest.raises(PlanError):
        call("check_capacity", product="tent", people=0)


def test_how_many_people_a_product_is_made_for_is_its_own_words(shop):
    # "How many people fit in the Basecamp tent?" listed both tents and the Ridgeline's colours.
    assert check(shop, product="Basecamp tent").reply == "The Basecamp 6 Family Tent is made for six people."
    assert check(shop, product="Ridgeline tent").reply == "The Ridgeline 2-Person Tent is made for 2 people."
    hammock = check(shop, product="hammock")
    assert hammock.reply == "Our catalog doesn't say how many people the Drift Camping Hammock is made for."
    assert [card["sku"] for card in hammock.cards] == ["DO-DCH"]
