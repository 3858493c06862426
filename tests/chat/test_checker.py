"""shop_assistant.chat.guard.checker: each rule on sentences of the kinds the bundled model writes, and the whole checker
against the sentences labelled by hand."""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog.grounding import ProductFacts
from shop_assistant.chat.guard.checker import Evidence, check
from shop_assistant.evaluation import sentences

BOOTS = ProductFacts(
    title="Trailblazer Waterproof Hiking Boots", variant="US 8", price=Decimal("159.00"), currency="USD",
    compare_at_price=None, in_stock=True, others_in_stock=True, product_type="Footwear", vendor="Northpeak",
    tags=("hiking", "boots"), options="Size: US 8, US 9, US 10",
    description="Mid-height leather boots with a waterproof membrane and a grippy rubber sole for rocky, muddy trails.",
)  # fmt: skip
TENT = ProductFacts(
    title="Ridgeline 2-Person Tent", variant="Sage", price=Decimal("249.00"), currency="USD",
    compare_at_price=Decimal("279.00"), in_stock=True, others_in_stock=False, product_type="Tents", vendor="Northpeak",
    tags=("tent",), options="Color: Sage, Orange (sold out)",
    description="A freestanding three-season tent for two that packs down to the size of a loaf of bread.",
)  # fmt: skip
FLEECE = ProductFacts(
    title="Cascade Fleece Jacket", variant="M / Forest", price=Decimal("79.00"), currency="USD",
    compare_at_price=None, in_stock=True, others_in_stock=True, product_type="Jackets", vendor="Woolly Goat",
    tags=("fleece",), options="Size: M, L; Color: Forest, Charcoal",
    description="A soft, warm mid layer made from recycled polyester fleece.",
)  # fmt: skip
RETURNS = (
    "You can return unused items in their original condition within 30 days of delivery for a full refund. "
    "Worn footwear, used stoves and opened first aid kits cannot be returned unless they are faulty."
)
PRODUCT = Evidence(
    question="Do you sell hiking boots?",
    opening="Yes! There's the Trailblazer Waterproof Hiking Boots, at 159.00 USD.",
    products=(BOOTS,),
    documents=(RETURNS,),
    store_name="Demo Outfitters",
)
TWO = Evidence(question="Do you have boots or tents?", products=(BOOTS, TENT), documents=(RETURNS,), store_name="Demo")
POLICY = Evidence(question="Can I return boots I already wore?", quotes=(RETURNS.split(". ")[1],), documents=(RETURNS,))


@pytest.mark.parametrize(
    "sentence",
    [
        "They have a waterproof membrane and a grippy rubber sole.",
        "Let me know if you need anything else!",
        "Is there something specific you're looking for?",
        "Thanks for asking!",
        "The Trailblazer Waterproof Hiking Boots come in US 8, US 9 and US 10.",
        "They cost 159.00 USD.",
    ],
)
def test_what_the_data_says_and_plain_helpfulness_pass(sentence):
    assert check(sentence, PRODUCT, [PRODUCT.opening]).ok


@pytest.mark.parametrize(
    ("sentence", "reason"),
    [
        ("I'm sorry for any confusion, but as a digital platform I don't sell physical goods.", "disowns"),
        ("This customer wants to know whether we sell boots.", "narrates"),
        ("The chatbot has no way to verify the order.", "narrates"),
        ("User: do you have boots?", "speaker label"),
        ("Chat History:", "speaker label"),
        ("Check them out on Amazon.", "disowns"),
        ("They are 20% off this week!", "figure"),
        ("They weigh six hundred grams.", "figure"),
        ("We also carry the Summit Trail Runners.", "names"),
        ("We also carry trail runners in other colours.", "claims products"),
        ("They were designed by Doogie in New York.", "names"),
        ("They are perfect for mountain biking adventures.", "not in the store's data"),
        ("They are not waterproof.", "negative claim"),
        ("No suggestions on what we have but if there is something specific you're looking for, just let me know.",
         "lacks"),
        ("We don't have anything like that right now.", "lacks"),
        ("Please provide your order number so I can help.", "personal details"),
        ("I love wearing them on my own hikes.", "persona"),
        ("Can you tell me more about it?", "speaks as the shopper"),
        ("How'd it go?", "question"),
        ("I hope they will help you find something else as well...", "trails off"),
        ("Thank you for everything!", "remark"),
        ("You're looking for hiking boots?", "remark"),
        ("You're looking again!", "remark"),
        ("Please order it now!", "remark"),
        ("Yes! There's the Trailblazer Waterproof Hiking Boots, at 159.00 USD.", "repeats"),
        ("[SKU DO-TB-8]", "markup"),
        ("Visit https://shop.example/boots for more.", "markup"),
    ],
)
def test_what_the_data_does_not_say_is_not_shown(sentence, reason):
    verdict = check(sentence, PRODUCT, [PRODUCT.opening])
    assert not verdict.ok, sentence
    assert reason.split()[0] in verdict.reason or reason in ("speaker label", "markup"), verdict.reason


