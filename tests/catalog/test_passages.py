"""catalog.passages: which sentence of the store's documents answers a question, across policies and the FAQ.

The demo store's documents are cut into passages named by kind and position (R3: the third sentence of the
returns policy, F4: the fourth FAQ line). ``BLIND`` was written on 2026-12-02 before the documents were read, as
shoppers would ask; "-" means the documents do not answer it. Its even-numbered half ("dev") was used to set the
scorer's weights and threshold; the odd half ("test") was held out. ``EVALUATION`` are the evaluation set's
policy questions, ``PRODUCTS`` its product questions (which no passage should answer).
"""

from __future__ import annotations

import pytest

from catalog import passages
from catalog.models import Store, StoreDocument

BLIND = [  # (question, the passages that answer it)
    ("How long until I get my money back after a return?", "R3"),
    ("Can I return boots I already wore on a hike?", "R4"),
    ("Do you have a physical store I can visit?", "F4"),
    ("Who pays for return shipping?", "R2"),
    ("Can I exchange a jacket for a different size?", "R5"),
    ("Do you ship internationally?", "S5"),
    ("How can I track my package?", "S4"),
    ("What happens if my tent arrives damaged?", "W3/W1"),
    ("Do you offer gift cards?", "F2"),
    ("How do I contact customer support?", "F5"),
    ("What are your opening hours?", "F5/F4"),
    ("Can I change the shipping address after ordering?", "F3"),
    ("Is there a warranty on sleeping bags?", "W1"),
    ("Do you price match?", "-"),
    ("What payment methods do you accept?", "F2"),
    ("How long does delivery to Europe take?", "S5"),
    ("Can I pick up my order in person?", "F4/-"),
    ("Do you offer student discounts?", "-"),
    ("Is my payment information secure?", "-"),
    ("Can I return a sale item?", "R1/-"),
    ("What if my order never arrives?", "-/F5/S4"),
    ("Do I need an account to order?", "-"),
    ("How do I find my size for boots?", "F1"),
    ("Can I get a refund to a different card?", "R1"),
    ("Do you repair gear?", "W3"),
    ("When will my order ship?", "S1"),
    ("My zipper broke after two months, what can I do?", "W3/W1"),
    ("Can I send back something I bought as a gift?", "R1/-"),
    ("How much is shipping to Canada?", "S2/S3/S5"),
    ("Do you deliver on weekends?", "S1/-"),
]
EVALUATION = [
    ("What is your return policy?", "R1"),
    ("How long do I have to return something?", "R1"),
    ("How much does express shipping cost?", "S3"),
    ("How long does standard shipping take?", "S2"),
    ("Is shipping free?", "S2"),
    ("Do you ship to Canada?", "S5"),
    ("Can I pay with PayPal?", "F2"),
    ("What warranty do your tents have?", "W1"),
    ("How long is the warranty on your products?", "W1"),
    ("Can I cancel my order?", "F3"),
    ("What does standard shipping cost?", "S2"),
    ("Do you have any discount codes?", "-"),
    ("Any discounts on tents?", "-"),
]
PRODUCTS = [
    "Do you have a waterproof jacket under $200?", "I need a tent for two people.",
    "What tents do you sell for a family of four?", "Which sleeping bag is warm enough for cold nights?",
    "Do you sell hiking boots?", "I'm looking for trail running shoes.", "Do you have a headlamp?",
    "Do you sell trekking poles?", "I want a small daypack for day hikes.", "Do you have a water filter?",
    "Do you have a camping stove?", "I need a hammock.", "Do you sell wool socks?", "Do you sell laptops?",
    "Do you have coffee beans?", "I'm looking for a kayak.", "Do you sell bicycles?", "I want to buy a smartphone.",
    "How much is the Summit 40L Backpack?", "How much does the headlamp cost?", "Is the Folding Camp Chair in stock?",
    "How many trekking poles do you have left?", "Are sleeping bags on sale?",
]  # fmt: skip


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker, embedding_model):
    """The demo store's catalog and documents (no embeddings: passages embed their own text), committed for the
    module and removed after it, with the staff user it may have created."""
    from django.contrib.auth import get_user_model

    from shop_assistant.demo.store import STAFF_USERNAME, load_demo_store

    with django_db_blocker.unblock():
        result = load_demo_store(embed=False)
        yield result.store
        result.store.delete()
        if result.user_created:
            get_user_model().objects.filter(username=STAFF_USERNAME).delete()


def name(passage: passages.Passage) -> str:
    return passage.kind[0].upper() + str(passage.position + 1)


def answered(store: Store, questions: list[tuple[str, str]]) -> list[bool]:
    """For each question, whether the best passage found is one of its answers ("-": none should be)."""
    results = []
    for question, expected in questions:
        found = passages.answering(store, question)
        results.append((name(found[0].passage) if found else "-") in expected.split("/"))
    return results


def test_documents_are_cut_into_sentences_and_faq_lines():
    faq = StoreDocument(pk=1, kind="faq", title="FAQ", body="Do you ship? Yes, daily.\nCan I pay cash? No.")
    policy = StoreDocument(pk=2, kind="returns", title="Returns", body="Return within 14 days. Keep the tags on!")
    assert [(p.question, p.answer) for p in passages.passages_of(faq)] == [
        ("Do you ship?", "Yes, daily."), ("Can I pay cash?", "No.")
    ]  # fmt: skip
    assert [p.text for p in passages.passages_of(policy)] == ["Return within 14 days.", "Keep the tags on!"]


