"""A store's own SQL database, read through SQLAlchemy with a JSON mapping of its tables to our fields.

Mapping (every section takes either "table" (optionally "schema") or a read-only "query")::

    {
      "products": {"table": "products", "key": "id",
                   "columns": {"handle": "slug", "title": "name", "description_html": "body",
                               "description": "plain_text", "vendor": "brand", "product_type": "category",
                               "tags": "tags", "status": "status"},
                   "option_names": ["Size"]},
      "variants": {"table": "variants", "product_key": "product_id",
                   "columns": {"sku": "sku", "price": "price", "compare_at_price": "list_price",
                               "currency": "currency", "inventory_quantity": "stock",
                               "inventory_policy": "policy", "image": "image_url"},
                   "options": {"Size": "size"}},
      "images": {"table": "images", "product_key": "product_id",
                 "columns": {"src": "url", "position": "position", "alt_text": "alt"}},
      "documents": {"table": "pages", "columns": {"kind": "kind", "title": "title", "body": "body"}}
    }

Only "products" with "handle" and "title" is required. Without a "variants" section each products row is one
variant (rows of one product share a handle, as in a Shopify export), so a single query can describe it all.
Nothing is written to the source: the connection is rolled back when closed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from .. import outbound
from .jsonfeed import DOCUMENT_KINDS
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

T = TypeVar("T")

PRODUCT_FIELDS = {"handle", "title", "description_html", "description", "vendor", "product_type", "tags", "status"}
VARIANT_FIELDS = {
    "sku",
    "price",
    "compare_at_price",
    "currency",
    "inventory_quantity",
    "inventory_policy",
    "image",
}
IMAGE_FIELDS = {"src", "position", "alt_text"}
DOCUMENT_FIELDS = {"kind", "title", "body"}


def validate_mapping(mapping: Any) -> dict:
    """Check a mapping's shape before connecting, so that typos are reported as such."""
    if not isinstance(mapping, dict) or not isinstance(mapping.get("products"), dict):
        raise SourceError('the mapping needs a "products" section')
    unknown_sections = set(mapping) - {"products", "variants", "images", "documents"}
    if unknown_sections:
        raise SourceError(f"unknown mapping sections: {sorted(unknown_sections)}")
    allowed = {
        "products": PRODUCT_FIELDS | (set() if "variants" in mapping else VARIANT_FIELDS),
        "variants": VARIANT_FIELDS,
        "images": IMAGE_FIELDS,
        "documents": DOCUMENT_FIELDS,
    }
    for name, section in mapping.items():
        if not isinstance(section, dict):
            raise SourceError(f'mapping section "{name}" must be an object')
        if ("table" in section) == ("query" in section):
            raise SourceError(f'mapping section "{name}" needs exactly one of "table" or "query"')
        columns = section.get("columns", {})
        if not isinstance(columns, dict) or not all(isinstance(v, str) for v in columns.values()):
            raise SourceError(f'"columns" of "{name}" must map our field names to column names')
        unknown = set(columns) - allowed[name]
        if unknown:
            raise SourceError(
                f'unknown fields in "{name}" columns: {sorted(unknown)} (allowed: {sorted(allowed[name])})'
            )
        options = section.get("options", {})
        if not isinstance(options, dict) or len(options) > 3:
            raise SourceError(f'"options" of "{name}" must map up to 3 option names to columns')
        if name in ("variants", "images") and "product_key" not in section:
            raise SourceError(f'mapping section "{name}" needs "product_key" (its column naming the product)')
    product_columns = mapping["products"].get("columns", {})
    for required in ("handle", "title"):
        if required not in product_columns:
            raise SourceError(f'the "products" columns need "{required}"')
    if "variants" not in mapping and "price" not in product_columns:
        raise SourceError('without a "variants" section the "products" columns need "price"')
    if "variants" in mapping and "price" not in mapping["variants"].get("columns", {}):
        raise SourceError('the "variants" columns need "price"')
    if "documents" in mapping:
        for required in DOCUMENT_FIELDS:
            if required not in mapping["documents"].get("columns", {}):
                raise SourceError(f'the "documents" columns need "{required}"')
    return mapping


