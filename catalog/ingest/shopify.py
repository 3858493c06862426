"""Shopify product CSV: one row per variant, rows of a product share a Handle.

The first row of a product carries its title, body and option names; later rows ("continuation rows") have an
empty Title and carry more variants and/or more images. Image-only rows have no price and no option value.
Line numbers in errors are physical lines of the file (bodies may hold quoted newlines), header = line 1.
"""

from __future__ import annotations

import csv
from typing import TextIO

from .records import (
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


def _is_variant_row(get) -> bool:
    return bool(
        get("variant price")
        or get("variant sku")
        or get("option1 value")
        or get("option2 value")
        or get("option3 value")
    )


def parse_shopify_csv(stream: TextIO) -> ParsedCatalog:
    """Parse a Shopify product export. ``stream`` must be opened with ``newline=""``."""
    reader = csv.reader(stream)
    try:
        header = next(reader)
    except StopIteration:
        raise SourceError("the file is empty") from None
    except csv.Error as exc:
        raise SourceError(f"not a CSV file: {exc}") from None
    columns = {name.strip().lower(): i for i, name in enumerate(header)}
    if "handle" not in columns:
        raise SourceError('not a Shopify product CSV: no "Handle" column')
    # Newer exports have per-location stock columns instead of "Variant Inventory Qty".
    stock_columns = [i for name, i in columns.items() if name.startswith("inventory available")]

    parsed = ParsedCatalog()
    products: dict[str, ProductRecord] = {}
    end_of_previous = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            line = end_of_previous + 1
            parsed.errors.append(RowError(line, f"line {line}", f"unreadable CSV row: {exc}"))
            parsed.orphan_failures += 1
            end_of_previous = reader.line_num
            continue
        line = end_of_previous + 1
        end_of_previous = reader.line_num
        if not any(cell.strip() for cell in row):
            continue

        def get(name: str, row=row) -> str:
            i = columns.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        where = f"line {line}"
        handle = get("handle")
        title = get("title")
        if not handle:
            parsed.errors.append(RowError(line, where, "missing handle", sku=get("variant sku")))
            parsed.orphan_failures += 1
            continue

        record = products.get(handle)
        if record is None:
            record = products[handle] = ProductRecord(handle=handle, line=line, where=where)
            if not title:
                record.fatal.append("missing title (the first row of a product must have one)")
                parsed.errors.append(RowError(line, where, record.fatal[-1], handle=handle))
        elif title and record.title:
            parsed.errors.append(
                RowError(line, where, f"handle already used by the product on {record.where}", handle=handle)
            )
            if _is_variant_row(get):
                record.variant_failures += 1
            continue

        if title and not record.title:
            record.title = title
            record.description_html = row[columns["body (html)"]] if "body (html)" in columns else ""
            record.vendor = get("vendor")
            record.product_type = get("type")
            record.tags = normalise_tags(get("tags"))
            record.option_names = clean_option_names([get(f"option{n} name") for n in (1, 2, 3)])
            try:
                if "status" in columns:
                    record.status = parse_status(get("status"))
                else:
                    record.status = parse_status(get("published"))
            except RowProblem as problem:
                parsed.errors.append(RowError(line, where, str(problem), handle=handle))
                record.fatal.append(str(problem))

        if _is_variant_row(get):
            sku = get("variant sku")
            try:
                if "variant inventory qty" in columns or not stock_columns:
                    quantity = parse_quantity(get("variant inventory qty"))
                else:
                    quantity = sum(parse_quantity(row[i] if i < len(row) else "") for i in stock_columns)
                record.variants.append(
                    VariantRecord(
                        line=line,
                        where=where,
                        sku=sku,
                        options=clean_option_values([get(f"option{n} value") for n in (1, 2, 3)]),
                        price=parse_price(get("variant price")),
                        compare_at_price=parse_price(
                            get("variant compare at price"), "compare-at price", required=False
                        ),
                        inventory_quantity=quantity,
                        inventory_policy=parse_policy(get("variant inventory policy")),
                        image_src=get("variant image"),
                    )
                )
            except RowProblem as problem:
                parsed.errors.append(RowError(line, where, str(problem), handle=handle, sku=sku))
                record.variant_failures += 1

        src = get("image src")
        if src:
            try:
                position = int(get("image position") or 0)
            except ValueError:
                position = 0
            record.images.append(ImageRecord(src=src, position=position, alt_text=get("image alt text")))

    parsed.products = list(products.values())
    return parsed
