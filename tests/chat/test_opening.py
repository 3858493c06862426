"""shop_assistant.chat.answers.opening: an answer's first sentences, composed from the store's data."""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal

import pytest

from catalog.grounding import ProductFacts
from catalog.models import Store
from catalog.passages import Match, Passage
from shop_assistant.chat.answers.opening import (
    DEFAULT_TEMPLATES,
    opening_for,
    settles,
    template_errors,
    templates_for,
)
from shop_assistant.chat.models import AnswerSettings
from shop_assistant.evaluation.words import judge


def product(title: str, price: str, **changes) -> ProductFacts:
    values = dict(
        title=title, variant="", price=Decimal(price), currency="USD", compare_at_price=None, in_stock=True,
        others_in_stock=False, product_type="Jackets", vendor="Northpeak", tags=(), options="",
        description="A light shell for wet days. Fully waterproof with taped seams.",
    )  # fmt: skip
    values.update(changes)
    return ProductFacts(**values)


def store_with(name: str, templates: dict[str, list[str]] | None = None) -> Store:
    """An unsaved store with the owner's opening templates (none: the defaults)."""
    store = Store(name=name, slug="shop")
    AnswerSettings(store=store, opening_templates=templates or {})
    return store


STORE = store_with("Demo Outfitters")
SHELL = product("Stormshell Rain Jacket", "189.00")
FLEECE = product("Cascade Fleece Jacket", "79.00", description="A soft, warm mid layer. Wear it on cool evenings.")
POLES = product("Aluminium Trekking Poles (Pair)", "59.00", in_stock=False, description="Adjustable poles.")


def match(text: str, kind: str = "returns", title: str = "Returns and refunds", question: str = "") -> Match:
    answer = text.split("? ", 1)[1] if question else text
    return Match(Passage(1, kind, title, text, 0, question, answer), 1.0)


def test_one_product_names_its_price_and_the_sentence_with_the_shoppers_words():
    opening = opening_for(STORE, "Do you have a waterproof jacket?", [SHELL], [])
    assert opening.kind == "product" and opening.text.startswith("Yes! ")
    assert "Stormshell Rain Jacket" in opening.text and "189.00 USD" in opening.text
    assert "Stormshell Rain Jacket: Fully waterproof with taped seams." in opening.text


def test_several_products_are_listed_with_prices_and_what_tells_them_apart():
    text = opening_for(STORE, "I need a jacket.", [SHELL, FLEECE], []).text
    assert "the Stormshell Rain Jacket (189.00 USD)" in text and "the Cascade Fleece Jacket (79.00 USD)" in text
    assert "The least expensive is the Cascade Fleece Jacket." in text
    assert not text.startswith("Yes")  # "I need ..." is not a "do you have ...?"


def test_yes_only_when_every_word_asked_for_is_in_the_products_data():
    assert not opening_for(STORE, "Do you have a purple jacket?", [SHELL], []).text.startswith("Yes")
    assert opening_for(STORE, "Do you have a warm jacket under $100?", [FLEECE], []).text.startswith("Yes")


def test_stock_and_markdowns_come_from_the_rows():
    text = opening_for(STORE, "Are the trekking poles in stock?", [POLES], []).text
    # The lead says it: no "You could go for ..." before it, no "In stock now." after it.
    assert text.startswith("The Aluminium Trekking Poles (Pair) cost 59.00 USD but are out of stock right now.")
    assert "In stock now" not in text and "go for" not in text
    sale = product("Ridgeline Tent", "249.00", compare_at_price=Decimal("279.00"))
    assert "The Ridgeline Tent is on sale: down from 279.00 USD." in opening_for(STORE, "Any deals?", [sale], []).text
    assert "regular prices" in opening_for(STORE, "Any deals on jackets?", [SHELL, FLEECE], []).text
    # one product asked about is named ("These are at their regular prices" of one tent)
    one = opening_for(STORE, "Is the rain jacket on sale?", [SHELL], []).text
    assert f"The {SHELL.title} is at its regular price right now." in one and "These" not in one


