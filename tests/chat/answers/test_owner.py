"""The owner's guidance applied to every answer (``chat.answers.owner``, called by the pipeline): planned as the
chat plans (``pipeline.plan``) on the demo store, under prompt versions that differ only by one instruction."""

from __future__ import annotations

import pytest

from shop_assistant.chat.guard import pipeline
from shop_assistant.chat.models import AnswerSettings
from shop_assistant.prompts.models import PromptVersion, published_prompt

pytestmark = pytest.mark.django_db


def answer(shop, instruction: str, question: str) -> tuple[str, list[tuple[str, bool]], str]:
    """The composed text, the cards (title, in stock) and the language of ``question`` answered under the demo's
    prompt plus ``instruction`` (the opening alone: the words composed from the data, no engine)."""
    AnswerSettings.of(shop).model_text = "off"
    version = PromptVersion(store=shop, version=99, system_prompt=f"{published_prompt(shop).system_prompt}\n{instruction}")
    planned = pipeline.plan(None, shop, [], question, version=version)
    text = planned.composition.reply if planned.composition.fixed else planned.opening.text
    return text, [(c["title"], c["in_stock"]) for c in planned.composition.cards], planned.language


def test_always_answer_in_spanish_composes_in_spanish_and_leaves_the_store_words(shop):
    text, cards, language = answer(shop, "", "Do you have a stove?")  # the default prompt: the shopper's English
    assert language == "en" and text.startswith("Yes! The Micro Backpacking Stove costs 54.99 USD")
    text, cards, language = answer(shop, "- Always answer in Spanish.", "Do you have a stove?")
    assert language == "es"
    assert text == "¡Sí! Micro Backpacking Stove cuesta 54.99 USD, pero ahora mismo no hay existencias."
    text, _, _ = answer(shop, "- Always answer in Spanish.", "What is your return policy?")
    # The store's English document is quoted as it is written, in the quote box, under a Spanish lead.
    assert text in ("Esto es lo que dice nuestra política al respecto; la cito abajo tal como la escribió la tienda.",
                    "Nuestra política responde a esto; la encontrarás citada abajo, palabra por palabra.")


def test_a_suggestion_adds_a_card_and_a_sentence_only_with_its_trigger(shop):
    rule = "- Suggest the cookset with any stove."
    text, cards, _ = answer(shop, rule, "Ultralight cooking gear?")
    assert cards[-1] == ("Camp Cookset (4 Pieces)", True) and len(cards) == 3
    assert text.endswith("The Camp Cookset (4 Pieces) (64.00 USD) goes well with the Micro Backpacking Stove.")
    text, cards, _ = answer(shop, rule, "Do you have a rain jacket?")
    assert "Cookset" not in text and all("Cookset" not in title for title, _ in cards)
    # A name the catalog has nothing for invents nothing; the cookset rule beside it still applies.
    text, cards, _ = answer(shop, f"- Suggest the espresso maker with any stove.\n{rule}", "Do you have a stove?")
    assert cards == [("Micro Backpacking Stove", False), ("Camp Cookset (4 Pieces)", True)]
    assert "espresso" not in text.lower()


def test_out_of_stock_is_left_out_while_another_card_remains(shop):
    rule = "- Don't recommend out-of-stock items."
    text, cards, _ = answer(shop, rule, "Ultralight cooking gear?")
    assert cards == [("Titanium Camp Mug 450 ml", True)] and "Stove" not in text
    # The one product asked for is still answered, with its stock: that is a fact, not a recommendation.
    text, cards, _ = answer(shop, rule, "Do you have a stove?")
    assert cards == [("Micro Backpacking Stove", False)] and "out of stock" in text


def test_tone_greeting_sign_off_and_brevity(shop):
    text, _, _ = answer(shop, '- Start every answer with "Howdy!"\n- End every answer with "Happy trails!"',
                        "Do you sell kayaks?")
    assert text.startswith("Howdy! Sorry, we don't carry kayaks.") and text.endswith("Happy trails!")
    full, _, _ = answer(shop, "", "Ultralight cooking gear?")
    brief, _, _ = answer(shop, "- Be brief.", "Ultralight cooking gear?")
    assert brief == "Here is what we have: the Micro Backpacking Stove (54.99 USD) and the Titanium Camp Mug 450 ml " \
                    "(27.00 USD). The least expensive is the Titanium Camp Mug 450 ml." and len(brief) < len(full)
