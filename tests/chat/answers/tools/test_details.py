"""``product_details`` on the demo store: the product named or pointed at ("it": the first card shown), read
again with the question's words so the card is the variant asked about; the reply is the catalog's own answer
(the sizes, colours and stock asked about, else the description's sentence closest to the question)."""

from __future__ import annotations

import pytest

from shop_assistant.chat.answers.composition import NO_MATCH
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import Context, execute
from shop_assistant.chat.answers.tools.details import DETAILS
from shop_assistant.chat.answers.tools.registry import call
from tests.chat.answers.conftest import cards_of

pytestmark = pytest.mark.django_db


def details(shop, text: str, shown=(), **arguments):
    return execute(Context(shop, text, retrieve, "", shown), [call("product_details", **arguments)])


def test_its_battery_after_the_headlamps_card(shop):
    shown = cards_of(shop, "Beam 400 Rechargeable Headlamp")
    composition = details(shop, "How long does its battery last?", shown, product="it", question="how long does the battery last")
    assert composition.kind == DETAILS and composition.fixed
    # the description's sentence closest to the question; not a yes/no question, so no "Yes." in front
    assert composition.reply == "The Beam 400 Rechargeable Headlamp: Runs 40 hours on its lowest setting and shrugs off rain."
    assert [c["sku"] for c in composition.cards] == ["DO-B400"]
    assert composition.products[0].title == "Beam 400 Rechargeable Headlamp"


def test_it_is_the_first_card_of_several(shop):
    shown = cards_of(shop, "Summit 40L Backpack", "Daytripper 22L Daypack")
    composition = details(shop, "does it have a rain cover?", shown, product="it", question="rain cover")
    assert [p.title for p in composition.products] == ["Summit 40L Backpack"]
    assert composition.reply == (  # the sentence has every word asked about ("rain cover"): it settles the question
        "Yes. The Summit 40L Backpack: A 40-litre pack for weekend trips, with an adjustable back length, "
        "a ventilated mesh back panel and a built-in rain cover."
    )


def test_the_variant_the_question_names_is_the_card(shop):
    shown = cards_of(shop, "Women's Stormshell Rain Jacket")
    assert shown[0]["sku"] == "DO-SSW-S"
    composition = details(shop, "do you have it in L?", shown, product="it", question="do you have it in L?")
    assert [c["sku"] for c in composition.cards] == ["DO-SSW-L"] and composition.cards[0]["in_stock"] is True
    assert composition.reply == "The Women's Stormshell Rain Jacket comes in sizes S, M and L. Size L is in stock."
    fleece = details(shop, "Do you have the fleece in large, charcoal?", product="fleece jacket", question="in size L, charcoal")
    assert [c["sku"] for c in fleece.cards] == ["DO-CF-L-CHR"] and fleece.cards[0]["in_stock"] is False
    assert fleece.reply == "The Cascade Fleece Jacket comes in sizes M and L, in Forest and Charcoal. Size L in Charcoal is sold out right now."


def test_one_product_only_even_when_the_question_finds_others(shop):
    composition = details(shop, "is the Ridgeline tent waterproof like the rain jackets?", product="Ridgeline tent",
                          question="is it waterproof like the rain jackets")  # fmt: skip
    assert [p.title for p in composition.products] == ["Ridgeline 2-Person Tent"] and len(composition.cards) == 1


def test_a_product_the_catalog_does_not_have_or_it_without_cards_is_a_no_match(shop):
    assert details(shop, "is the kayak stable?", product="kayak").kind == NO_MATCH
    nothing_shown = details(shop, "how heavy is it?", product="it", question="how heavy")
    assert nothing_shown.kind == NO_MATCH and nothing_shown.cards == []


def test_warm_enough_is_yes_or_no_by_the_rating_the_description_gives(shop):
    text = "Is the Alpine down bag warm enough for -5 °C?"
    composition = details(shop, text, product="Alpine down bag", question=text)
    assert composition.reply == "Yes. The Alpine Down Sleeping Bag: Responsibly sourced 800-fill goose down keeps you comfortable to -7 °C."
    assert [c["sku"] for c in composition.cards] == ["DO-ADB-REG"]