def _rows(conn: sa.Connection, name: str, section: dict, extra: list[str]) -> Iterator[Mapping[str, Any]]:
    wanted = list(dict.fromkeys([*section.get("columns", {}).values(), *section.get("options", {}).values(), *extra]))
    if "query" in section:
        result = conn.execute(sa.text(section["query"]))
        missing = [column for column in wanted if column not in result.keys()]
        if missing:
            raise SourceError(f'the "{name}" query returns no column {missing[0]!r}')
        yield from result.mappings()
        return
    try:
        table = sa.Table(section["table"], sa.MetaData(), schema=section.get("schema"), autoload_with=conn)
    except sa.exc.NoSuchTableError:
        raise SourceError(f'no table {section["table"]!r} in the source database') from None
    missing = [column for column in wanted if column not in table.c]
    if missing:
        raise SourceError(f'table {section["table"]!r} has no column {missing[0]!r}')
    statement = sa.select(*[table.c[column] for column in wanted])
    # A stable order makes "row N" in error reports mean the same row on every run.
    order = list(table.primary_key.columns) or [table.c[column] for column in wanted]
    yield from conn.execute(statement.order_by(*order)).mappings()


def _value(row: Mapping[str, Any], section: dict, field: str) -> Any:
    column = section.get("columns", {}).get(field)
    return row[column] if column is not None else None


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _variant(row: Mapping[str, Any], section: dict, line: int, where: str) -> VariantRecord:
    options = section.get("options", {})
    return VariantRecord(
        line=line,
        where=where,
        sku=_text(_value(row, section, "sku")),
        options=clean_option_values([row[column] for column in options.values()]),
        price=parse_price(_value(row, section, "price")),
        compare_at_price=parse_price(_value(row, section, "compare_at_price"), "compare-at price", required=False),
        currency=_text(_value(row, section, "currency")).upper(),
        inventory_quantity=parse_quantity(_value(row, section, "inventory_quantity")),
        inventory_policy=parse_policy(_value(row, section, "inventory_policy")),
        image_src=_text(_value(row, section, "image")),
    )


