"""The model planner's parts that need no model: parsing what it wrote, the one-call schema its decoding is
constrained to (compiled by the engine's grammar compiler), and its prompt. The planning itself, through an
engine, is in tests/chat/answers/test_understanding.py."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from inference.chat_template import TOOL_CALL_OPEN
from inference.core.sampling_params import StructuredOutputsParams
from shop_assistant.chat.answers.planning import model
from shop_assistant.chat.answers.tools import REGISTRY, PlanError, plan_schema
from tests.chat.answers.conftest import accepts

EXAMPLES = [(tool.name, arguments) for tool in REGISTRY.values() for _, arguments in tool.examples]


def test_parse_a_call_as_the_constrained_decoding_writes_it():
    [call] = model.parse('{"name": "search_products", "arguments": {"query": "headlamp", "max_price": 100}}')
    assert call.name == "search_products"
    assert call.arguments.query == "headlamp" and call.arguments.max_price == Decimal("100")
    [total] = model.parse(json.dumps({"name": "price_total", "arguments": {"items": [{"product": "tent"}, {"product": "sleeping bag", "quantity": 2}]}}))
    assert [(i.product, i.quantity) for i in total.arguments.items] == [("tent", 1), ("sleeping bag", 2)]
    [handoff] = model.parse('{"name": "handoff", "arguments": {}}')
    assert handoff.name == "handoff"


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "I think you want the search tool.",
        '{"name": "search_products", "arguments": {"query": "head',  # cut at the token budget
        '[{"name": "handoff", "arguments": {}}]',
        '{"name": "handoff"}',  # no arguments object
        '{"name": "search_products", "arguments": "headlamp"}',
        '{"name": "find_products", "arguments": {"query": "headlamp"}}',  # not a tool
        '{"name": "search_products", "arguments": {"query": ""}}',
        '{"name": "check_capacity", "arguments": {"people": 2}}',  # no product
        '{"name": "price_total", "arguments": {"items": [{"product": "socks", "qty": 2}]}}',
        '{"arguments": {"query": "headlamp"}}',
    ],
)
def test_parse_rejects_what_is_not_one_valid_call(raw):
    with pytest.raises(PlanError):
        model.parse(raw)


def test_the_call_schema_is_the_plans_call_branches():
    """One definition: a call the model writes alone is a call a whole plan may hold."""
    assert model.call_schema()["anyOf"] == plan_schema()["properties"]["calls"]["items"]["anyOf"]
    assert "$ref" not in json.dumps(model.call_schema())


def test_the_call_schema_compiles_and_takes_every_tools_examples(grammar_compiler):
    compiled = grammar_compiler.compile(StructuredOutputsParams(json=model.call_schema()))
    for name, arguments in EXAMPLES:
        text = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        assert accepts(compiled, text), text
        assert model.parse(text)[0].name == name  # and what the grammar takes parses
    assert not accepts(compiled, '{"name": "find_products", "arguments": {"query": "headlamp"}}')
    assert not accepts(compiled, '{"name": "search_products", "arguments": {"query": "x", "colour": "red"}}')
    assert not accepts(compiled, '{"name": "search_products", "arguments": {"query": "x"}')  # unfinished
    assert not accepts(compiled, '{"name": "price_total", "arguments": {"items": [{"product": "a", "quantity": 0}]}}')
    assert not accepts(compiled, '{"name":"handoff","arguments":{}}')  # the compact separators only


@pytest.mark.django_db
def test_the_system_text_has_every_tools_examples_and_the_stores_words(shop):
    text = model.system_text(shop, "Be brief.")
    assert "Demo Outfitters" in text
    for tool in REGISTRY.values():
        for message, arguments in tool.examples:
            assert f"Shopper: {message}\nCall: " + json.dumps({"name": tool.name, "arguments": arguments}, ensure_ascii=False) in text
    for kind in ("jackets", "sleeping bags", "tents"):  # the catalog's own kinds, for the search words
        assert kind in text
    assert model.system_text(shop, "Be brief.") == text  # the same bytes for every message: a shared prefix


def test_the_user_text_has_the_cards_and_the_message_before():
    assert model.user_text(" Which one is cheaper? ", "", []) == "Message: Which one is cheaper?"
    text = model.user_text("What would both cost?", "Show me your tents", ["Ridgeline 2-Person Tent", "Basecamp 6 Family Tent"])
    assert text == (
        "On screen: Ridgeline 2-Person Tent; Basecamp 6 Family Tent\n"
        "Previous message: Show me your tents\nMessage: What would both cost?"
    )


class Holding:
    """An engine as far as the planner's prompt needs one: a tokenizer to hold."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def tokenizer_held(self):
        import contextlib

        return contextlib.nullcontext(self.tokenizer)


def test_only_a_model_whose_template_has_a_tools_branch_plans(bundled_tokenizer, tools_tokenizer):
    assert not model.can_plan(Holding(bundled_tokenizer))  # the bundled 135M SmolLM2
    assert model.can_plan(Holding(tools_tokenizer))


@pytest.mark.django_db
def test_the_prompt_is_the_templates_tools_branch_and_ends_opening_a_call(shop, tools_tokenizer):
    engine = Holding(tools_tokenizer)
    ids = model.prompt_ids(engine, shop, "", "do u hav a hedlamp", "", [])
    text = tools_tokenizer.decode(ids)
    assert text.endswith("<|im_start|>assistant\n" + TOOL_CALL_OPEN + "\n")
    for name in REGISTRY:
        assert f'"name": "{name}"' in text  # the functions, through the template's own tools branch
    assert "Message: do u hav a hedlamp" in text
    # Two messages share every token up to the user turn (the prefix the engine caches).
    other = model.prompt_ids(engine, shop, "", "Which one is cheaper?", "", ["Basecamp 6 Family Tent"])
    shared = next(i for i, (a, b) in enumerate(zip(ids, other)) if a != b)
    assert tools_tokenizer.decode(ids[:shared]).rstrip().endswith("<|im_start|>user")
