"""The owner's prompt read into guidance (``prompts.guidance``): a table of prompts written before the reader was
tuned, each with what an owner would expect the assistant to take from it."""

from __future__ import annotations

import pytest

from shop_assistant.prompts.defaults import DEFAULT_SYSTEM_PROMPT
from shop_assistant.prompts.guidance import Guidance, read

# (prompt, language, [(trigger, suggested)], [(avoid kind, words)], greeting, sign-off, brief)
TABLE = [
    ("Always answer in Spanish.", "es", [], [], "", "", False),
    ("You are Demo's assistant.\n- Reply in French, whatever the customer writes.", "fr", [], [], "", "", False),
    ("Please respond in German.", "de", [], [], "", "", False),
    ("Respond in the customer's language.", None, [], [], "", "", False),
    ("Always reply in the same language as the shopper.", None, [], [], "", "", False),
    ("Suggest the cookset with any stove.", None, [("stove", "cookset")], [], "", "", False),
    ("When someone asks about a tent, also recommend the sleeping pad.", None, [("tent", "sleeping pad")], [], "", "",
     False),
    ("Always suggest merino socks alongside hiking boots.", None, [("hiking boots", "merino socks")], [], "", "",
     False),
    ("Don't recommend out-of-stock items.", None, [], [("out_of_stock", "")], "", "", False),
    ("Never suggest products that are sold out.", None, [], [("out_of_stock", "")], "", "", False),
    ("Never mention competitors.", None, [], [("competitors", "")], "", "", False),
    ("Never recommend the Folding Camp Chair.", None, [], [("product", "folding camp chair")], "", "", False),
    ("Be brief.", None, [], [], "", "", True),
    ("Keep your answers short and friendly.", None, [], [], "", "", True),
    ('End every answer with "Happy trails!"', None, [], [], "", "Happy trails!", False),
    ("Sign off with 'Cheers, the Demo team'.", None, [], [], "", "Cheers, the Demo team", False),
    ('Start each reply with "Howdy!"', None, [], [], "Howdy!", "", False),
    (
        "You are the assistant of Demo Outfitters.\n\nRules:\n- Always answer in Spanish.\n"
        "- Suggest the cookset with any stove.\n- Don't recommend out-of-stock items.\n- Be concise.",
        "es", [("stove", "cookset")], [("out_of_stock", "")], "", "", True,
    ),
    # The default prompt's rules are the model's (it reads them): nothing here changes composed answers.
    (DEFAULT_SYSTEM_PROMPT.format(store="Demo"), None, [], [], "", "", False),
]


@pytest.mark.parametrize(("prompt", "language", "suggestions", "avoid", "greeting", "sign_off", "brief"), TABLE)
def test_the_reader_on_a_table_of_prompts(prompt, language, suggestions, avoid, greeting, sign_off, brief):
    guidance = read(prompt)
    assert guidance.language == language
    assert [(s.trigger, s.suggest) for s in guidance.suggestions] == suggestions
    assert [(a.kind, a.words) for a in guidance.avoid] == avoid
    assert guidance.tone.greeting == greeting
    assert guidance.tone.sign_off == sign_off
    assert guidance.tone.brief is brief


def test_what_it_cannot_apply_is_said_not_dropped():
    guidance = read("Always answer in Italian.\nUse a warm, playful tone.\nNever invent prices.")
    assert guidance.language is None
    reasons = {note.text: note.reason for note in guidance.not_applied}
    assert "Always answer in Italian." in reasons and "Italian" in reasons["Always answer in Italian."]
    # Instructions to the model stay the model's: listed, so the owner sees they change no composed sentence.
    assert "Use a warm, playful tone." in reasons and "Never invent prices." in reasons


def test_guidance_is_a_declared_schema_and_round_trips_as_json():
    guidance = read("Always answer in Spanish.\nSuggest the cookset with any stove.")
    assert Guidance.model_validate_json(guidance.model_dump_json()) == guidance
    assert set(Guidance.model_json_schema()["properties"]) >= {"language", "suggestions", "avoid", "tone", "not_applied"}


def test_read_once_per_prompt_text(monkeypatch):
    from shop_assistant.prompts import guidance as module

    module.for_text.cache_clear()
    calls = []
    real = module.read
    monkeypatch.setattr(module, "read", lambda text: calls.append(text) or real(text))
    for _ in range(3):
        module.for_text("Always answer in Spanish.")
    assert calls == ["Always answer in Spanish."]