def test_a_size_only_as_the_catalog_lists_it_even_when_the_shopper_named_it():
    """The opening said "no XL is listed"; the model's "Both are in XL." would contradict it under the cards."""
    asked = Evidence(question="Do you have the boots or the tent in XL?", products=(BOOTS, TENT), store_name="Demo")
    verdict = check("Both are in XL.", asked)
    assert not verdict.ok and verdict.reason == "a size no product on screen lists: XL"
    sized = Evidence(question="Does the fleece come in L?", products=(FLEECE,), store_name="Demo")
    assert check("It comes in M and L.", sized).ok
    assert not check("It comes in M, L and XL.", sized).ok


def test_a_sentence_about_one_product_may_use_only_that_products_words():
    assert check("The Ridgeline 2-Person Tent packs down to the size of a loaf of bread.", TWO).ok
    verdict = check("The Ridgeline 2-Person Tent has a grippy rubber sole.", TWO)
    assert not verdict.ok and "Ridgeline" in verdict.reason
    assert not check("It has a waterproof membrane.", TWO).ok  # "it": which of the two?


def test_a_policy_sentence_must_agree_with_the_stores():
    assert not check("Yes, you can return worn footwear within 30 days.", POLICY).ok
    assert check("Worn footwear cannot be returned unless it is faulty.", POLICY).ok
    verdict = check("Returns are free for members of the loyalty club.", POLICY)
    assert not verdict.ok


def test_the_labelled_sentences():
    """Every sentence of the labelled set (522 sentences the bundled model wrote, labelled by reading): the checker
    lets through no sentence a reader found unsupported, and most of those a reader found supported.

    Held-out figures, each taken once with the rules frozen (docs/answers.md): the "test" half, precision 0.58 and
    recall 0.70; the "fresh" sample, precision 0.63 and recall 0.63, its three wrongly shown sentences claiming
    nothing ("Here is your answer."). The rules were then shaped on those too, so the floors below guard against
    regressions; they are not held-out measurements. Sentences that guess at the shopper's budget ("a great option
    if your budget allows it") are dropped on purpose: one supported sentence fewer (recall 0.73 -> 0.69)."""
    score = sentences.measure()
    assert score.shown_unsupported == 0, score.mistakes
    assert score.precision == 1.0 and score.recall >= 0.69, score.summary()


def test_a_recommendation_that_guesses_the_shoppers_budget_is_not_shown():
    """The store does not know the shopper's budget: "try the Yellow Sofa if it fits your budget" claims it does."""
    from shop_assistant.chat.guard.checker import Evidence, check

    evidence = Evidence(
        question="Do you have a sofa?",
        opening="These match what you asked for: the Grey Sofa (29.99 USD) and the Yellow Sofa (99.99 USD).",
        store_name="Sample Home And Garden",
    )
    assert not check("You might want to try the Yellow Sofa if it fits your budget.", evidence).ok
    assert check("You might want to try them out!", evidence).ok


def test_a_sentence_in_another_language_than_the_answer_is_not_shown():
    spanish = Evidence(
        question="¿Tienen tiendas de campaña para dos personas?",
        opening="Tenemos Ridgeline 2-Person Tent por 249.00 USD.",
        products=(TENT,),
        language="es",
    )
    english = Evidence(question="Do you have tents for two?", opening="We have the Ridgeline 2-Person Tent.",
                       products=(TENT,))
    sentence = "It is a freestanding three-season tent for two that packs down to the size of a loaf of bread."
    assert check(sentence, english).ok
    verdict = check(sentence, spanish)
    assert not verdict.ok and verdict.reason == "not in the answer's language (en, not es)"
