"""catalog.asked: the kind of product a request names, and whether the store calls anything that."""

from __future__ import annotations

import pytest

from catalog.asked import Named, named_kind, sold_as


@pytest.mark.parametrize(
    ("text", "noun", "modifiers"),
    [
        ("Do you have the sun hoodie?", "hoodie", "sun"),
        ("I'm looking for a hoodie", "hoodie", ""),
        ("do you have a hoodie in black?", "hoodie", ""),
        ("How much is the sun hoodie?", "hoodie", "sun"),
        ("Is the hoodie in stock?", "hoodie", ""),
        ("I need a tent for my grandma", "tent", ""),  # the purpose is not the thing
        ("Do you have a 2-person tent?", "tent", "2-person"),
        ("Which sleeping bag is warm enough for cold nights?", "bag", "sleeping"),
        ("How much does the headlamp cost?", "headlamp", ""),
        ("sun hoodie", "hoodie", "sun"),
        # Several clauses: the request is the last that names something, not a lead-in ("OK" was taken for
        # the noun, and "OK, short one then: any socks?" got "Sorry, we don't carry ok").
        ("OK, short one then: any socks?", "socks", ""),
        ("Thanks! Do you sell the sun hoodie?", "hoodie", "sun"),
        ("I need a tent for three, do you have one?", "tent", ""),
        # A judgement is not the thing: "good" was the kind asked for, every hit was dropped, and "What's good for a
        # rainy hike?" got the small-talk reply.
        ("What's good for a rainy hike?", "hike", "rainy"),
        ("What's the best tent for two?", "tent", ""),
        ("Do you have a good sleeping bag?", "bag", "sleeping"),
        # What is said of the thing is not the thing ("easy" and "work" were the kinds, and every hit was dropped)
        ("Is the hammock easy to set up?", "hammock", ""),
        ("Will the cookset work with the micro stove?", "cookset", ""),
        ("Is the camp light bright?", "light", "camp"),
        ("Do you have work boots?", "boots", "work"),
        # "is/does the ..." ending on its phrase ends on what it says of the thing ("itchy" was the kind asked for)
        ("Is the beanie itchy?", "beanie", ""),
        ("Are the trekking poles collapsible?", "poles", "trekking"),
        ("Is the sun hoodie waterproof?", "hoodie", "sun"),
        ("Does the beanie itch?", "beanie", ""),
        ("Are the socks machine washable?", "socks", ""),
        ("Is the sun hoodie in stock?", "hoodie", "sun"),
        ("Are there any rain jackets?", "jackets", "rain"),  # "there" is no thing: the phrase is the thing
        ("Does the tent have a footprint?", "footprint", "tent"),
    ],
)
def test_the_noun_a_request_names(text, noun, modifiers):
    assert named_kind(text) == Named(noun, modifiers)


@pytest.mark.parametrize(
    "text",
    ["Any discounts on tents?", "What warranty do your tents have?", "I'm looking for something warm for winter.",
     "a gift for my dad", "Hello!", "¿Tienen chaquetas impermeables?", "What is your return policy?",
     # A clause read on past the noun: its last word ("enough", "two") was taken for the thing asked for.
     "Is the Ridgeline tent big enough for three people?",
     "What would the tent plus two of the down bags cost together?",
     # The word after "how" is a degree ("warm" was taken for the kind, and every sleeping bag was dropped), and
     # "bring" a verb: no kind, so no hit is dropped for not being one.
     "How warm is the down sleeping bag?", "What should I bring for a weekend backpacking trip?",
     # "gear" names no kind: "cooking gear under 20" was told "we don't carry cooking gear" beside "Our categories
     # are ..., cooking, ..."
     "cooking gear under 20", "Any camping equipment?",
     # A verb that starts the clause is no boundary before a kind: "sitting" was the thing asked for.
     "My budget is 90 dollars: what would keep me warm sitting by the campfire at night?",
     # "going" was the thing asked for, and every hit was dropped as no "going"; "tips" are no product
     "I'm going on a 3 day hike next month, what do I need?", "I'm planning a camping trip, any tips on what to buy?"],
)
def test_no_kind_where_none_is_named(text):
    assert named_kind(text) is None


def test_a_typo_of_what_the_store_sells_is_what_it_sells():
    kinds = frozenset({"hammock", "tent", "jacket"})
    assert sold_as(Named("hamock", ""), kinds) and sold_as(Named("tents", ""), kinds)
    assert not sold_as(Named("hoodie", "sun"), kinds)