@pytest.mark.parametrize(
    ("text", "product", "reply"),
    [
        ("How warm is the down sleeping bag?", "down sleeping bag",
         "The Alpine Down Sleeping Bag: Responsibly sourced 800-fill goose down keeps you comfortable to -7 °C."),
        ("How heavy is the Ridgeline tent?", "Ridgeline tent", "The Ridgeline 2-Person Tent: Packed weight 1.6 kg."),
        ("How tall is the family tent?", "family tent", "The Basecamp 6 Family Tent: Peak height 2 m."),
        ("How long does the headlamp battery last?", "headlamp battery",
         "The Beam 400 Rechargeable Headlamp: Runs 40 hours on its lowest setting and shrugs off rain."),
        # "how much" that asks a weight, not the price ("The Alpine Down Sleeping Bag costs 319.00 USD.")
        ("How much does the Ridgeline tent weigh?", "Ridgeline tent", "The Ridgeline 2-Person Tent: Packed weight 1.6 kg."),
        ("How much does the Alpine bag weigh?", "Alpine bag", "Our catalog doesn't give the weight of the Alpine Down "
         "Sleeping Bag. A member of our team can help: ask for a person."),
    ],
)
def test_how_warm_heavy_tall_or_long_is_the_sentence_giving_that_measure(shop, text, product, reply):
    """By meaning alone "how warm" found "hold the warmth in" and "how tall" the "standing-height centre"; the
    description's list items ("Peak height 2 m") are sentences of their own."""
    assert details(shop, text, product=product, question=text).reply == reply


def test_a_figure_the_description_does_not_give_is_said_to_be_unknown(shop):
    """"How heavy is the stove?" was answered with "boils a litre of water in about three and a half minutes"."""
    stove = details(shop, "How heavy is the stove?", product="stove", question="How heavy is the stove?")
    assert stove.reply == ("Our catalog doesn't give the weight of the Micro Backpacking Stove. A member of our team "
                           "can help: ask for a person.")
    boots = details(shop, "How heavy are the boots?", product="boots", question="How heavy are the boots?")
    assert boots.reply.startswith("Our catalog doesn't give the weight of the Trailblazer Waterproof Hiking Boots.")
    # A degree that words answer too keeps the closest sentence.
    fleece = details(shop, "How warm is the fleece?", product="fleece", question="How warm is the fleece?")
    assert fleece.reply == "The Cascade Fleece Jacket: A soft, warm mid layer made from recycled polyester fleece."


def test_a_named_product_warm_enough_for_a_bare_figure(shop):
    text = "Is the Alpine bag warm enough for -5?"
    assert details(shop, text, product="Alpine bag", question=text).reply == (
        "Yes. The Alpine Down Sleeping Bag: Responsibly sourced 800-fill goose down keeps you comfortable to -7 °C.")
    text = "Is the Breeze bag warm enough for 0 degrees?"
    assert details(shop, text, product="Breeze bag", question=text).reply.startswith("No. The Breeze Synthetic Sleeping Bag")


def test_the_reply_is_in_the_shoppers_language_around_the_stores_words(shop):
    """A model's plan of "¿Cuánto pesa la estufa?": the question in English for the catalog, the reply's own words
    in Spanish (the description stays the store's)."""
    from django.utils import translation

    with translation.override("es"):
        stove = execute(Context(shop, "¿Cuánto pesa la estufa?", retrieve, "", [], "es"),
                        [call("product_details", product="stove", question="how heavy is it")])
        tent = execute(Context(shop, "¿Cuánto pesa la tienda Ridgeline?", retrieve, "", [], "es"),
                       [call("product_details", product="Ridgeline tent", question="how heavy is it")])
    assert stove.reply == ("Nuestro catálogo no indica el peso de Micro Backpacking Stove. Alguien de nuestro equipo "
                           "puede ayudarte: pide hablar con una persona.")
    assert tent.reply == "Ridgeline 2-Person Tent: Packed weight 1.6 kg."


