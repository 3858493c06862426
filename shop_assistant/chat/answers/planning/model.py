"""The model planner: the engine's model picks the tool and its arguments, its output constrained to the tools'
schemas (``inference.structured``), from a prefix every message of a store shares.

The prompt is the model's own tool-calling format (its chat template's tools branch, the functions as the
registry declares them) with the store's prompt and a few examples in the system message, so the prefix (system
message and tools) is the same bytes for every message and its KV blocks are computed once (prefix caching). The
message, the one before it and the names of the products on screen follow in the user turn. The answer is
started as ``<tool_call>\\n`` and constrained to ``{"name": <a tool>, "arguments": <its schema>}``: whatever the
model writes parses, and ``registry.call`` validates it again (a schema the grammar cannot say, such as "people
or weight"). A plan that fails is None: the caller falls back to the rule planner.

Only a model whose chat template has a tools branch plans (Qwen2.5 does; the bundled 135M SmolLM2 does not).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync

from catalog.grounding import price_limits, product_types
from catalog.models import Product, Store
from inference.chat_template import TOOL_CALL_OPEN, encode_chat, has_tools_branch
from inference.core.sampling_params import SamplingParams, StructuredOutputsParams

from ..tools.registry import REGISTRY, Call, PlanError, arguments_schema, call, specs

logger = logging.getLogger(__name__)

MAX_PLAN_TOKENS = 96
MAX_LISTED_TITLES = 80  # a larger catalog is named by its types alone (the prefix stays short)
INSTRUCTIONS = """You plan the answers of {store}'s shopping assistant. Read the shopper's message, written in any \
language and often with typos, and call the one tool that answers it. Write search words and questions in plain \
English, as the store's catalog would: {types}.{titles} Keep the shopper's details (season, activity, who it is for, size, colour) in the search words. A budget \
("I have 100 dollars", "around 50 bucks") is max_price. "it", "them", "both", "the cheaper one" mean the products \
on screen. Never answer in words: call a tool.

Examples:
{examples}"""


@dataclass(frozen=True)
class Planned:
    calls: list[Call] | None  # None: no valid plan (the caller uses the rule planner)
    raw: str  # what the model wrote
    seconds: float
    error: str = ""


def can_plan(engine: Any) -> bool:
    """Whether the served model has a tool-calling format to plan in."""
    return has_tools_branch(engine.tokenizer)


def _examples() -> str:
    lines = []
    for tool in REGISTRY.values():
        for message, arguments in tool.examples:
            lines.append(f"Shopper: {message}\nCall: {json.dumps({'name': tool.name, 'arguments': arguments}, ensure_ascii=False)}")
    return "\n".join(lines)


def system_text(store: Store, prompt: str) -> str:
    """The planner's system message for ``store``: the same for every message until the prompt or catalog changes."""
    types = ", ".join(product_types(store, limit=12)) or "its products"
    return INSTRUCTIONS.format(store=store.name, types=types, titles=_titles(store), examples=_examples())


def _titles(store: Store) -> str:
    """The products' names, for a catalog small enough to list: the model maps "Stirnlampe" to "headlamp" far
    more often when it sees "Beam 400 Rechargeable Headlamp" than from the types alone."""
    titles = list(
        Product.objects.filter(store=store, status=Product.Status.ACTIVE).order_by("title").values_list("title", flat=True)[
            : MAX_LISTED_TITLES + 1
        ]
    )
    if not titles or len(titles) > MAX_LISTED_TITLES:
        return ""
    return " Its products: " + "; ".join(titles) + "."


def user_text(text: str, previous: str, shown_titles: list[str]) -> str:
    parts = []
    if shown_titles:
        parts.append("On screen: " + "; ".join(shown_titles))
    if previous.strip():
        parts.append(f"Previous message: {previous.strip()}")
    parts.append(f"Message: {text.strip()}")
    return "\n".join(parts)


def call_schema() -> dict[str, Any]:
    """One call, ``{"name": ..., "arguments": ...}``, one branch per tool."""
    branches = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": arguments_schema(t.arguments)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in REGISTRY.values()
    ]
    return {"anyOf": branches}


def prompt_ids(engine: Any, store: Store, prompt: str, text: str, previous: str, shown_titles: list[str]) -> list[int]:
    conversation = [
        {"role": "system", "content": system_text(store, prompt)},
        {"role": "user", "content": user_text(text, previous, shown_titles)},
    ]
    with engine.tokenizer_held() as tokenizer:
        return encode_chat(tokenizer, conversation, tools=specs(), assistant_prefix=TOOL_CALL_OPEN + "\n")


