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


def test_warm_enough_is_the_comfort_rating_of_the_products_own_text(shop):
    # the kind: the bags rated for it ("Is the sleeping bag warm enough for -5?" was the Breeze's "No." alone)
    kind = check(shop, product="sleeping bag", temperature_c=-5)
    assert kind.kind == CAPACITY
    assert kind.reply == "For -5 °C: the Alpine Down Sleeping Bag is comfortable to -7 °C."
    # one named that is not: "No", and the one of its kind that is, though its name was not searched
    breeze = check(shop, product="Breeze", temperature_c=-5)
    assert breeze.reply == (
        "No: the Breeze Synthetic Sleeping Bag is comfortable to 10 °C. "
        "For -5 °C: the Alpine Down Sleeping Bag is comfortable to -7 °C."
    )
    assert check(shop, product="Breeze", temperature_c=10).reply == (
        "Yes: the Breeze Synthetic Sleeping Bag is comfortable to 10 °C.")  # the rating itself is warm enough
    assert check(shop, product="sleeping bag", temperature_c=-20).reply == (
        "None of our sleeping bags says it is made for -20 °C.")
    assert check(shop, product="fleece", temperature_c=0).reply == (
        "Our catalog doesn't say whether the Cascade Fleece Jacket is right for 0 °C.")  # no rating given
    with translation.override("de"):
        assert check(shop, product="sleeping bag", temperature_c=-5).reply == (
            "Für -5 °C: Alpine Down Sleeping Bag hält bis -7 °C warm.")


@pytest.mark.parametrize(
    ("text", "product", "temperature"),
    [
        ("Is the sleeping bag warm enough for -5?", "sleeping bag", -5.0),
        ("which sleeping bag is warm enough for -5?", "sleeping bag", -5.0),
        ("do you have a sleeping bag for -5 degrees?", "sleeping bag", -5.0),
        ("do you have a sleeping bag for minus 20?", "sleeping bag", -20.0),
        ("Is the Breeze bag warm enough for 15 degrees?", "Breeze bag", 15.0),
        ("Ist der Schlafsack warm genug für minus 5 Grad?", "sleeping bag", -5.0),
        ("¿El saco de dormir es suficientemente cálido para -5 grados?", "sleeping bag", -5.0),
        ("Le sac de couchage est-il assez chaud pour moins 5 degrés ?", "sleeping bag", -5.0),
    ],
)
def test_the_rule_planner_reads_a_temperature_asked(shop, text, product, temperature):
    """Read in the shopper's language too; "2-3 Personen" is a count, never a temperature of -3."""
    from catalog import language

    calls = rules.plan(Context(shop, text, retrieve, "", [], language.detect(text)))
    assert [(c.name, c.arguments.model_dump(exclude_none=True)) for c in calls] == [
        ("check_capacity", {"product": product, "temperature_c": temperature})
    ]


def test_a_range_of_people_is_no_temperature(shop):
    from catalog import language

    text = "Habt ihr ein Zelt für 2-3 Personen?"
    calls = rules.plan(Context(shop, text, retrieve, "", [], language.detect(text)))
    assert all("temperature_c" not in c.arguments.model_dump(exclude_none=True) for c in calls)