def test_how_much_is_it_is_its_price(shop):
    shown = cards_of(shop, "Beam 400 Rechargeable Headlamp")
    composition = details(shop, "How much is it?", shown, product="it", question="How much is it?")
    assert composition.reply == "The Beam 400 Rechargeable Headlamp costs 44.95 USD."
    poles = details(shop, "how much do they cost?", cards_of(shop, "Aluminium Trekking Poles (Pair)"), product="it",
                    question="how much do they cost?")
    assert poles.reply == "The Aluminium Trekking Poles (Pair) cost 59.00 USD."
    # marked down: the price before it too, as the search's opening said it
    tent = details(shop, "How much is the Ridgeline tent?", product="Ridgeline 2-Person Tent", question="How much is the Ridgeline tent?")
    assert tent.reply == "The Ridgeline 2-Person Tent costs 249.00 USD. The Ridgeline 2-Person Tent is on sale: down from 279.00 USD."


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        # the search listed the vest with its sale price and first sentence, as if that answered
        ("Is the down vest machine washable?",
         "Our catalog doesn't say that about the Featherlight Down Vest. A member of our team can help: ask for a person."),
        ("Is the stove allowed on planes?",  # the search found nothing and the answer was the store's categories
         "Our catalog doesn't say that about the Micro Backpacking Stove. A member of our team can help: ask for a person."),
        ("Does the water bottle keep drinks cold?",  # the name's words count as said of it: "water bottle"
         "Yes. The Insulated Steel Water Bottle 750 ml: A double-walled stainless steel bottle that keeps drinks cold for 24 "
         "hours or hot for 12."),
        # "are the ...": one product when one is called that (the search listed the poles' first sentence)
        ("Are the trekking poles collapsible?", "The Aluminium Trekking Poles (Pair): Collapse to 65 cm to strap onto a pack."),
        # the word asked about ("set") in a sentence further by meaning than "A roomy ... hammock": "doesn't say"
        ("Is the hammock easy to set up?", "The Drift Camping Hammock: Sets up between two trees in a minute."),
        # what is said of the beanie was taken for the kind asked for: "Sorry, we don't carry beanie itchies."
        ("Is the beanie itchy?",
         "No. The Merino Wool Beanie: A soft, itch-free merino beanie that keeps your ears warm on frosty mornings and "
         "packs into any pocket."),
        ("Does the beanie itch?",
         "No. The Merino Wool Beanie: A soft, itch-free merino beanie that keeps your ears warm on frosty mornings and "
         "packs into any pocket."),
        ("Are the socks machine washable?",
         "Our catalog doesn't say that about the Merino Hiking Socks (3-Pack). A member of our team can help: ask for a "
         "person."),
        # a colour of a product sold in sizes only: the sizes were the whole answer
        ("Does the down vest come in black?", "The Featherlight Down Vest comes in sizes M and L; no black is listed."),
        # a product sold in one version: "Our catalog doesn't say that ..." to a colour asked
        ("Does the daypack come in black?", "The Daytripper 22L Daypack comes in one version only."),
        ("Does the family tent have a divider?", "Yes. The Basecamp 6 Family Tent: A divider turns it into two bedrooms."),
        # "fit" with a thing after it is no size question ("comes in Slate and Rust"), and no word for the answer
        ("Does the Summit backpack fit a laptop?",
         "Our catalog doesn't say that about the Summit 40L Backpack. A member of our team can help: ask for a person."),
        ("Does the daypack fit a laptop?",
         "The Daytripper 22L Daypack: A light 22-litre daypack with a padded laptop sleeve, side bottle pockets and a hip "
         "belt, for day hikes and the commute alike."),
        # a property of one product, named ("I can help with Demo Outfitters' products ..." answered both)
        ("What's the R-value of the sleeping pad?",
         "The Cloudrest Inflatable Sleeping Pad: Seven centimetres of air between you and the rocky ground, with an "
         "insulating layer for cold seasons (R-value 4.2)."),
        ("How much weight can the chair hold?", "The Folding Camp Chair: Holds up to 120 kg."),
        ("Do the boots need breaking in?",  # "Sorry, we don't carry boots breaking."
         "Our catalog doesn't say that about the Trailblazer Waterproof Hiking Boots. A member of our team can help: ask "
         "for a person."),
    ],
)
def test_a_yes_no_question_about_one_named_product_through_the_rule_planner(shop, text, reply):
    from catalog import language
    from shop_assistant.chat.answers.planning import rules

    context = Context(shop, text, retrieve, "", [], language.detect(text))
    composition = execute(context, rules.plan(context))
    assert composition.kind == DETAILS and composition.reply == reply