def test_a_policy_sentence_opens_with_its_document_and_a_plain_yes_or_no_only_when_it_settles_it():
    worn = match("Worn footwear cannot be returned.")
    assert settles("Can I return worn footwear?", worn.passage.text) == "No."
    # A condition on either side and a bare "No." or "Yes." would say more than the sentence does.
    assert settles("Can I return worn footwear?", "Worn footwear cannot be returned unless it is faulty.") is None
    assert opening_for(STORE, "Can I return worn footwear?", [], [worn]).text.startswith("No. ")
    canada = match("We ship within the United States and Canada only.", "shipping", "Shipping")
    assert settles("Do you ship to Canada?", canada.passage.text) is None  # "only": a bare yes says more
    assert settles("Do you ship to Mexico?", canada.passage.text) is None
    assert settles("Can I return items after 30 days?", "You can return items within 30 days.") is None
    # a "not" said of something else than what is asked is no "No."
    lamp = "Headlamp: a red light mode that does not wake your tent mate."
    assert settles("Does the headlamp have a red light?", lamp) is None
    assert settles("Do the socks smell?", "Socks: merino wool that wicks sweat and does not smell.") == "No."
    text = opening_for(STORE, "Do you ship to Canada?", [], [canada]).text
    assert "we ship within the United States and Canada only." in text and "shipping policy" in text


def test_an_faq_answer_reads_on_its_own():
    payment = match("Which payment methods do you accept? Visa and PayPal.", "faq", "FAQ",
                    question="Which payment methods do you accept?")  # fmt: skip
    assert opening_for(STORE, "What can I pay with?", [], [payment]).text == (
        "The payment methods we accept: Visa and PayPal."
    )
    store = match("Do you have a physical store? Not yet: we are online only.", "faq", "FAQ",
                  question="Do you have a physical store?")  # fmt: skip
    assert opening_for(STORE, "Can I visit your shop?", [], [store]).text == "Not yet: we are online only."


def test_small_talk_opens_with_what_the_assistant_can_do():
    assert opening_for(STORE, "hi there", [], [], ["tents", "jackets"]).kind == "greeting"
    assert opening_for(STORE, "Thanks!", [], []).text in DEFAULT_TEMPLATES["thanks"]
    other = opening_for(STORE, "I like long walks.", [], [], ["tents", "jackets"])
    assert other.kind == "other" and "Demo Outfitters" in other.text and "tents, jackets" in other.text


def test_the_same_question_always_gets_the_same_wording_and_questions_vary():
    first = opening_for(STORE, "Do you have a waterproof jacket?", [SHELL], []).text
    assert first == opening_for(STORE, "do you have a  waterproof jacket?", [SHELL], []).text
    wordings = {opening_for(STORE, f"I need a jacket #{i}", [SHELL], []).text.split(" Stormshell")[0] for i in range(20)}
    assert len(wordings) == len(DEFAULT_TEMPLATES["product"])


def test_the_owners_wording_is_used_and_checked():
    store = store_with("Corner", {"product": ["In stock for you: the {product}, {price}."]})
    assert opening_for(store, "A jacket?", [SHELL], []).text.startswith(
        "In stock for you: the Stormshell Rain Jacket, 189.00 USD."
    )
    assert templates_for(store)["products"] == DEFAULT_TEMPLATES["products"]  # kinds left out: the defaults
    assert template_errors("product", "We have {product}.") == ["'We have {product}.': needs {price}"]
    assert template_errors("product", "{product} {price} {store}") == ["'{product} {price} {store}': unknown placeholder {store}"]
    assert template_errors("thanks", "Thanks {") != []


@pytest.mark.parametrize("kind", sorted(DEFAULT_TEMPLATES))
def test_the_default_wordings_are_valid(kind):
    assert [error for template in DEFAULT_TEMPLATES[kind] for error in template_errors(kind, template)] == []


