"""The studio's catalog forms: an upload, and a saved source (feed URL or SQL database) with its schedule."""

from __future__ import annotations

import ipaddress
import json
import socket
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from sqlalchemy.engine import make_url

from catalog.forms import MAX_UPLOAD_BYTES, _decode
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
        data["text"] = _decode(upload.read())
        return data


def _inside_address(host: str | None) -> bool:
    """Whether ``host`` is or resolves to an address of this server's own networks (loopback, private,
    link-local such as the cloud metadata service): an owner's source must not reach what only the server can."""
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False  # unresolvable now: the sync itself will fail and say so
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if address.is_private or address.is_loopback or address.is_link_local or address.is_reserved:
            return True
    return False


INSIDE_MESSAGE = "That address is inside the server's own network; give the source's public address."


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
            try:
                url = make_url(location)
            except Exception:  # noqa: BLE001 - any parse failure is the owner's typo
                raise forms.ValidationError("That is not a SQLAlchemy database URL.") from None
            if url.get_backend_name() == "sqlite" and not getattr(settings, "CATALOG_STUDIO_ALLOW_SQLITE", False):
                # A SQLite "database" is a file on this server: an owner must not read other stores' data (or the
                # app's own database) through it. The ingest_catalog command, run by the operator, still takes one.
                raise forms.ValidationError("SQLite files on the server cannot be a studio source; use a database "
                                            "server's URL (PostgreSQL, MySQL...).")
            if url.host and _inside_address(url.host) and not getattr(
                settings, "CATALOG_STUDIO_ALLOW_PRIVATE_HOSTS", False
            ):
                raise forms.ValidationError(INSIDE_MESSAGE)
            if data.get("password"):
                url = url.set(password=data["password"])
            location = url.render_as_string(hide_password=False)
            text = data.get("mapping_text") or ""
            if not text.strip():
                raise forms.ValidationError("A SQL source needs its query and columns (JSON).")
            try:
                self.instance.mapping = validate_mapping(json.loads(text))
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(f"The query and columns are not valid JSON: {exc}") from None
            except SourceError as exc:
                raise forms.ValidationError(f"The query and columns are not usable: {exc}") from None
        else:
            if urlsplit(location).scheme not in ("http", "https"):
                raise forms.ValidationError("A feed source needs an http(s) URL.")
            if _inside_address(urlsplit(location).hostname) and not getattr(
                settings, "CATALOG_STUDIO_ALLOW_PRIVATE_HOSTS", False
            ):
                raise forms.ValidationError(INSIDE_MESSAGE)
            self.instance.mapping = None
        data["location"] = location
        self.instance.location = location
        return data

    def shown_again(self) -> SourceForm:
        """After an error the form is shown again: never with a database password in it."""
        if self.is_bound:
            data = self.data.copy()
            data["location"] = safe_url(data.get("location", "")) if data.get("kind") == "sql" else data.get(
                "location", "")
            data["password"] = ""
            self.data = data
        return self


class ProductSearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search products")
