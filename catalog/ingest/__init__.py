"""Catalog ingestion: read a source (Shopify CSV, JSON, SQL database), upsert it, record the run.

Public API:

- ``detect_format(source) -> "shopify" | "json" | "sql"``
- ``read_source(fmt, source, *, text=None, mapping=None, restricted=False) -> ParsedCatalog``
- ``apply_catalog(store, parsed, progress=None) -> ImportResult`` (the upsert)
- ``execute_run(run, progress=None, operator=False) -> ImportResult | None``: does an ImportRun from start to end,
  keeping its status, progress, summary and errors up to date. Celery's task and the management command both
  call it; only the operator's command passes ``operator=True``: every other run (a studio source, an upload,
  the admin's form) reads only its upload's text, and connects only where ``catalog.outbound`` allows.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path
from urllib.parse import urlsplit

from django.utils import timezone

from .. import outbound
from ..models import ImportRun
from .jsonfeed import parse_json_catalog
from .records import ParsedCatalog, SourceError
from .shopify import parse_shopify_csv
from .sql import read_sql_catalog, safe_url, validate_mapping
from .upsert import ImportResult, apply_catalog

__all__ = [
    "ImportResult",
    "ParsedCatalog",
    "SourceError",
    "apply_catalog",
    "describe_source",
    "detect_format",
    "execute_run",
    "load_mapping",
    "read_source",
]

logger = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 50 * 1024 * 1024
SQL_FILE_SUFFIXES = {".db", ".sqlite", ".sqlite3"}
PROGRESS_WRITE_INTERVAL = 0.5  # seconds between progress writes to the ImportRun row


def every(interval: float) -> Callable[[int, int], bool]:
    """A gate for progress reports: open for the first and the last step (``done`` 0 or ``total``) and then at
    most once per ``interval`` seconds, so a report per product costs a write only that often."""
    last = 0.0

    def due(done: int, total: int) -> bool:
        nonlocal last
        now = time.monotonic()
        if done not in (0, total) and now - last < interval:
            return False
        last = now
        return True

    return due

Progress = Callable[[str, int, int], None]


def _is_url(source: str) -> bool:
    return "://" in source


def detect_format(source: str) -> str:
    """From the extension (path or URL) or the URL scheme: .csv -> shopify, .json -> json, db URLs -> sql."""
    if _is_url(source):
        scheme = urlsplit(source).scheme.lower()
        if scheme not in ("http", "https", "file"):
            return "sql"
        suffix = Path(urlsplit(source).path).suffix.lower()
    else:
        suffix = Path(source).suffix.lower()
    if suffix == ".csv":
        return "shopify"
    if suffix == ".json":
        return "json"
    if suffix in SQL_FILE_SUFFIXES:
        return "sql"
    raise SourceError(f"cannot tell the format of {describe_source(source)!r}; say it with --format")


def describe_source(source: str) -> str:
    """The source as it may be shown: database URLs lose their password."""
    if _is_url(source) and urlsplit(source).scheme.lower() not in ("http", "https", "file"):
        return safe_url(source)
    return source


def _is_feed(source: str) -> bool:
    return _is_url(source) and urlsplit(source).scheme.lower() in ("http", "https")


def _read_text(source: str, restricted: bool = False) -> str:
    if _is_feed(source):
        try:
            data = outbound.fetch(source, restricted=restricted, max_bytes=MAX_DOWNLOAD_BYTES, timeout=30)
        except outbound.FetchError as exc:
            raise SourceError(str(exc)) from None
    elif restricted:
        raise SourceError("a studio import reads its upload or an http(s) feed, never a file on the server")
    else:
        path = Path(urlsplit(source).path if source.startswith("file://") else source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Spreadsheet programs still save CSVs as Windows-1252.
        return data.decode("cp1252", errors="replace")


def load_mapping(path: str | Path, validate: Callable[[Any], dict] | None = None) -> dict:
    """A mapping file, checked by ``validate`` (the catalog's by default; orders pass theirs)."""
    try:
        mapping = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SourceError(f"cannot read the mapping {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise SourceError(f"the mapping {path} is not valid JSON: {exc}") from None
    return (validate or validate_mapping)(mapping)


def _sql_url(source: str) -> str:
    if _is_url(source):
        return source
    # A bare path to a SQLite file.
    return f"sqlite:///{Path(source).resolve()}"


# Shared with the order import (shop_assistant.orders.ingest): one way of reading a source's text or database URL.
read_text = _read_text
sql_url = _sql_url


def read_source(fmt: str, source: str, *, text: str | None = None, mapping: dict | None = None,
                restricted: bool = False) -> ParsedCatalog:
    """Parse a source; ``text`` (an upload's content) is used instead of reading ``source`` when given.

    ``restricted``: the source is a store owner's (catalog.outbound): a database only on the operator's list, a
    feed only at an allowed address, checked as it connects, and never a file of this server."""
    if fmt == "sql":
        if not mapping:
            raise SourceError("a SQL import needs a mapping of tables/columns to fields (--mapping FILE)")
        return read_sql_catalog(_sql_url(source), mapping, restricted=restricted)
    content = text if text is not None else _read_text(source, restricted)
    if not content.lstrip("\ufeff").strip():
        raise SourceError(f"{describe_source(source) or 'the file'} is empty")
    if fmt == "shopify":
        return parse_shopify_csv(io.StringIO(content, newline=""))
    if fmt == "json":
        return parse_json_catalog(content)
    raise SourceError(f"unknown format {fmt!r} (shopify, json or sql)")


def _upload_text(run: ImportRun, operator: bool) -> str | None:
    """The text to import instead of reading ``run.source``: an upload's, even when it decoded to nothing.

    Only the operator's command names a file to read; for any other run a source that is no feed URL nor a
    database is an upload's name, and an empty upload must fail as empty, not open a file of that name here.
    """
    if run.upload or operator or run.format == ImportRun.Format.SQL or _is_feed(run.source):
        return run.upload or None
    return ""


def execute_run(run: ImportRun, progress: Progress | None = None, *, operator: bool = False) -> ImportResult | None:
    """Do an import run; returns None (and marks the run failed) when the source cannot be read at all.

    ``progress(phase, done, total)`` is called for every product, e.g. to move a tqdm bar or a Celery state.
    ``operator``: the run is the operator's own command (``manage.py ingest_catalog``), free to read any file,
    database or URL; every other run is a store owner's, held to ``catalog.outbound`` when it connects.
    """
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.RUNNING, phase="reading", started_at=timezone.now(), message=""
    )
    write_due = every(PROGRESS_WRITE_INTERVAL)

    def report(done: int, total: int) -> None:
        # Written in the same transaction as the import's current chunk: visible when that chunk commits.
        if write_due(done, total):
            ImportRun.objects.filter(pk=run.pk).update(phase="writing", processed=done, total=total)
        if progress:
            progress("writing", done, total)

    try:
        if progress:
            progress("reading", 0, 0)
        parsed = read_source(run.format, run.source, text=_upload_text(run, operator), mapping=run.mapping,
                             restricted=not operator)
        result = apply_catalog(run.store, parsed, progress=report, archive_missing=run.archive_missing)
    except SourceError as exc:
        logger.warning("import run %s failed: %s", run.pk, exc)
        ImportRun.objects.filter(pk=run.pk).update(
            status=ImportRun.Status.FAILED, phase="", message=str(exc), finished_at=timezone.now()
        )
        run.refresh_from_db()
        return None
    except Exception as exc:
        logger.exception("import run %s crashed", run.pk)
        ImportRun.objects.filter(pk=run.pk).update(
            status=ImportRun.Status.FAILED,
            phase="",
            message=f"internal error: {exc.__class__.__name__}: {exc}",
            finished_at=timezone.now(),
        )
        raise
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.SUCCEEDED,
        phase="",
        summary=result.summary,
        errors=result.errors,
        processed=len(parsed.products),
        total=len(parsed.products),
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return result
