"""shop_assistant.chat.answers.tools.registry: the tools' schemas are self-contained and compile with the engine's
grammar compiler, plans are validated, and ``execute`` merges several calls into one answer."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from inference.core.sampling_params import StructuredOutputsParams
from shop_assistant.chat.answers.composition import HANDOFF, MODEL, NO_MATCH
from shop_assistant.chat.answers.retrieval import retrieve
from shop_assistant.chat.answers.tools import REGISTRY, Context, PlanError, execute, parse_plan, plan_schema, specs
from shop_assistant.chat.answers.tools.registry import MAX_CALLS, call, register
from shop_assistant.chat.answers.tools.total import TOTAL
from shop_assistant.chat.log import handoff
from tests.chat.answers.conftest import accepts

EXAMPLES = [(tool.name, message, arguments) for tool in REGISTRY.values() for message, arguments in tool.examples]
TOOLS = ("search_products", "product_details", "compare_products", "price_total", "check_capacity", "policy_lookup",
         "products_on_sale", "suggest_gifts", "handoff", "order_status", "order_items", "order_return", "order_cancel",
         "small_talk")  # fmt: skip


def objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``node``."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += objects(value)
    elif isinstance(node, list):
        for value in node:
            found += objects(value)
    return found


def test_every_answer_kind_the_issue_names_is_a_tool_with_a_description_and_examples():
    assert set(TOOLS) <= set(REGISTRY)
    for tool in REGISTRY.values():
        assert tool.description and tool.examples, tool.name
        assert issubclass(tool.arguments, BaseModel)


@pytest.mark.parametrize(("name", "message", "arguments"), EXAMPLES, ids=[f"{n}:{m}" for n, m, _ in EXAMPLES])
def test_every_example_validates_against_its_tools_schema(name, message, arguments):
    validated = call(name, **arguments)
    assert validated.name == name
    # What the example says is what the call holds (nothing dropped or renamed on the way).
    dumped = validated.arguments.model_dump(mode="json")
    for key, value in arguments.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        assert Decimal(str(dumped[key])) == value if number else dumped[key] == value, key


def test_the_schemas_are_self_contained_and_forbid_unknown_keys():
    for schema in (plan_schema(), specs()):
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text
    # one spec per tool, in the OpenAI function format
    assert [s["function"]["name"] for s in specs()] == list(REGISTRY)
    assert all(s["type"] == "function" and s["function"]["parameters"]["type"] == "object" for s in specs())
    # price_total's items are an inlined object (pydantic puts them under $defs)
    total = next(s["function"]["parameters"] for s in specs() if s["function"]["name"] == "price_total")
    assert total["properties"]["items"]["items"]["properties"]["quantity"]["minimum"] == 1
    # The grammar never lets a model write a key the schema does not name; validation agrees (every object).
    for node in objects(specs()) + objects(plan_schema()):
        assert node.get("additionalProperties") is False, node


def test_the_plan_schema_and_each_tools_parameters_compile_with_the_engines_grammar_compiler(grammar_compiler):
    compiled = grammar_compiler.compile(StructuredOutputsParams(json=plan_schema()))
    for spec in specs():
        grammar_compiler.compile(StructuredOutputsParams(json=spec["function"]["parameters"]))
    # every example as a plan of one call is a string the grammar takes whole, in the compact separators
    for name, _, arguments in EXAMPLES:
        assert accepts(compiled, json.dumps({"calls": [{"name": name, "arguments": arguments}]})), name
    several = [{"name": name, "arguments": arguments} for name, _, arguments in EXAMPLES[:MAX_CALLS]]
    assert accepts(compiled, json.dumps({"calls": several}))
    assert not accepts(compiled, json.dumps({"calls": several + several[:1]}))  # more than MAX_CALLS
    assert not accepts(compiled, json.dumps({"calls": []}))
    assert not accepts(compiled, json.dumps({"calls": [{"name": "fly_to_the_moon", "arguments": {}}]}))
    assert not accepts(compiled, json.dumps({"calls": [{"name": "search_products", "arguments": {"query": "x", "colour": "red"}}]}))


def test_parse_plan_returns_validated_calls_in_order():
    calls = parse_plan({"calls": [
        {"name": "price_total", "arguments": {"items": [{"product": "tent"}, {"product": "sleeping bag", "quantity": 2}]}},
        {"name": "search_products", "arguments": {"query": "headlamp", "max_price": 50}},
        {"name": "handoff"},  # arguments left out: every one has a default
    ]})  # fmt: skip
    assert [c.name for c in calls] == ["price_total", "search_products", "handoff"]
    assert [(i.product, i.quantity) for i in calls[0].arguments.items] == [("tent", 1), ("sleeping bag", 2)]
    assert calls[0].arguments.operation == "sum"
    assert calls[1].arguments.max_price == Decimal("50") and calls[1].arguments.in_stock is None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        "search_products",
        {},
        {"calls": []},  # an empty plan
        {"calls": "search_products"},
        {"calls": ["search_products"]},
        {"calls": [{"name": "fly_to_the_moon", "arguments": {}}]},  # an unknown tool
        {"calls": [{"arguments": {"query": "tent"}}]},  # no name
        {"calls": [{"name": "search_products", "arguments": ["tent"]}]},
        {"calls": [{"name": "search_products", "arguments": {}}]},  # a required argument missing
        {"calls": [{"name": "search_products", "arguments": {"query": ""}}]},
        {"calls": [{"name": "search_products", "arguments": {"query": "tent", "max_price": -5}}]},
        {"calls": [{"name": "search_products", "arguments": {"query": "tent", "colour": "red"}}]},  # unknown key
        {"calls": [{"name": "price_total", "arguments": {"items": []}}]},
        {"calls": [{"name": "price_total", "arguments": {"items": [{"product": "socks", "quantity": 0}]}}]},
        {"calls": [{"name": "price_total", "arguments": {"items": [{"product": "socks", "qty": 2}]}}]},  # not 1 sock
        {"calls": [{"name": "price_total", "arguments": {"items": [{"product": "a"}], "operation": "product"}}]},
        {"calls": [{"name": "check_capacity", "arguments": {"product": "tent", "people": 0}}]},  # nobody
        {"calls": [{"name": "compare_products", "arguments": {"attribute": "colour"}}]},
        {"calls": [{"name": "small_talk", "arguments": {"kind": "insult"}}]},
        {"calls": [{"name": "handoff"}, {"name": "price_total", "arguments": {"items": "tent"}}]},  # one bad call
    ],
)
def test_parse_plan_rejects_anything_but_registered_tools_with_valid_arguments(raw):
    with pytest.raises(PlanError):
        parse_plan(raw)


def test_a_tool_is_registered_once_and_must_forbid_unknown_keys():
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="registered twice"):
        register("handoff", "again", REGISTRY["handoff"].arguments)(lambda context, arguments: None)

    class Lax(BaseModel):
        query: str

    with pytest.raises(ValueError, match="forbid unknown keys"):
        register("lax_search", "a tool whose arguments take any key", Lax)(lambda context, arguments: None)
    assert REGISTRY == before


@pytest.mark.django_db
def test_one_call_is_its_tools_composition(shop):
    context = Context(shop, "what do two headlamps cost?", retrieve)
    planned = call("price_total", items=[{"product": "headlamp", "quantity": 2}])
    alone = REGISTRY["price_total"].run(context, planned.arguments)
    merged = execute(context, [planned])
    assert merged.kind == alone.kind == TOTAL and merged.reply == alone.reply
    assert merged.reply == "2 × Beam 400 Rechargeable Headlamp at 44.95 USD = 89.90 USD in total."


@pytest.mark.django_db
def test_a_total_and_a_policy_question_are_one_answer_the_total_leading_and_the_quote_kept(shop):
    context = Context(shop, "boots + a pack of socks = how much? and is shipping free then?", retrieve)
    total = call("price_total", items=[{"product": "boots"}, {"product": "socks"}])
    policy = call("policy_lookup", question="is shipping free?")
    alone = [REGISTRY[c.name].run(context, c.arguments) for c in (total, policy)]
    merged = execute(context, [total, policy])
    # The policy answer is the one the model continues; the total's fixed sentence leads it.
    assert merged.kind == MODEL and merged.reply == ""
    assert merged.lead == [alone[0].reply]
    assert merged.lead[0].endswith("= 183.00 USD in total.")
    assert merged.quotes == alone[1].quotes and merged.quotes
    assert any("free on orders over 50 USD" in quote["text"] for quote in merged.quotes)
    assert merged.facts == alone[1].facts  # the total has no facts for the model: its sentence is fixed
    assert merged.answers == alone[1].answers
    assert [c["sku"] for c in merged.cards] == [c["sku"] for c in alone[0].cards] == ["DO-TB-8", "DO-MS-S"]


@pytest.mark.django_db
def test_cards_of_several_calls_are_kept_once_in_the_plans_order(shop):
    context = Context(shop, "how much are the tent and the tent again?", retrieve)
    merged = execute(context, [call("price_total", items=[{"product": "Ridgeline tent"}]),
                               call("price_total", items=[{"product": "Ridgeline tent", "quantity": 2}])])  # fmt: skip
    assert [c["sku"] for c in merged.cards] == ["DO-RT2-SAGE"]
    assert merged.kind == TOTAL
    assert merged.reply == "The Ridgeline 2-Person Tent costs 249.00 USD. 2 × Ridgeline 2-Person Tent (Sage) at 249.00 USD = 498.00 USD in total."


@pytest.mark.django_db
@pytest.mark.parametrize("handoff_first", [False, True])
def test_a_request_for_a_person_in_a_plan_of_several_keeps_the_handoff_kind(shop, handoff_first):
    context = Context(shop, "what do two Ridgeline tents cost? and I want to talk to a person", retrieve)
    calls = [call("price_total", items=[{"product": "Ridgeline tent", "quantity": 2}]), call("handoff")]
    merged = execute(context, calls[::-1] if handoff_first else calls)
    assert merged.kind == HANDOFF
    assert handoff.reply_for(shop) in merged.reply
    assert "2 × Ridgeline 2-Person Tent (Sage) at 249.00 USD = 498.00 USD in total." in merged.reply
    assert [c["sku"] for c in merged.cards] == ["DO-RT2-SAGE"]


@pytest.mark.django_db
def test_a_plan_of_fixed_replies_joins_them_under_the_first_kind(shop):
    context = Context(shop, "a kayak, and two headlamps: the total?", retrieve)
    merged = execute(context, [call("check_capacity", product="kayak", people=2),
                               call("price_total", items=[{"product": "headlamp", "quantity": 2}])])  # fmt: skip
    assert merged.kind == NO_MATCH
    assert merged.reply.endswith("2 × Beam 400 Rechargeable Headlamp at 44.95 USD = 89.90 USD in total.")
    assert [c["sku"] for c in merged.cards] == ["DO-B400"]