def test_a_plural_product_name_takes_a_plural_verb():
    boots = product("Trailblazer Hiking Boots", "159.00", product_type="Footwear", description="Leather boots.")
    store = store_with("Demo Outfitters", {"product": ["There's the {product}, at {price}."]})
    text = opening_for(store, "Do you sell hiking boots?", [boots], []).text
    assert text.startswith("Yes! There are the Trailblazer Hiking Boots, at 159.00 USD."), text


def test_a_property_asked_for_that_the_closest_products_lack_is_said():
    """"A waterproof jacket under $150": the store has waterproof jackets, not under 150 USD. The fleece and the
    vest are the closest, and the opening says so instead of "These match what you asked for"."""
    fleece = product("Cascade Fleece Jacket", "79.00", description="A soft, warm mid layer.")
    vest = product("Featherlight Down Vest", "109.00", description="A light down vest.")
    catalog = frozenset({"waterproof", "jacket", "fleece", "vest", "down", "soft"})
    text = opening_for(STORE, "Do you have a waterproof jacket under $150?", [vest, fleece], [], (), catalog).text
    assert text.startswith("The closest we have: the Featherlight Down Vest (109.00 USD) and the Cascade Fleece")
    assert "Neither is described as waterproof." in text and not text.startswith("Yes")
    # What the store describes nothing with, or words saying what a thing is for, are not a lack.
    assert "described" not in opening_for(STORE, "A camping jacket for my garden?", [fleece], [], (), catalog).text
    assert opening_for(STORE, "Do you have a waterproof jacket?", [SHELL], [], (), catalog).text.startswith("Yes! ")
    # A product the shopper names is not "the closest we have": the lead answers about it.
    text = opening_for(STORE, "Is the Featherlight Down Vest waterproof?", [vest], [], (), catalog).text
    assert text.startswith("The Featherlight Down Vest (109.00 USD) is not described as waterproof. ")
    assert "closest" not in text and text.count("waterproof") == 1


# Options as the catalog's variants give them (``catalog.grounding.option_values``): the demo store's rows.
FLEECE_OPTIONS = dict(
    variant="M / Forest",
    options="Size: M, L; Color: Forest, Charcoal",
    option_values=(("Size", (("M", True), ("L", True))), ("Color", (("Forest", True), ("Charcoal", True)))),
    variant_options=((("M", "Forest"), True), (("L", "Forest"), True), (("M", "Charcoal"), True),
                     (("L", "Charcoal"), False)),
)  # fmt: skip
FLEECE_IN_OPTIONS = product("Cascade Fleece Jacket", "79.00", description="A soft, warm mid layer.", **FLEECE_OPTIONS)
WOMENS_SHELL = product(
    "Women's Stormshell Rain Jacket", "189.00", variant="S", options="Size: S, M, L",
    option_values=(("Size", (("S", True), ("M", True), ("L", True))),),
)  # fmt: skip
SLEEPING_BAG = product(
    "Alpine Down Sleeping Bag", "319.00", product_type="Sleeping bags", variant="Regular",
    options="Length: Regular, Long (sold out)", description="Warm to -7 °C.",
    option_values=(("Length", (("Regular", True), ("Long", False))),),
)  # fmt: skip


def sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.!?])\s+", text)


def test_a_question_about_sizes_is_answered_with_the_sizes_right_after_the_lead():
    text = opening_for(STORE, "What sizes does the womens rain jacket come in?", [WOMENS_SHELL], []).text
    assert sentences(text)[1] == "The Women's Stormshell Rain Jacket comes in sizes S, M and L.", text


def test_sizes_and_colours_are_said_together():
    text = opening_for(STORE, "What colours does the fleece come in?", [FLEECE_IN_OPTIONS], []).text
    assert sentences(text)[1] == "The Cascade Fleece Jacket comes in sizes M and L, in Forest and Charcoal.", text


def test_a_colour_named_is_said_to_be_in_stock():
    text = opening_for(STORE, "Does the fleece jacket come in charcoal?", [FLEECE_IN_OPTIONS], []).text
    assert sentences(text)[1:3] == [
        "The Cascade Fleece Jacket comes in sizes M and L, in Forest and Charcoal.", "Charcoal is in stock.",
    ], text


