"""The canonical key of a constraint: equal keys compile to the same grammar, so the cache compiles each once."""

from __future__ import annotations

import json

from inference.core.sampling_params import StructuredOutputsParams
from inference.structured.errors import StructuredOutputError

# A constraint's kind and its canonical text.
ConstraintKey = tuple[str, str]


def constraint_key(params: StructuredOutputsParams) -> ConstraintKey:
    """JSON schemas by their compact JSON text (no spaces), so a dict and its text, or two spacings of one
    schema, share an entry. Key order is kept, not sorted: the grammar writes properties in the order the schema
    declares them (a tool call's ``name`` before its ``arguments``), so two orders are two constraints. Choices
    as the JSON list of their strings (order kept: it is the caller's)."""
    if params.json is not None:
        schema = params.json
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as exc:
                raise StructuredOutputError(f"the JSON schema is not valid JSON: {exc}") from exc
        if not isinstance(schema, (dict, bool)):
            raise StructuredOutputError(f"a JSON schema is an object, got {type(schema).__name__}")
        return "json", json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    if params.json_object:
        return "json_object", ""
    if params.regex is not None:
        return "regex", params.regex
    if params.choice is not None:
        return "choice", json.dumps(list(params.choice), ensure_ascii=False)
    assert params.grammar is not None  # StructuredOutputsParams holds exactly one
    return "grammar", params.grammar
