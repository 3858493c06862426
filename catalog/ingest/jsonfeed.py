"""JSON catalogs: a list of products with nested variants, or {"products": [...], "documents": [...]}.

A product::

    {"handle": "trail-tent", "title": "Trail Tent", "description_html": "<p>...</p>" (or "description"),
     "vendor": "...", "product_type": "..." (or "type"), "tags": ["a", "b"] (or "a, b"), "status": "active",
     "options": ["Size", "Color"],
     "variants": [{"sku": "TT-2P", "options": {"Size": "2P"} (or ["2P"] or option1..3), "price": "199.00",
                   "compare_at_price": null, "currency": "USD", "inventory_quantity": 4,
                   "inventory_policy": "deny", "image": "https://..."}],
     "images": ["https://..."] (or [{"src": "...", "alt": "...", "position": 1}])}

A product without "variants" but with a "price" is one variant. Documents: {"kind": "returns", "title", "body"}.
Errors name the product's position in the list and its line in the file.
"""

from __future__ import annotations

import bisect
import json
from json import scanner
from typing import Any

from .records import (
    DocumentRecord,
    ImageRecord,
    ParsedCatalog,
    ProductRecord,
    RowError,
    RowProblem,
    SourceError,
    VariantRecord,
    clean_option_names,
    clean_option_values,
    normalise_tags,
    parse_policy,
    parse_price,
    parse_quantity,
    parse_status,
)

DOCUMENT_KINDS = {"returns", "shipping", "warranty", "faq", "other"}
# A catalog nests five or six levels; far deeper is no catalog, and Python's parser would overflow its stack.
MAX_DEPTH = 100


def _load_with_lines(text: str) -> tuple[Any, dict[int, int]]:
    """json.loads that also returns id(object) -> line where the object starts."""
    newlines = [i for i, char in enumerate(text) if char == "\n"]
    lines: dict[int, int] = {}
    decoder = json.JSONDecoder()
    plain_parse_object = decoder.parse_object

    def parse_object(s_and_end, *args, **kwargs):
        start = s_and_end[1] - 1  # the index just after "{"
        obj, end = plain_parse_object(s_and_end, *args, **kwargs)
        lines[id(obj)] = bisect.bisect_right(newlines, start) + 1
        return obj, end

    depth = 0

    def nested(parse):
        def parse_nested(*args, **kwargs):
            nonlocal depth
            depth += 1
            try:
                if depth > MAX_DEPTH:
                    raise SourceError(f"the JSON is nested more than {MAX_DEPTH} levels deep")
                return parse(*args, **kwargs)
            finally:
                depth -= 1

        return parse_nested

    decoder.parse_object = nested(parse_object)
    decoder.parse_array = nested(decoder.parse_array)
    # The C scanner ignores parse_object and parse_array; the pure-Python one calls them for every one.
    decoder.scan_once = scanner.py_make_scanner(decoder)
    try:
        return decoder.decode(text), lines
    except json.JSONDecodeError as exc:
        raise SourceError(f"invalid JSON: {exc}") from None
    except RecursionError:  # a deep stack already: still a clear error, never a crash
        raise SourceError(f"the JSON is nested more than {MAX_DEPTH} levels deep") from None


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _images(raw: Any) -> list[ImageRecord]:
    images = []
    for i, item in enumerate(raw if isinstance(raw, list) else [raw] if raw else [], 1):
        if isinstance(item, str) and item.strip():
            images.append(ImageRecord(src=item.strip(), position=i))
        elif isinstance(item, dict) and _text(item.get("src") or item.get("url")):
            position = item.get("position")
            images.append(
                ImageRecord(
                    src=_text(item.get("src") or item.get("url")),
                    position=position if isinstance(position, int) else i,
                    alt_text=_text(item.get("alt") or item.get("alt_text")),
                )
            )
        else:
            raise RowProblem(f"image {i} has no src")
    return images


def _option_names(raw: Any) -> list[str]:
    if not isinstance(raw, list):
        return []
    return clean_option_names([_text(item.get("name") if isinstance(item, dict) else item) for item in raw])


def _variant_options(raw: dict, names: list[str]) -> tuple[str, str, str]:
    options = raw.get("options")
    if isinstance(options, dict):
        lowered = {str(k).strip().lower(): v for k, v in options.items()}
        unknown = [key for key in options if str(key).strip().lower() not in {n.lower() for n in names}]
        if unknown:
            raise RowProblem(f"option {unknown[0]!r} is not one of the product's options {names}")
        return clean_option_values([lowered.get(name.lower()) for name in names])
    if isinstance(options, list):
        return clean_option_values(options)
    return clean_option_values([raw.get("option1"), raw.get("option2"), raw.get("option3")])


