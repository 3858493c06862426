"""``which_has`` on the demo store: which of the products just shown has what the shopper asks, from each one's own
description; the rule planner reads "which one has/is ..." only with cards shown."""

from __future__ import annotations

import pytest

from shop_assistant.chat.answers.planning import rules
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.tools.registry import call
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db

BACKPACKS = ("Summit 40L Backpack", "Daytripper 22L Daypack")
TENTS = ("Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")


def which(shop, shown: tuple[str, ...], question: str):
    context = Context(shop, question, retrieve, "", cards_of(shop, *shown))
    return execute(context, [call("which_has", question=question)])


def test_the_one_whose_text_says_it_is_quoted_and_shown_first(shop):
    answer = which(shop, BACKPACKS, "has a laptop sleeve")
    assert answer.reply == (
        "The Daytripper 22L Daypack: A light 22-litre daypack with a padded laptop sleeve, side bottle pockets and a "
        "hip belt, for day hikes and the commute alike."
    )
    # the other stays shown after it: "both" still means both
    assert [c["title"].split(" (")[0] for c in answer.cards] == ["Daytripper 22L Daypack", "Summit 40L Backpack"]
    answer = which(shop, TENTS, "is freestanding")
    assert answer.reply.startswith("The Ridgeline 2-Person Tent: A freestanding three-season tent for two")
    assert answer.cards[0]["title"].startswith("Ridgeline 2-Person Tent")


def test_each_that_says_it_and_none_guessed(shop):
    both = which(shop, BACKPACKS, "has a hip belt")  # the Summit's text has no hip belt: the daypack's alone
    assert both.reply.startswith("The Daytripper 22L Daypack:") and "Summit" not in both.reply
    none = which(shop, TENTS, "has a stove")
    assert none.reply == (
        "Our catalog doesn't say that of the Ridgeline 2-Person Tent or Basecamp 6 Family Tent. "
        "A member of our team can help: ask for a person."
    )


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("which one has a laptop sleeve?", "has a laptop sleeve"),
        ("Which of them is freestanding?", "is freestanding"),
        ("which has a rain cover?", "has a rain cover"),
    ],
)
def test_the_rule_planner_reads_which_one_of_the_cards(shop, text, question):
    calls = rules.plan(Context(shop, text, retrieve, "", cards_of(shop, *BACKPACKS)))
    assert [(c.name, c.arguments.model_dump()) for c in calls] == [("which_has", {"question": question})]
    # nothing shown: a question for the catalog, not of cards
    assert rules.plan(Context(shop, text, retrieve, "", []))[0].name != "which_has"
    # a ranking is the comparison's
    assert rules.plan(Context(shop, "which one is cheaper?", retrieve, "", cards_of(shop, *BACKPACKS)))[0].name == (
        "compare_products"
    )