def test_a_size_word_is_read_as_the_letter_size():
    text = opening_for(STORE, "Do you have the Cascade Fleece Jacket in large?", [FLEECE_IN_OPTIONS], []).text
    assert "Size L is in stock." in sentences(text), text


def test_a_size_and_colour_named_together_are_checked_as_one_variant():
    """L is in stock (in Forest) and Charcoal is (in M), but not L in Charcoal: the opening must not say yes."""
    question = "Do you have the Cascade Fleece Jacket in large charcoal?"
    text = opening_for(STORE, question, [FLEECE_IN_OPTIONS], []).text
    assert "Size L in Charcoal is sold out right now." in sentences(text), text
    assert "Size L is in stock." not in text and "Charcoal is in stock." not in text
    assert not text.startswith("Yes")


def test_a_sold_out_value_is_marked_and_said():
    text = opening_for(STORE, "Do you have the sleeping bag in long?", [SLEEPING_BAG], []).text
    assert sentences(text)[1:3] == [
        "The Alpine Down Sleeping Bag comes in Regular and Long length (Long sold out).",
        "Long length is sold out right now.",
    ], text
    assert not text.startswith("Yes")


def test_a_sold_out_size_is_said_and_no_in_stock_filler_follows():
    shell = replace(WOMENS_SHELL, option_values=(("Size", (("S", True), ("M", True), ("L", False))),))
    text = opening_for(STORE, "Is the rain jacket available in size L?", [shell], []).text
    assert "The Women's Stormshell Rain Jacket comes in sizes S, M and L (sold out)." in text
    assert "Size L is sold out right now." in text and "In stock now." not in text, text


def test_a_size_the_product_does_not_list_is_said_plainly():
    for question in ("Do you have the women's rain jacket in XL?", "Is the womens rain jacket made in extra large?"):
        text = opening_for(STORE, question, [WOMENS_SHELL], []).text
        assert sentences(text)[1] == "The Women's Stormshell Rain Jacket comes in sizes S, M and L; no XL is listed."
        assert not text.startswith("Yes"), text


def test_two_products_each_get_their_options_named_with_the_product():
    text = opening_for(STORE, "Do your jackets come in M?", [WOMENS_SHELL, FLEECE_IN_OPTIONS], []).text
    assert sentences(text)[1:5] == [
        "The Women's Stormshell Rain Jacket comes in sizes S, M and L.",
        "The Women's Stormshell Rain Jacket in size M is in stock.",
        "The Cascade Fleece Jacket comes in sizes M and L, in Forest and Charcoal.",
        "The Cascade Fleece Jacket in size M is in stock.",
    ], text


def test_no_options_sentence_when_not_asked_or_when_the_product_has_none():
    # Not asked: the opening is as before. Letters inside words ("what's", "I'm") name no size.
    for question in ("I need a jacket.", "What's the fleece like? I'm curious"):
        text = opening_for(STORE, question, [FLEECE_IN_OPTIONS], []).text
        assert "comes in" not in text and "in stock" not in text, text
    # A product without options gets nothing extra, even when sizes are asked about.
    assert "comes in" not in opening_for(STORE, "What sizes does the fleece come in?", [FLEECE], []).text



def test_a_product_sold_in_one_version_says_so_when_a_size_or_colour_is_asked():
    one = product("Daytripper 22L Daypack", "69.00", variant_options=(((), True),), description="A light daypack.")
    text = opening_for(STORE, "What colours does the daypack come in?", [one], []).text
    assert "The Daytripper 22L Daypack comes in one version only." in sentences(text), text
    assert "The Daytripper 22L Daypack comes in one version only." in sentences(
        opening_for(STORE, "Do you have the daypack in black?", [one], []).text)
    assert "one version" not in opening_for(STORE, "Is the daypack light?", [one], []).text
    # a colour its own text has ("a red night mode") is no colour option asked for
    lamp = product("Beam Headlamp", "44.95", variant_options=(((), True),), description="A red night mode.")
    assert "one version" not in opening_for(STORE, "Does the headlamp have a red light?", [lamp], []).text