def _variant(raw: Any, names: list[str], line: int | None, where: str, currency: str) -> VariantRecord:
    if not isinstance(raw, dict):
        raise RowProblem("a variant must be an object")
    return VariantRecord(
        line=line,
        where=where,
        sku=_text(raw.get("sku")),
        options=_variant_options(raw, names),
        price=parse_price(raw.get("price")),
        compare_at_price=parse_price(raw.get("compare_at_price"), "compare-at price", required=False),
        currency=_text(raw.get("currency")).upper() or currency,
        inventory_quantity=parse_quantity(raw.get("inventory_quantity", raw.get("inventory"))),
        inventory_policy=parse_policy(raw.get("inventory_policy")),
        image_src=_text(raw.get("image")),
    )


def parse_json_catalog(text: str) -> ParsedCatalog:
    data, lines = _load_with_lines(text)
    if isinstance(data, list):
        items, documents = data, []
    elif isinstance(data, dict) and isinstance(data.get("products"), list):
        items, documents = data.get("products", []), data.get("documents", [])
    else:
        raise SourceError('expected a list of products or an object with a "products" list')

    parsed = ParsedCatalog()
    seen: dict[str, ProductRecord] = {}
    for index, item in enumerate(items, 1):
        line = lines.get(id(item))
        where = f"product {index}" + (f" (line {line})" if line else "")
        if not isinstance(item, dict):
            parsed.errors.append(RowError(line, where, "a product must be an object"))
            parsed.orphan_failures += 1
            continue
        handle = _text(item.get("handle"))
        if not handle:
            parsed.errors.append(RowError(line, where, "missing handle"))
            parsed.orphan_failures += 1
            continue
        if handle in seen:
            parsed.errors.append(RowError(line, where, f"handle already used by {seen[handle].where}", handle=handle))
            parsed.orphan_failures += 1
            continue
        record = seen[handle] = ProductRecord(handle=handle, line=line, where=where)
        parsed.products.append(record)

        def fail(reason: str, record=record, line=line, where=where) -> None:
            record.fatal.append(reason)
            parsed.errors.append(RowError(line, where, reason, handle=record.handle))

        record.title = _text(item.get("title"))
        if not record.title:
            fail("missing title")
        record.description_html = _text(item.get("description_html") or item.get("body_html"))
        if item.get("description") is not None and not record.description_html:
            record.description = _text(item.get("description"))
        record.vendor = _text(item.get("vendor"))
        record.product_type = _text(item.get("product_type") or item.get("type"))
        record.tags = normalise_tags(item.get("tags"))
        try:
            record.status = parse_status(item.get("status"))
            record.images = _images(item.get("images") or item.get("image"))
        except RowProblem as problem:
            fail(str(problem))
        record.option_names = _option_names(item.get("options"))
        currency = _text(item.get("currency")).upper()

        raw_variants = item.get("variants")
        if raw_variants is None and "price" in item:
            raw_variants = [{key: item[key] for key in item if key not in ("variants", "images", "options")}]
        if not isinstance(raw_variants, list):
            fail('no "variants" list and no "price"')
            continue
        if not record.option_names:
            # Names may only appear as the keys of the first variant's options.
            first = raw_variants[0] if raw_variants and isinstance(raw_variants[0], dict) else {}
            if isinstance(first.get("options"), dict):
                record.option_names = clean_option_names([str(k) for k in first["options"]])
        for v_index, raw in enumerate(raw_variants, 1):
            v_line = lines.get(id(raw), line)
            v_where = f"{where}, variant {v_index}" + (f" (line {v_line})" if v_line and v_line != line else "")
            try:
                record.variants.append(_variant(raw, record.option_names, v_line, v_where, currency))
            except RowProblem as problem:
                sku = _text(raw.get("sku")) if isinstance(raw, dict) else ""
                parsed.errors.append(RowError(v_line, v_where, str(problem), handle=handle, sku=sku))
                record.variant_failures += 1

    if not isinstance(documents, list):
        raise SourceError('"documents" must be a list')
    for index, item in enumerate(documents, 1):
        line = lines.get(id(item))
        where = f"document {index}" + (f" (line {line})" if line else "")
        if not isinstance(item, dict):
            parsed.errors.append(RowError(line, where, "a document must be an object"))
            continue
        kind = _text(item.get("kind")).lower()
        title, body = _text(item.get("title")), _text(item.get("body"))
        if kind not in DOCUMENT_KINDS:
            parsed.errors.append(RowError(line, where, f"unknown document kind {kind!r} ({sorted(DOCUMENT_KINDS)})"))
        elif not title or not body:
            parsed.errors.append(RowError(line, where, "a document needs a title and a body"))
        else:
            parsed.documents.append(DocumentRecord(kind=kind, title=title, body=body, line=line, where=where))
    return parsed
