"""The studio's catalog forms: an upload, and a saved source (feed URL or SQL database) with its schedule."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from sqlalchemy.engine import make_url

from catalog import outbound
from catalog.forms import MAX_UPLOAD_BYTES, decode_upload
from catalog.ingest import SourceError, detect_format
from catalog.ingest.sql import safe_url, validate_mapping
from catalog.models import ImportRun, ImportSource

UPLOAD_FORMATS = [("", "Detect from the file name"), (ImportRun.Format.SHOPIFY, "Shopify product CSV"),
                  (ImportRun.Format.JSON, "JSON feed")]
SQL_EXAMPLE = json.dumps(
    {"products": {"query": "SELECT slug, name, price, stock FROM products",
                  "columns": {"handle": "slug", "title": "name", "price": "price", "inventory_quantity": "stock"}}},
    indent=1,
)


class UploadForm(forms.Form):
    file = forms.FileField(help_text="A Shopify product CSV export or a JSON feed (at most 20 MiB).")
    import_format = forms.ChoiceField(choices=UPLOAD_FORMATS, required=False, label="Format")

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("file")
        if upload is None:
            return data
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB.")
        fmt = data.get("import_format") or ""
        if not fmt:
            try:
                fmt = detect_format(upload.name)
            except SourceError:
                raise forms.ValidationError("Cannot tell the format from the file name: choose it.") from None
        if fmt not in (ImportRun.Format.SHOPIFY, ImportRun.Format.JSON):
            raise forms.ValidationError("Upload a Shopify CSV or a JSON feed; add a database as a source.")
        data["format"] = fmt
        data["text"] = decode_upload(upload.read())
        if not data["text"].lstrip("\ufeff").strip():
            # Nothing to import; and an import never reads anything but the uploaded bytes.
            raise forms.ValidationError("The file is empty.")
        return data


def _refusal(exc: Exception) -> forms.ValidationError:
    """catalog.outbound's reason, as a form error."""
    text = str(exc)
    return forms.ValidationError(text[:1].upper() + text[1:] + ("" if text.endswith(".") else "."))


def sql_source(location: str, password: str, mapping_text: str, validate: Callable[[Any], dict]) -> tuple[str, dict]:
    """A database source as an owner gives it (the catalog's and the orders'): the URL checked against the
    operator's list, early (the import checks again as it connects: catalog.outbound), with the password put in;
    the mapping parsed and checked by ``validate``. A ValidationError that says what is wrong."""
    try:
        outbound.check_sql_url(location)
    except outbound.Refused as exc:
        raise _refusal(exc) from None
    url = make_url(location)
    if password:
        url = url.set(password=password)
    if not mapping_text.strip():
        raise forms.ValidationError("A SQL source needs its query and columns (JSON).")
    try:
        mapping = validate(json.loads(mapping_text))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise forms.ValidationError(f"The query and columns are not valid JSON: {exc}") from None
    except SourceError as exc:
        raise forms.ValidationError(f"The query and columns are not usable: {exc}") from None
    return url.render_as_string(hide_password=False), mapping


def without_password(form: forms.Form, sql: bool | None = None) -> forms.Form:
    """After an error a form is shown again: never with a database password in it. ``sql``: the location is a
    database URL (by default: when the form's kind says so)."""
    if form.is_bound:
        data = form.data.copy()
        if data.get("kind") == "sql" if sql is None else sql:
            data["location"] = safe_url(data.get("location", ""))
        data["password"] = ""
        form.data = data
    return form


class SourceForm(forms.ModelForm):
    password = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False),
        help_text="SQL sources: the database password, kept out of the URL shown on this page.",
    )
    mapping_text = forms.CharField(
        required=False, label="Query and columns (JSON)", widget=forms.Textarea(attrs={"rows": 6}),
        help_text="SQL sources: the mapping the ingest_catalog command takes, e.g. " + SQL_EXAMPLE.replace("\n", ""),
    )

    class Meta:
        model = ImportSource
        fields = ["name", "kind", "location", "schedule", "archive_missing"]
        labels = {"location": "URL", "archive_missing": "Archive products the source no longer lists"}
        help_texts = {"location": "The feed's http(s) URL, or a SQLAlchemy URL such as "
                      "postgresql+psycopg://shop@db.example.com/shop"}

    def __init__(self, *args, store=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.store = store
        if not settings.CATALOG_SQL_HOSTS:
            self.fields["kind"].help_text = (
                "Database (SQL) sources are off on this server: the operator has listed no database servers "
                "that studio sources may read (CATALOG_SQL_HOSTS).")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if ImportSource.objects.filter(store=self.store, name=name).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError("You already have a source of that name.")
        return name

    def clean(self) -> dict:
        data = super().clean()
        kind, location = data.get("kind"), (data.get("location") or "").strip()
        if not kind or not location:
            return data
        if kind == ImportSource.Kind.SQL:
            location, self.instance.mapping = sql_source(location, data.get("password") or "",
                                                         data.get("mapping_text") or "", validate_mapping)
        else:
            try:
                outbound.check_feed_url(location)
            except outbound.Refused as exc:
                raise _refusal(exc) from None
            self.instance.mapping = None
        data["location"] = location
        self.instance.location = location
        return data

    def shown_again(self) -> SourceForm:
        return without_password(self)


class ProductSearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search products")
