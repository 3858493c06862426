"""The tool registry: one ``Tool`` per kind of answer, and running a plan of calls.

Invariants:
- a tool's arguments are a pydantic model: ``specs()`` and ``plan_schema()`` are derived from those models, so the
  schema a model planner is constrained to and the validation of its plan are one definition (the models forbid
  unknown keys, as the grammar does: a misspelt "qty" is an error, never a default quantity of 1);
- an executor reads the store's data and returns a ``Composition``; it never writes and never sees model text;
- ``execute`` merges the results of several calls in the plan's order ("the total, and is shipping free?");
- a model answer (``MODEL``) says what it is about by its tool's ``topic`` (``Composition.answer_kind``), which the
  chat log keeps with the message: analytics count answers by it, whatever language they are in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from catalog.models import Store

from ..composition import HANDOFF, MODEL, Composition

MAX_CALLS = 3


@dataclass(frozen=True)
class Context:
    """What a tool may read about the message: the store, the shopper's words, the message before and the cards
    of the latest answer that had some. ``retrieve(store, text)`` is the catalog lookup (``retrieval.retrieve``)."""

    store: Store
    text: str
    retrieve: Callable[..., Any]
    previous: str = ""
    shown: Sequence[dict[str, Any]] = ()
    language: str = "en"  # the message's (``catalog.language.detect``)
    # The conversation (its id and the store-signed customer) and its order state (``orders.conversations``):
    # None in the studio's preview, where order tools ask for nothing and disclose nothing.
    conversation: Any = None
    order_state: Any = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Context, Any], Composition]
    # (message, arguments) pairs: the model planner's few-shot examples, also checked against the schema by tests.
    examples: tuple[tuple[str, dict[str, Any]], ...] = ()
    topic: str = ""  # what its model answers are about (``Composition.topic``): "products", "policy", ...


@dataclass(frozen=True)
class Call:
    name: str
    arguments: BaseModel = field(compare=False)

    def __repr__(self) -> str:
        return f"{self.name}({self.arguments.model_dump(exclude_none=True)})"


class PlanError(ValueError):
    """A plan that does not name registered tools with valid arguments."""


REGISTRY: dict[str, Tool] = {}


def register(
    name: str,
    description: str,
    arguments: type[BaseModel],
    examples: Sequence[tuple[str, dict[str, Any]]] = (),
    topic: str = "",
) -> Callable[[Callable[[Context, Any], Composition]], Callable[[Context, Any], Composition]]:
    """Decorator: ``@register("total", "...", TotalArguments)`` over the executor. ``topic``: what the tool's model
    answers are about (a fixed reply's kind says it already)."""

    def decorate(run: Callable[[Context, Any], Composition]) -> Callable[[Context, Any], Composition]:
        if name in REGISTRY:
            raise ValueError(f"tool {name!r} registered twice")
        if arguments.model_config.get("extra") != "forbid":
            raise ValueError(f"tool {name!r}: its arguments must forbid unknown keys (extra='forbid')")
        REGISTRY[name] = Tool(name, description, arguments, run, tuple(examples), topic)
        return run

    return decorate


def call(name: str, **arguments: Any) -> Call:
    """A validated call (``PlanError`` when the tool or its arguments are wrong)."""
    tool = REGISTRY.get(name)
    if tool is None:
        raise PlanError(f"unknown tool {name!r}")
    try:
        return Call(name, tool.arguments.model_validate(arguments))
    except ValidationError as exc:
        raise PlanError(f"{name}: {exc.errors(include_url=False)}") from exc


def _inlined(node: Any, definitions: dict[str, Any]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/X"}`` replaced by X: a tool's schema is nested in a plan's, where
    a reference to its own root's ``$defs`` would point nowhere."""
    if isinstance(node, dict):
        ref = node.get("$ref", "")
        if ref.startswith("#/$defs/"):
            return _inlined(definitions[ref.removeprefix("#/$defs/")], definitions)
        # "title" repeats the property's name: tokens the model planner reads for nothing
        return {
            key: _inlined(value, definitions) for key, value in node.items()
            if key != "$defs" and not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_inlined(value, definitions) for value in node]
    return node


def arguments_schema(arguments: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, self-contained (no references)."""
    schema = arguments.model_json_schema()
    return _inlined(schema, schema.get("$defs", {}))


def _arguments_schema(tool: Tool) -> dict[str, Any]:
    return arguments_schema(tool.arguments)


def specs() -> list[dict[str, Any]]:
    """The tools as OpenAI function specs (what /v1 and a chat template's tools branch take)."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": _arguments_schema(t)}}
        for t in REGISTRY.values()
    ]


def plan_schema() -> dict[str, Any]:
    """The JSON schema of a whole plan, ``{"calls": [{"name": ..., "arguments": {...}}, ...]}``, one branch per
    tool: what the model planner's decoding is constrained to."""
    branches = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": _arguments_schema(t)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in REGISTRY.values()
    ]
    return {
        "type": "object",
        "properties": {"calls": {"type": "array", "items": {"anyOf": branches}, "minItems": 1, "maxItems": MAX_CALLS}},
        "required": ["calls"],
        "additionalProperties": False,
    }


def parse_plan(raw: Any) -> list[Call]:
    """``{"calls": [...]}`` (parsed JSON) as validated calls; ``PlanError`` on anything else."""
    if not isinstance(raw, dict) or not isinstance(raw.get("calls"), list) or not raw["calls"]:
        raise PlanError("a plan is {'calls': [...]} with at least one call")
    calls = []
    for item in raw["calls"][:MAX_CALLS]:
        if not isinstance(item, dict) or not isinstance(item.get("arguments", {}), dict):
            raise PlanError(f"not a call: {item!r}")
        calls.append(call(str(item.get("name")), **item.get("arguments", {})))
    return calls


def _run(tool: Tool, context: Context, arguments: BaseModel) -> Composition:
    composition = tool.run(context, arguments)
    if composition.kind == MODEL and not composition.topic:
        composition.topic = tool.topic
    return composition


def execute(context: Context, calls: Sequence[Call]) -> Composition:
    """Run ``calls`` in order and merge their compositions.

    One call: its composition. Several: the first answer the model may continue (``MODEL``) keeps its kind and
    the others' fixed replies become its ``lead``; with none, the fixed replies are joined under the first kind.
    Cards and quotes are concatenated without repeats.
    """
    results = [_run(REGISTRY[c.name], context, c.arguments) for c in calls]
    if len(results) == 1:
        return results[0]
    main = next((r for r in results if r.kind == HANDOFF), None)  # a request for a person is recorded as one
    main = main or next((r for r in results if r.kind == MODEL and (r.products or r.answers)), None) or results[0]
    merged = Composition(
        main.kind,
        facts="\n".join(r.facts for r in results if r.facts),
        products=list(main.products),
        answers=list(main.answers),
        topic=main.topic,
    )
    if main.kind == MODEL:  # the others' sentences lead, then the opening and the model's words about ``main``
        merged.lead = [s for r in results if r is not main for s in (*r.lead, r.reply) if s]
    else:
        merged.reply = " ".join(r.reply for r in results if r.reply)
    skus: set[str] = set()
    for result in results:
        for item in result.cards:
            if item.get("sku") not in skus:
                skus.add(item.get("sku"))
                merged.cards.append(item)
        merged.quotes += [q for q in result.quotes if q not in merged.quotes]
        merged.effects += result.effects
    return merged
