"""The canonical key of a constraint: equal keys compile to the same grammar, so the cache compiles each once."""

from __future__ import annotations

import json
from typing import Any

from inference.core.sampling_params import StructuredOutputsParams
from inference.structured.errors import StructuredOutputError

# A constraint's kind and its canonical text.
ConstraintKey = tuple[str, str]


def constraint_key(params: StructuredOutputsParams) -> ConstraintKey:
    """JSON schemas by their compact JSON text (no spaces), so a dict and its text, or two spacings of one
    schema, share an entry. Key order is kept, not sorted: the grammar writes properties in the order the schema
    declares them (a tool call's ``name`` before its ``arguments``), so two orders are two constraints. Choices
    as the JSON list of their strings (order kept: it is the caller's). Structural tags as JSON schemas."""
    if params.json is not None:
        return "json", _compact(params.json, "JSON schema", (dict, bool))
    if params.structural_tag is not None:
        return "structural_tag", _compact(params.structural_tag, "structural tag", (dict,))
    if params.json_object:
        return "json_object", ""
    if params.regex is not None:
        return "regex", params.regex
    if params.choice is not None:
        return "choice", json.dumps(list(params.choice), ensure_ascii=False)
    assert params.grammar is not None  # StructuredOutputsParams holds exactly one
    return "grammar", params.grammar


def _compact(value: Any, what: str, types: tuple[type, ...]) -> str:
    """A JSON document (given decoded or as text) as compact text, key order kept."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise StructuredOutputError(f"the {what} is not valid JSON: {exc}") from exc
    if not isinstance(value, types):
        raise StructuredOutputError(f"a {what} is an object, got {type(value).__name__}")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