RIDGELINE = product("Ridgeline 2-Person Tent", "249.00", product_type="Tents", tags=("backpacking", "tent", "3-season"),
                    description="A freestanding three-season tent for two that packs down to the size of a loaf of bread.")
BASECAMP = product("Basecamp 6 Family Tent", "429.00", product_type="Tents", tags=("family", "car camping", "tent"),
                   description="Room for six sleeping bags, made for campground weekends rather than long hikes.")


def test_which_is_best_for_a_use_names_the_product_the_store_labels_for_it():
    question = "Which tent is best for backpacking?"
    text = opening_for(STORE, question, [RIDGELINE, BASECAMP], []).text
    assert "For backpacking, the Ridgeline 2-Person Tent is the one to pick." in text
    # The evaluation's word rules find nothing in it the question and the products' rows do not support.
    evidence = "\n".join([question, RIDGELINE.text(), BASECAMP.text(), "249.00 USD 429.00 USD"])
    assert judge(text, evidence, titles=[RIDGELINE.title, BASECAMP.title]).unsupported == []
    assert "The Ridgeline 2-Person Tent is a freestanding three-season tent for two" in text
    assert text.index("is the one to pick") < text.index("The least expensive")
    text = opening_for(STORE, "What would you recommend for car camping with the kids?", [RIDGELINE, BASECAMP], []).text
    assert "For car camping with the kids" not in text  # "kids" is no label of either: no pick
    text = opening_for(STORE, "Which tent is good for car camping?", [RIDGELINE, BASECAMP], []).text
    assert "For car camping, the Basecamp 6 Family Tent is the one to pick." in text
    text = opening_for(STORE, "Which tent should I take for my family?", [RIDGELINE, BASECAMP], []).text
    assert "For your family, the Basecamp 6 Family Tent is the one to pick." in text


def test_no_pick_when_every_product_or_none_has_the_use_or_only_a_description_names_it():
    both = replace(BASECAMP, tags=("backpacking",))
    assert "to pick" not in opening_for(STORE, "Which tent is best for backpacking?", [RIDGELINE, both], []).text
    named = replace(BASECAMP, title="Basecamp Backpacking Tent")  # a title is the store's label too
    assert "to pick" not in opening_for(STORE, "Which tent is best for backpacking?", [RIDGELINE, named], []).text
    sold_out = replace(RIDGELINE, in_stock=False)  # never "the one to pick" for what cannot be bought
    assert "to pick" not in opening_for(STORE, "Which tent is best for backpacking?", [sold_out, BASECAMP], []).text
    assert "to pick" not in opening_for(STORE, "Which tent is best for fishing?", [RIDGELINE, BASECAMP], []).text
    # "made for campground weekends rather than long hikes" is no label for hikes
    assert "to pick" not in opening_for(STORE, "Which tent is best for hikes?", [RIDGELINE, BASECAMP], []).text
    assert "to pick" not in opening_for(STORE, "Is it good for backpacking?", [RIDGELINE], []).text


# --- the opening in the shopper's language (composed under translation.override; the pipeline sets it) ---

from django.utils import translation  # noqa: E402

from catalog.language import detect  # noqa: E402