def test_a_yes_no_question_its_name_answers_is_a_yes_with_its_description(shop):
    """"Is the headlamp rechargeable?" was "Our catalog doesn't say that about the Beam 400 Rechargeable Headlamp":
    the words of the name were taken for the words naming it. The name settles it; never a "No." from a name."""
    text = "Is the headlamp rechargeable?"
    assert details(shop, text, product="headlamp", question=text).reply == (
        "Yes. The Beam 400 Rechargeable Headlamp: 400 lumens of light charged over USB-C, with a red night mode that "
        "does not wake your tent mate.")
    text = "Is the Ridgeline tent a 2-person tent?"
    assert details(shop, text, product="Ridgeline tent", question=text).reply.startswith("Yes. The Ridgeline 2-Person Tent: ")
    text = "Is the fleece waterproof?"  # nothing in its name or text says so
    assert details(shop, text, product="fleece", question=text).reply.startswith(
        "Our catalog doesn't say that about the Cascade Fleece Jacket.")


@pytest.mark.parametrize(
    ("text", "product", "reply"),
    [
        ("How many liters is the Summit backpack?", "Summit backpack",
         "The Summit 40L Backpack: A 40-litre pack for weekend trips, with an adjustable back length, a ventilated mesh "
         "back panel and a built-in rain cover."),
        # "how much" with "hold" is its volume, not its price
        ("How much does the daypack hold?", "daypack",
         "The Daytripper 22L Daypack: A light 22-litre daypack with a padded laptop sleeve, side bottle pockets and a "
         "hip belt, for day hikes and the commute alike."),
        # the description gives no volume: its name does
        ("What's the volume of the insulated bottle?", "insulated bottle",
         "The Insulated Steel Water Bottle 750 ml holds 750 ml."),
        ("How many litres is the tent?", "Ridgeline tent",
         "Our catalog doesn't give the volume of the Ridgeline 2-Person Tent. A member of our team can help: ask for a "
         "person."),
    ],
)  # fmt: skip
def test_a_volume_is_a_figure_from_its_description_else_its_name(shop, text, product, reply):
    assert details(shop, text, product=product, question=text).reply == reply


def test_the_one_pointed_at_by_a_measure_is_asked_of_what_follows(shop):
    """"does the warmer one have a hood?": "warmer" says which bag, not what is asked of it (the "Yes." was lost to
    it: no sentence says "warmer"); the lighter tent, when one tent's weight is not given, is the weights' answer."""
    from catalog import language
    from shop_assistant.chat.answers.planning import rules

    bags = cards_of(shop, "Breeze Synthetic Sleeping Bag", "Alpine Down Sleeping Bag")
    text = "does the warmer one have a hood?"
    context = Context(shop, text, retrieve, "", bags, language.detect(text))
    composition = execute(context, rules.plan(context))
    assert composition.reply.startswith("Yes. The Alpine Down Sleeping Bag: A draft collar and a hood")
    tents = cards_of(shop, "Ridgeline 2-Person Tent", "Basecamp 6 Family Tent")
    text = "Is the lighter one freestanding?"
    calls = rules.plan(Context(shop, text, retrieve, "", tents, "en"))
    assert [(c.name, c.arguments.model_dump()["attribute"]) for c in calls] == [("compare_products", "weight")]
    composition = execute(Context(shop, text, retrieve, "", tents, "en"), calls)
    assert composition.reply == (
        "The Ridgeline 2-Person Tent weighs 1.6 kg. Our catalog doesn't list the weight of the Basecamp 6 Family Tent."
    )
