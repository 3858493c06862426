"""The admin's import form: upload a CSV/JSON file, or name a SQL database and its mapping."""

from __future__ import annotations

import json

from django import forms

from . import outbound
from .ingest import SourceError, detect_format
from .ingest.sql import validate_mapping
from .models import ImportRun

MAX_UPLOAD_BYTES = 20 * 1024 * 1024


def decode_upload(data: bytes) -> str:
    """An uploaded file's text: UTF-8 (with or without a BOM), else Windows-1252 as spreadsheets save it."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


class ImportRunForm(forms.ModelForm):
    # Not named "format": the model field of that name would be overwritten from the form after clean().
    import_format = forms.ChoiceField(
        choices=[("", "Detect from the file name")] + list(ImportRun.Format.choices),
        required=False,
        label="Format",
    )
    file = forms.FileField(required=False, help_text="A Shopify product CSV export or a JSON catalog.")
    database_url = forms.CharField(
        required=False,
        max_length=1000,
        help_text="For SQL imports: a SQLAlchemy URL, e.g. postgresql+psycopg://user:password@host:5432/shop",
    )
    mapping_file = forms.FileField(required=False, help_text="For SQL imports: the JSON mapping of tables to fields.")
    mapping_text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 8}), label="Mapping (JSON)", help_text="Or paste it here."
    )
    embed = forms.BooleanField(required=False, initial=True, label="Compute embeddings afterwards")

    class Meta:
        model = ImportRun
        fields = ["store"]

    def clean(self) -> dict:
        data = super().clean()
        upload, url = data.get("file"), (data.get("database_url") or "").strip()
        if bool(upload) == bool(url):
            raise forms.ValidationError("Upload a file or give a database URL (one of the two).")
        fmt = data.get("import_format") or ""
        if upload:
            if upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB.")
            if not fmt:
                try:
                    fmt = detect_format(upload.name)
                except SourceError as exc:
                    raise forms.ValidationError(str(exc)) from None
            if fmt == ImportRun.Format.SQL:
                raise forms.ValidationError("SQL imports read a database: give its URL instead of a file.")
            self.instance.source = upload.name
            self.instance.upload = decode_upload(upload.read())
            if not self.instance.upload.lstrip("\ufeff").strip():
                raise forms.ValidationError("The file is empty.")
        else:
            fmt = ImportRun.Format.SQL
            # An admin's import runs as a store owner's would (only the ingest_catalog command is the operator's):
            # the same list of database servers, said here before the run fails on it.
            try:
                outbound.check_sql_url(url)
            except outbound.Refused as exc:
                raise forms.ValidationError(f"The database URL cannot be used: {exc}.") from None
            mapping_source = data.get("mapping_file")
            text = decode_upload(mapping_source.read()) if mapping_source else (data.get("mapping_text") or "")
            if not text.strip():
                raise forms.ValidationError("A SQL import needs a mapping (upload it or paste it).")
            try:
                self.instance.mapping = validate_mapping(json.loads(text))
            except (json.JSONDecodeError, RecursionError) as exc:
                raise forms.ValidationError(f"The mapping is not valid JSON: {exc}") from None
            except SourceError as exc:
                raise forms.ValidationError(f"The mapping is not usable: {exc}") from None
            self.instance.source = url
        self.instance.format = fmt
        return data