def test_shoppers_words_meet_the_documents_words():
    assert {"refund", "wear", "footwear"} <= passages.content_words("money back for boots I wore")
    assert "ship" in passages.content_words("when would it arrive?")  # delivery said as arriving
    assert passages.content_words("Do you have it?") == set()


@pytest.mark.django_db
def test_the_issues_held_out_misses_are_answered(demo):
    """The three questions the old keyword quote missed (5 business days, worn footwear, online only)."""
    assert "5 business days" in passages.answering(demo, "How long until I get my money back after a return?")[0].passage.text
    assert "Worn footwear" in passages.answering(demo, "Can I return boots I already wore on a hike?")[0].passage.text
    assert passages.answering(demo, "Do you have a physical store I can visit?")[0].passage.answer == (
        "Not yet: we are online only."
    )


@pytest.mark.django_db
def test_blind_questions_dev_and_test_halves(demo):
    dev = answered(demo, BLIND[0::2] + EVALUATION)
    test = answered(demo, BLIND[1::2])
    # Measured when the weights were set: dev 24 of 28, the held-out half 8 of 15 (the old keyword quote: 19 and
    # 6); 9 of 15 later. Since a word of every document ("order") no longer counts as shared: dev 25, the held-out
    # half 10 ("Can I pick up my order in person?" and "Do I need an account to order?" no longer quote the FAQ's
    # cancelling line); held-out 11 since "leave" (our warehouse) is shipping ("Do you deliver on weekends?" gets the
    # same-day sentence). A change that loses any of them is a regression.
    assert sum(dev) >= 25, dev
    assert sum(test) >= 11, test


@pytest.mark.django_db
def test_a_word_of_most_documents_answers_nothing_alone(demo):
    # "order" is in the returns, shipping and warranty policies and the FAQ: "how do I order?" was quoted the
    # returns sentence "Start a return from the link in your order email".
    assert passages.store_index(demo).common_words == {"order", "email"}
    assert passages.answering(demo, "how do I order?") == []
    assert passages.answering(demo, "How do I place an order?") == []
    assert name(passages.answering(demo, "Can I cancel my order?")[0].passage) == "F3"  # its other words still answer
    # "Orders placed before 2 pm ... leave our warehouse the same day", not the tracking link's sentence
    assert name(passages.answering(demo, "When will my order ship if I buy today?")[0].passage) == "S1"


@pytest.mark.django_db
def test_a_sentence_about_other_products_does_not_answer_for_the_one_asked(demo):
    # The exceptions name worn footwear, used stoves and first aid kits: not the rain jacket's answer (it was, 0.51
    # against 0.44), still the boots' and the stove's; the sentence on unused items speaks of every product.
    assert name(passages.answering(demo, "Can I return the black rain jacket?")[0].passage) == "R1"
    assert name(passages.answering(demo, "Can I return the tent?")[0].passage) == "R1"
    assert name(passages.answering(demo, "Can I return my boots if I wore them?")[0].passage) == "R4"
    assert name(passages.answering(demo, "Can I return a used stove?")[0].passage) == "R4"
    # every product's two-year warranty names tents too, and still answers for them
    assert name(passages.answering(demo, "Is the tent covered by the warranty?")[0].passage) == "W1"


@pytest.mark.django_db
def test_how_much_asks_what_it_costs(demo):
    # "how much is shipping to canada": the cost sentence and the countries' sentence, not the countries' alone
    assert sorted(name(m.passage) for m in passages.answering(demo, "how much is shipping to canada")) == ["S2", "S5"]
    assert name(passages.answering(demo, "how much does express shipping cost")[0].passage) == "S3"


@pytest.mark.django_db
def test_product_questions_get_no_passage(demo):
    assert [q for q in PRODUCTS if passages.answering(demo, q)] == []


@pytest.mark.django_db
def test_an_edited_document_is_searched_at_once(demo):
    document = StoreDocument.objects.get(store=demo, kind="faq")
    original = document.body
    try:
        document.body = original + "\nDo you price match? Yes: show us a lower price within 7 days."
        document.save()
        found = passages.answering(demo, "Do you price match?")
        assert found and "lower price" in found[0].passage.text
    finally:
        document.body = original
        document.save()


@pytest.mark.django_db
def test_the_documents_are_the_only_source_of_a_quote(demo):
    """Issue 40: the prompt's policy lines were searched too, so a document published with 60 days still lost to
    the prompt's "30 days" line. Only a document answers now: what it does not say is not quoted."""
    assert all(p.document_id > 0 for p in passages.store_index(demo).passages)
    assert passages.answering(demo, "Can you gift wrap my order?") == []
    faq = StoreDocument.objects.get(store=demo, kind="faq")
    original = faq.body
    try:
        faq.body += "\nDo you gift wrap? Every order can be gift wrapped for free."
        faq.save()
        found = passages.answering(demo, "Can you gift wrap my order?")
        assert found and "gift wrapped for free" in found[0].passage.text and found[0].passage.document_id == faq.pk
    finally:
        faq.body = original
        faq.save()
