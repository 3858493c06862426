"""The structured-output benchmark's 20 JSON schemas (shop-assistant shaped: products, orders, carts, reviews),
and a validator for the subset of JSON Schema they use.

The validator is ours because no JSON Schema package is locked (requirements/); it covers exactly the keywords
these schemas use (type, properties, required, additionalProperties, enum, const, minimum/maximum, exclusive
bounds, minLength/maxLength, pattern, items, minItems/maxItems; description and title are annotations) and refuses a schema with any other keyword, so a
schema added later cannot be half-checked silently.
"""

from __future__ import annotations

import re
from typing import Any

_STR = {"type": "string"}
_SKU = {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}
_PRICE = {"type": "number", "minimum": 0, "maximum": 10000}
_QTY = {"type": "integer", "minimum": 1, "maximum": 99}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


# (name, schema, what the prompt asks for)
SCHEMAS: list[tuple[str, dict[str, Any], str]] = [
    ("product", _obj({"name": _STR, "price": _PRICE, "in_stock": {"type": "boolean"}}), "a tent product"),
    ("sku", _obj({"sku": _SKU}), "a product SKU like ABC-1234"),
    ("rating", _obj({"stars": {"type": "integer", "minimum": 1, "maximum": 5}, "comment": {"type": "string", "maxLength": 80}}),
     "a short product review"),
    ("category", _obj({"category": {"enum": ["tents", "sleeping bags", "stoves", "backpacks", "lights"]}}),
     "the category of a camping stove"),
    ("cart_line", _obj({"sku": _SKU, "quantity": _QTY}), "one line of a shopping cart"),
    ("cart", _obj({"lines": {"type": "array", "items": _obj({"sku": _SKU, "quantity": _QTY}), "minItems": 1, "maxItems": 3}}),
     "a shopping cart with two items"),
    ("tags", _obj({"tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 20}, "minItems": 2, "maxItems": 4}}),
     "tags for a rain jacket"),
    ("address", _obj({"street": _STR, "city": _STR, "postcode": {"type": "string", "pattern": "^[0-9]{5}$"},
                      "country": {"enum": ["US", "DE", "FR", "GB"]}}), "a shipping address"),
    ("order_status", _obj({"order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
                           "status": {"enum": ["pending", "paid", "shipped", "delivered", "cancelled"]}}),
     "the status of an order"),
    ("dimensions", _obj({"length_cm": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
                         "width_cm": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
                         "weight_kg": {"type": "number", "minimum": 0, "maximum": 50}}), "a backpack's size"),
    ("nested_product", _obj({"product": _obj({"name": _STR, "price": _PRICE}),
                             "seller": _obj({"name": _STR, "rating": {"type": "number", "minimum": 0, "maximum": 5}})}),
     "a product and its seller"),
    ("intent", _obj({"intent": {"enum": ["search", "compare", "order_status", "return", "other"]},
                     "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
     "the intent of 'where is my parcel?'"),
    ("search_query", _obj({"query": {"type": "string", "minLength": 1, "maxLength": 40},
                           "max_price": _PRICE, "category": {"enum": ["tents", "stoves", "lights"]}},
                          required=["query"]), "a search for a cheap tent"),
    ("comparison", _obj({"winner": _STR, "reasons": {"type": "array", "items": _STR, "minItems": 1, "maxItems": 3}}),
     "which of two tents is better"),
    ("return_request", _obj({"order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
                             "reason": {"enum": ["damaged", "wrong item", "too small", "changed mind"]},
                             "refund": {"type": "boolean"}}), "a return request"),
    ("stock", _obj({"sku": _SKU, "warehouses": {"type": "array", "minItems": 1, "maxItems": 2,
                                                "items": _obj({"code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
                                                               "units": {"type": "integer", "minimum": 0, "maximum": 1000}})}}),
     "stock levels of a product"),
    ("discount", _obj({"code": {"type": "string", "pattern": "^[A-Z0-9]{4,8}$"},
                       "percent": {"type": "integer", "minimum": 5, "maximum": 50}}), "a discount code"),
    ("bool_flags", _obj({"gift_wrap": {"type": "boolean"}, "express": {"type": "boolean"}, "note": {"const": "none"}}),
     "delivery options"),
    ("answer", _obj({"answer": {"type": "string", "maxLength": 120},
                     "sources": {"type": "array", "items": _SKU, "maxItems": 2}}), "an answer citing products"),
    ("bundle", _obj({"bundle": {"type": "array", "minItems": 2, "maxItems": 3,
                                "items": _obj({"name": _STR, "price": _PRICE, "kind": {"enum": ["main", "accessory"]}})},
                     "total": _PRICE}), "a camping bundle"),
]

_KNOWN = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "items", "minItems", "maxItems",
    "description", "title",  # annotations: they constrain nothing (tools' parameters carry them for the model)
}
_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "number": (int, float), "integer": int,
}


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """The ways ``value`` breaks ``schema`` (empty: valid)."""
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"validate() does not know the keywords {sorted(unknown)}")
    errors: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _TYPES[kind]) and not (kind in ("number", "integer") and isinstance(value, bool))
        if kind == "integer" and isinstance(value, float):
            ok = value.is_integer()
        if not ok:
            return [f"{path}: {value!r} is not of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != {schema['const']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, bad in (("minimum", value < schema.get("minimum", value)), ("maximum", value > schema.get("maximum", value)),
                         ("exclusiveMinimum", "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]),
                         ("exclusiveMaximum", "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"])):
            if bad:
                errors.append(f"{path}: {value} breaks {key} {schema[key]}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
            errors.append(f"{path}: length {len(value)} out of bounds")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{path}: {len(value)} items out of bounds")
        for i, item in enumerate(value):
            errors += validate(item, schema.get("items", {}), f"{path}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{path}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties", True) is False:
            errors += [f"{path}: unexpected {k!r}" for k in value if k not in props]
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], f"{path}.{k}")
    return errors