def safe_url(url: str) -> str:
    """The URL without its password, for logs and the admin."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - anything unparsable is shown as nothing rather than leaked
        return "<unparsable database URL>"


def read_from(url: str, read: Callable[[sa.Connection], T], *, restricted: bool = False,
              read_only: bool = False) -> T:
    """``read(connection)`` on a store's own database (the catalog's and the orders' SQL sources).

    ``restricted`` (a store owner's source): the URL must pass ``catalog.outbound.check_sql_url`` here, as it
    connects, and the checked URL is the one connected to. ``read_only``: the session refuses writes (the
    database's own read-only transaction; SQLite's query_only) and is rolled back. Every failure to connect or
    read is a ``SourceError`` naming the URL without its password."""
    if restricted:
        try:
            url = outbound.check_sql_url(url)
        except outbound.Refused as exc:
            raise SourceError(f"cannot use database URL {safe_url(url)}: {exc}") from None
    try:
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    except Exception as exc:  # noqa: BLE001 - bad URLs and missing drivers both mean "cannot read"
        raise SourceError(f"cannot use database URL {safe_url(url)}: {exc}") from None
    try:
        with engine.connect() as conn:
            if read_only:
                _read_only(conn)
            try:
                return read(conn)
            finally:
                if read_only:
                    conn.rollback()
    except SourceError:
        raise
    except sa.exc.SQLAlchemyError as exc:
        raise SourceError(f"reading {safe_url(url)} failed: {exc.__class__.__name__}: {exc}") from None
    finally:
        engine.dispose()


def _read_only(conn: sa.Connection) -> None:
    dialect = conn.dialect.name
    if dialect in ("postgresql", "mysql", "mariadb"):
        conn.execute(sa.text("SET TRANSACTION READ ONLY"))
    elif dialect == "sqlite":
        conn.exec_driver_sql("PRAGMA query_only = ON")


def read_sql_catalog(url: str, mapping: dict, *, restricted: bool = False) -> ParsedCatalog:
    """Read a catalog through ``mapping`` (``read_from`` says what ``restricted`` means)."""
    validate_mapping(mapping)
    return read_from(url, lambda conn: _read(conn, mapping), restricted=restricted)


def _read(conn: sa.Connection, mapping: dict) -> ParsedCatalog:
    parsed = ParsedCatalog()
    p_section = mapping["products"]
    separate_variants = "variants" in mapping
    key_column = p_section.get("key")
    extra = [key_column] if key_column else []
    by_handle: dict[str, ProductRecord] = {}
    by_key: dict[Any, ProductRecord] = {}
    fixed_names = clean_option_names(list(p_section.get("option_names", [])))

    for number, row in enumerate(_rows(conn, "products", p_section, extra), 1):
        where = f"products row {number}"
        handle = _text(_value(row, p_section, "handle"))
        if not handle:
            parsed.errors.append(RowError(number, where, "missing handle"))
            parsed.orphan_failures += 1
            continue
        record = by_handle.get(handle)
        if record is None:
            record = by_handle[handle] = ProductRecord(handle=handle, line=number, where=where)
            parsed.products.append(record)
            record.title = _text(_value(row, p_section, "title"))
            if not record.title:
                record.fatal.append("missing title")
                parsed.errors.append(RowError(number, where, "missing title", handle=handle))
            record.description_html = _text(_value(row, p_section, "description_html"))
            if "description" in p_section.get("columns", {}) and not record.description_html:
                record.description = _text(_value(row, p_section, "description"))
            record.vendor = _text(_value(row, p_section, "vendor"))
            record.product_type = _text(_value(row, p_section, "product_type"))
            record.tags = normalise_tags(_value(row, p_section, "tags"))
            record.option_names = fixed_names or clean_option_names(list(p_section.get("options", {})))
            try:
                record.status = parse_status(_value(row, p_section, "status"))
            except RowProblem as problem:
                record.fatal.append(str(problem))
                parsed.errors.append(RowError(number, where, str(problem), handle=handle))
        elif separate_variants:
            parsed.errors.append(RowError(number, where, f"handle already used by {record.where}", handle=handle))
            parsed.orphan_failures += 1
            continue
        if key_column:
            by_key[row[key_column]] = record
        if not separate_variants:
            try:
                record.variants.append(_variant(row, p_section, number, where))
            except RowProblem as problem:
                sku = _text(_value(row, p_section, "sku"))
                parsed.errors.append(RowError(number, where, str(problem), handle=handle, sku=sku))
                record.variant_failures += 1

    def owner(section_name: str, row: Mapping[str, Any], number: int) -> ProductRecord | None:
        key = row[mapping[section_name]["product_key"]]
        record = by_key.get(key) if key_column else by_handle.get(_text(key))
        if record is None:
            parsed.errors.append(
                RowError(number, f"{section_name} row {number}", f"no product with key {key!r}")
            )
        return record

    if separate_variants:
        v_section = mapping["variants"]
        if v_section.get("options") and not fixed_names:
            for record in parsed.products:
                record.option_names = clean_option_names(list(v_section["options"]))
        for number, row in enumerate(_rows(conn, "variants", v_section, [v_section["product_key"]]), 1):
            record = owner("variants", row, number)
            if record is None:
                parsed.orphan_variant_failures += 1
                continue
            try:
                record.variants.append(_variant(row, v_section, number, f"variants row {number}"))
            except RowProblem as problem:
                sku = _text(_value(row, v_section, "sku"))
                parsed.errors.append(
                    RowError(number, f"variants row {number}", str(problem), handle=record.handle, sku=sku)
                )
                record.variant_failures += 1

    if "images" in mapping:
        i_section = mapping["images"]
        for number, row in enumerate(_rows(conn, "images", i_section, [i_section["product_key"]]), 1):
            record = owner("images", row, number)
            src = _text(_value(row, i_section, "src"))
            if record is None or not src:
                if record is not None:
                    parsed.errors.append(RowError(number, f"images row {number}", "missing src", handle=record.handle))
                continue
            position = _value(row, i_section, "position")
            record.images.append(
                ImageRecord(
                    src=src,
                    position=int(position) if isinstance(position, int) else len(record.images) + 1,
                    alt_text=_text(_value(row, i_section, "alt_text")),
                )
            )

    if "documents" in mapping:
        d_section = mapping["documents"]
        for number, row in enumerate(_rows(conn, "documents", d_section, []), 1):
            where = f"documents row {number}"
            kind = _text(_value(row, d_section, "kind")).lower()
            title, body = _text(_value(row, d_section, "title")), _text(_value(row, d_section, "body"))
            if kind not in DOCUMENT_KINDS:
                parsed.errors.append(RowError(number, where, f"unknown document kind {kind!r}"))
            elif not title or not body:
                parsed.errors.append(RowError(number, where, "a document needs a title and a body"))
            else:
                parsed.documents.append(DocumentRecord(kind=kind, title=title, body=body, line=number, where=where))
    return parsed