def prefix_ids(engine: Any, store: Store) -> list[int]:
    """The tokens every plan of ``store`` starts with (the system message and the tools): what ``aprewarm``
    computes into the prefix cache."""
    with engine.tokenizer_held() as tokenizer:
        conversation = [{"role": "system", "content": system_text(store, "")}]
        return encode_chat(tokenizer, conversation, add_generation_prompt=False, tools=specs())


def _constraint() -> StructuredOutputsParams:
    return StructuredOutputsParams(json=call_schema())


async def aprewarm(engine: Any, store: Store) -> int:
    """Compute the planner's prefix for ``store`` into the prefix cache and its constraint into the grammar
    cache (when the served model plans), so the first shopper's plan prefills only their message and compiles
    nothing; the prefix's token count (0: the model does not plan)."""
    if not can_plan(engine):
        return 0
    await engine.compile_constraint(_constraint())
    ids = await asyncio.to_thread(prefix_ids, engine, store)  # the catalog's names: a database read
    await engine.prefill(ids, cache_salt=store.cache_salt)
    return len(ids)


async def _complete(engine: Any, token_ids: list[int], priority: int, cache_salt: str | None) -> str:
    params = SamplingParams(temperature=0.0, max_tokens=MAX_PLAN_TOKENS, structured_outputs=_constraint())
    text = ""
    request_id = f"plan-{uuid.uuid4().hex[:12]}"
    async for delta in engine.stream(request_id, token_ids, params, cache_salt=cache_salt, priority=priority):
        text += delta.text
    return text


# Words that ask for what is available now, in the languages the chat answers in.
_STOCK_WORDS = re.compile(
    r"\b(?:in stock|available|availability|left|sold out|en stock|disponibles?|agotad[oa]s?|verfügbar|lieferbar|"
    r"auf lager|vorrätig)\b",
    re.IGNORECASE,
)


def _figures(text: str) -> set[Decimal]:
    return {Decimal(n.replace(",", ".")) for n in re.findall(r"\d+(?:[.,]\d+)?", text)}


def grounded(calls: list[Call], text: str) -> list[Call]:
    """The model's filters kept only where the message states them: a price bound whose figure the shopper
    wrote (the rules' reading of the bounds wins when they found one: "less than 100" is no minimum), "in stock"
    only when the message asks about stock. A small model fills optional fields it was not asked for."""
    out = []
    for planned in calls:
        if planned.name != "search_products":
            out.append(planned)
            continue
        arguments = planned.arguments.model_copy()
        low, high = price_limits(text)
        if low is not None or high is not None:
            arguments.min_price, arguments.max_price = low, high
        else:
            figures = _figures(text)
            if arguments.min_price is not None and (arguments.min_price not in figures or arguments.min_price == arguments.max_price or not arguments.min_price):
                arguments.min_price = None
            if arguments.max_price is not None and not (figures and arguments.max_price <= max(figures) * Decimal("1.3")):
                arguments.max_price = None
        if arguments.in_stock is not None and not _STOCK_WORDS.search(text):
            arguments.in_stock = None
        out.append(Call(planned.name, arguments))
    return out


def parse(raw: str) -> list[Call]:
    """The model's text as a validated call (``PlanError`` otherwise)."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PlanError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("arguments"), dict):
        raise PlanError(f"not a call: {raw!r}")
    return [call(str(value.get("name")), **value["arguments"])]


def plan(
    engine: Any, store: Store, prompt: str, text: str, previous: str = "", shown_titles: list[str] | None = None,
    priority: int = 0,
) -> Planned:
    """Blocking (a worker thread, or any thread without a running loop): the model's plan for ``text``."""
    started = time.perf_counter()
    raw = ""
    try:
        token_ids = prompt_ids(engine, store, prompt, text, previous, shown_titles or [])
        raw = async_to_sync(_complete)(engine, token_ids, priority, store.cache_salt)
        calls = grounded(parse(raw), text)
    except PlanError as exc:
        logger.info("the model's plan for %r failed validation: %s", text, exc)
        return Planned(None, raw, time.perf_counter() - started, str(exc))
    except Exception as exc:  # the engine refused or failed the request (too long, shut down): the rules answer
        logger.warning("the model could not plan %r: %s", text, exc)
        return Planned(None, raw, time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
    return Planned(calls, raw, time.perf_counter() - started)