ON_SALE = product("Stormshell Rain Jacket", "189.00", compare_at_price=Decimal("220.00"))


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("es", "Esto encaja con lo que buscas: Stormshell Rain Jacket (189.00 USD) y Aluminium Trekking Poles (Pair) "
               "(59.00 USD). La opción más económica es Aluminium Trekking Poles (Pair). Aluminium Trekking Poles "
               "(Pair): sin existencias por ahora."),
        ("fr", "Voici ce qui correspond à votre demande : Stormshell Rain Jacket (189.00 USD) et Aluminium Trekking "
               "Poles (Pair) (59.00 USD). L’option la moins chère est Aluminium Trekking Poles (Pair). Aluminium "
               "Trekking Poles (Pair) : en rupture de stock pour le moment."),
        ("de", "Das passt zu Ihrer Anfrage: Stormshell Rain Jacket (189.00 USD) und Aluminium Trekking Poles (Pair) "
               "(59.00 USD). Am günstigsten ist Aluminium Trekking Poles (Pair). Aluminium Trekking Poles (Pair) "
               "sind derzeit nicht vorrätig."),
    ],
)
def test_the_products_opening_speaks_the_shoppers_language_with_the_catalogs_titles_and_prices(language, expected):
    question = "¿Tienen chaquetas impermeables?"
    with translation.override(language):
        text = opening_for(STORE, question, [SHELL, POLES], []).text
    assert text == expected
    assert detect(text) == language  # a detector that knows nothing of our .po files reads it so
    # English, as before: the same question, the same sentences.
    with translation.override("en"):
        english = opening_for(STORE, question, [SHELL, POLES], []).text
    assert english == opening_for(STORE, question, [SHELL, POLES], []).text
    assert "The least expensive is the Aluminium Trekking Poles (Pair)." in english
    assert english.endswith("The Aluminium Trekking Poles (Pair) are out of stock right now.")


def test_a_sale_is_said_in_the_shoppers_language_and_the_catalogs_english_description_is_left_out():
    """The facts (price, sale) in Spanish; the description, the catalog's English, would make the answer half
    English: the card carries it. In English it is said as before."""
    with translation.override("es"):
        text = opening_for(STORE, "¿Tienen chaquetas para la lluvia?", [ON_SALE], []).text
    assert "Stormshell Rain Jacket está en oferta: antes costaba 220.00 USD." in text
    assert "189.00 USD" in text
    assert "a light shell for wet days" not in text
    with translation.override("en"):
        english = opening_for(STORE, "¿Tienen chaquetas para la lluvia?", [ON_SALE], []).text
    assert "The Stormshell Rain Jacket is on sale: down from 220.00 USD." in english
    assert "a light shell for wet days." in english


def test_a_policy_lead_in_is_translated_the_policy_sentence_is_the_stores():
    german = [match("Unbenutzte Artikel können innerhalb von 30 Tagen zurückgegeben werden.")]
    with translation.override("de"):
        text = opening_for(STORE, "Kann ich Artikel zurückgeben?", [], german).text
    assert text.startswith(("Unsere Richtlinie", "Aus unserer Richtlinie", "Das besagt unsere Richtlinie"))
    assert text.endswith(": Unbenutzte Artikel können innerhalb von 30 Tagen zurückgegeben werden.")  # as written


def test_a_policy_in_another_language_is_left_to_the_quote_box_under_a_lead_in_the_shoppers():
    english = [match("Unworn items can be returned within 30 days.")]
    with translation.override("de"):
        opening = opening_for(STORE, "Kann ich Artikel zurückgeben?", [], english)
    assert opening.kind == "policy_quoted"
    assert opening.text in ("Das sagt unsere Richtlinie dazu; sie steht unten im Wortlaut, so wie der Shop sie "
                            "geschrieben hat.", "Unsere Richtlinie beantwortet das; Sie finden sie unten wörtlich zitiert.")
    assert "Unworn" not in opening.text
    with translation.override("en"):  # the same document to an English shopper: the sentence in the text
        assert opening_for(STORE, "Can I return items?", [], english).text.endswith(
            "policy says: Unworn items can be returned within 30 days.")


def test_the_owners_own_templates_are_never_translated():
    store = store_with("Demo Outfitters", {"products": ["Look: {products}."]})
    with translation.override("fr"):
        text = opening_for(store, "Avez-vous des vestes imperméables ?", [SHELL, FLEECE], []).text
        defaults = templates_for(STORE)
    assert text.startswith("Look: Stormshell Rain Jacket (189.00 USD) et Cascade Fleece Jacket (79.00 USD).")
    # The defaults in French keep as many wordings as in English: a question picks the same one in every language.
    assert all(len(defaults[kind]) == len(DEFAULT_TEMPLATES[kind]) for kind in DEFAULT_TEMPLATES)
    assert defaults["thanks"] != DEFAULT_TEMPLATES["thanks"]


PACK = product("Summit 40L Backpack", "149.00", product_type="Backpacks", options="Colour: Slate, Rust",
               option_values=(("Colour", (("Slate", True), ("Rust", False))),),
               description="A 40-litre pack for weekend trips. Fits a 3-litre hydration bladder.")  # fmt: skip


def test_a_yes_no_question_about_the_one_product_found_is_answered_first_when_its_sentence_settles_it():
    text = opening_for(STORE, "Will a 3 litre water bladder fit in the Summit backpack?", [PACK], []).text
    assert text.startswith("Yes. Summit 40L Backpack: Fits a 3-litre hydration bladder. ")  # then the lead, once
    assert text.count("Fits a 3-litre") == 1 and "149.00 USD" in text
    # a figure the sentence does not give, a word it lacks, or two products: the facts alone, no verdict
    assert not opening_for(STORE, "Will a 5 litre water bladder fit in the Summit backpack?", [PACK], []).text.startswith(("Yes", "No"))
    assert not opening_for(STORE, "Will a 3 litre wine bladder fit in the Summit backpack?", [PACK], []).text.startswith(("Yes", "No"))
    assert not opening_for(STORE, "Is a 3 litre bladder fine in these?", [PACK, SHELL], []).text.startswith(("Yes", "No"))
    # a colour named is the rows' answer ("Rust is sold out"), not the description's
    assert not opening_for(STORE, "Will a 3 litre bladder fit in the Rust Summit backpack?", [PACK], []).text.startswith("Yes")
    # "do you have ...?" keeps its one "Yes!" from the lead
    assert opening_for(STORE, "Do you have a waterproof jacket?", [SHELL], []).text.count("Yes") == 1


def test_a_yes_no_question_the_products_name_settles_is_answered_yes():
    """"Is the headlamp rechargeable?" of the Beam 400 Rechargeable Headlamp: its name says so (its sentence
    about USB-C charging holds "not", and would have made it a "No.")."""
    lamp = product("Beam 400 Rechargeable Headlamp", "44.95", product_type="Lighting",
                   description="400 lumens of light charged over USB-C, with a red night mode that does not wake your tent mate.")  # fmt: skip
    assert opening_for(STORE, "Is the headlamp rechargeable?", [lamp], []).text.startswith("Yes. ")
    # a word the name lacks: no verdict from the name
    assert not opening_for(STORE, "Is the headlamp waterproof?", [lamp], []).text.startswith(("Yes", "No"))


def test_a_colour_the_product_does_not_list_is_said_plainly():
    beanie = product("Merino Wool Beanie", "22.00", variant="Grey", options="Color: Grey, Mustard",
                     option_values=(("Color", (("Grey", True), ("Mustard", True))),))
    text = opening_for(STORE, "Can I get the beanie in black?", [beanie], []).text
    assert sentences(text)[1] == "The Merino Wool Beanie comes in Grey and Mustard; no black is listed."
    # A colour word of a value names it ("blue": Glacier Blue), and its stock is said.
    bottle = product("Insulated Steel Water Bottle 750 ml", "32.00", variant="Glacier Blue",
                     options="Color: Glacier Blue, Sand", variant_options=((("Glacier Blue",), True), (("Sand",), False)),
                     option_values=(("Color", (("Glacier Blue", True), ("Sand", False))),))
    text = opening_for(STORE, "Do you have the water bottle in blue?", [bottle], []).text
    assert "no blue" not in text and "Glacier Blue is in stock." in text


def test_a_colour_word_beside_a_value_named_is_no_missing_colour():
    text = opening_for(STORE, "Fleece jacket in forest green, large, in stock?", [FLEECE_IN_OPTIONS], []).text
    assert "no green" not in text and "Size L in Forest is in stock." in text
