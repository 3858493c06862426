"""Catalog models: the store, what it sells, the documents the assistant may quote, and import runs.

Every row belongs to a store (directly or through its product), so one database can serve many shops.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from decimal import Decimal
from typing import Self

from django.conf import settings
from django.db import models
from django.db.models import Q


def new_cache_salt() -> str:
    return secrets.token_hex(16)


class Store(models.Model):
    """One shop. Its cache salt keeps its KV-cache blocks apart from every other store's.

    What the owner sets for the assistant lives with the app that reads it (``StoreSettings`` below): the chat's
    answers and widget in ``shop_assistant.chat.models``, the conversations' retention in the console's.
    """

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    currency = models.CharField(max_length=3, default="USD")
    base_url = models.URLField(blank=True, help_text="Product links are built from this and the handle.")
    cache_salt = models.CharField(max_length=64, default=new_cache_salt, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def product_url(self, handle: str) -> str:
        """The shopper-facing link of a product, or "" when the store has no base URL."""
        if not self.base_url:
            return ""
        return f"{self.base_url.rstrip('/')}/products/{handle}"


class StoreSettings(models.Model):
    """Base of one store's settings kept by the app that reads them: one row per store (its ``store`` a
    one-to-one primary key), holding the field defaults until the owner changes them. ``of(store)`` is the one
    way to read them."""

    class Meta:
        abstract = True

    # Whether a missing row is written on first read: only where a default must stay the same once handed out
    # (the widget's signing key is random); every other setting reads its defaults unsaved, since reads never
    # write (a plan, a page view), and the owner's first save inserts the row.
    saved_on_first_read = False

    @classmethod
    def of(cls, store: Store) -> Self:
        """The store's row, or its defaults where it has none, kept on ``store`` so that later reads of the same
        store object query nothing (read it where the store is loaded: on the event loop it must be there
        already). An unsaved store gets unsaved defaults."""
        accessor = cls._meta.get_field("store").remote_field.get_accessor_name()
        try:
            return getattr(store, accessor)
        except cls.DoesNotExist:
            pass
        if store.pk is not None and cls.saved_on_first_read:
            own = cls.objects.get_or_create(store=store)[0]
        else:
            own = cls(store=store)
        setattr(store, accessor, own)
        return own


class Product(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        DRAFT = "draft"
        ARCHIVED = "archived"

    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="products")
    handle = models.CharField(max_length=255, help_text="The store's own identifier (Shopify handle).")
    title = models.CharField(max_length=255)
    description = models.TextField(blank=True, help_text="Plain text, derived from the HTML body.")
    description_html = models.TextField(blank=True)
    vendor = models.CharField(max_length=255, blank=True)
    product_type = models.CharField("type", max_length=255, blank=True)
    tags = models.TextField(blank=True, help_text="Comma-separated.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    option_names = models.JSONField(default=list, blank=True, help_text='Names of option1..3, e.g. ["Size", "Color"].')
    # float32 vector of all-MiniLM-L6-v2; the hash is of the text it was computed from, so unchanged
    # products are not embedded again.
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedding_hash = models.CharField(max_length=64, blank=True, editable=False)
    embedded_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["store", "title"]
        constraints = [models.UniqueConstraint(fields=["store", "handle"], name="product_handle_unique_per_store")]
        indexes = [models.Index(fields=["store", "updated_at"], name="product_store_updated")]

    def __str__(self) -> str:
        return self.title

    @property
    def tag_list(self) -> list[str]:
        return [tag.strip() for tag in self.tags.split(",") if tag.strip()]

    @property
    def url(self) -> str:
        return self.store.product_url(self.handle)


class Variant(models.Model):
    class InventoryPolicy(models.TextChoices):
        DENY = "deny", "deny (stop selling at zero)"
        CONTINUE = "continue", "continue (sell when out of stock)"

    # Denormalised from the product so that SKUs can be unique per store.
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="variants")
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="variants")
    sku = models.CharField(
        max_length=255, help_text="From the source, or made from the handle and options when the source has none."
    )
    option1 = models.CharField(max_length=255, blank=True)
    option2 = models.CharField(max_length=255, blank=True)
    option3 = models.CharField(max_length=255, blank=True)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    compare_at_price = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    currency = models.CharField(max_length=3)
    inventory_quantity = models.IntegerField(default=0)
    inventory_policy = models.CharField(max_length=10, choices=InventoryPolicy.choices, default=InventoryPolicy.DENY)
    position = models.PositiveIntegerField(default=1)
    image_src = models.URLField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["product", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["store", "sku"], name="variant_sku_unique_per_store"),
            models.UniqueConstraint(
                fields=["product", "option1", "option2", "option3"], name="variant_options_unique_per_product"
            ),
            models.CheckConstraint(condition=Q(price__gte=0), name="variant_price_not_negative"),
        ]
        indexes = [models.Index(fields=["store", "updated_at"], name="variant_store_updated")]

    def __str__(self) -> str:
        return f"{self.product.title} ({self.title})" if self.option_values else self.product.title

    @property
    def option_values(self) -> list[str]:
        return [value for value in (self.option1, self.option2, self.option3) if value]

    @property
    def title(self) -> str:
        return " / ".join(self.option_values) or "Default"

    @property
    def options(self) -> dict[str, str]:
        """Option name -> value, e.g. {"Size": "M"}."""
        names = list(self.product.option_names or [])
        values = [self.option1, self.option2, self.option3]
        return {
            (names[i] if i < len(names) and names[i] else f"Option {i + 1}"): value
            for i, value in enumerate(values)
            if value
        }

    @property
    def in_stock(self) -> bool:
        """On hand now. A variant at zero that the store keeps selling ("continue") is a backorder, not in stock:
        "in stock" above it would promise a parcel that cannot ship yet."""
        return self.inventory_quantity > 0

    @property
    def backorder(self) -> bool:
        """Out of stock but still sold (Shopify's inventory policy "continue")."""
        return not self.in_stock and self.inventory_policy == self.InventoryPolicy.CONTINUE

    @property
    def price_text(self) -> str:
        return f"{self.price.quantize(Decimal('0.01'))}"


class ProductImage(models.Model):
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="images")
    src = models.URLField(max_length=1000)
    position = models.PositiveIntegerField(default=1)
    alt_text = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["product", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["product", "src"], name="image_src_unique_per_product")]

    def __str__(self) -> str:
        return self.src


class StoreDocument(models.Model):
    """A policy or help text the assistant may quote word for word."""

    class Kind(models.TextChoices):
        RETURNS = "returns", "Returns and refunds"
        SHIPPING = "shipping", "Shipping and delivery"
        WARRANTY = "warranty", "Warranty"
        FAQ = "faq", "FAQ"
        OTHER = "other", "Other"

    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="documents")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    title = models.CharField(max_length=200)
    body = models.TextField()
    # Sentence -> the shopper question the owner expects to retrieve it (the studio's knowledge page checks it).
    questions = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["store", "kind", "title"]
        constraints = [models.UniqueConstraint(fields=["store", "kind", "title"], name="document_unique_per_store")]

    def __str__(self) -> str:
        return f"{self.store}: {self.title}"


class ImportRun(models.Model):
    """One catalog import: the admin and the console read its progress here, no result backend needed."""

    class Format(models.TextChoices):
        SHOPIFY = "shopify", "Shopify product CSV"
        JSON = "json", "JSON"
        SQL = "sql", "SQL database (SQLAlchemy)"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="import_runs")
    # The saved source this run synced (a studio source, by hand or on its schedule); null: a one-off import.
    import_source = models.ForeignKey(
        "ImportSource", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # Products of the store that this import does not list are archived (a full feed's sync), not kept.
    archive_missing = models.BooleanField(default=False)
    format = models.CharField(max_length=10, choices=Format.choices)
    source = models.CharField(
        max_length=1000, help_text="A path, an http(s) URL, a SQLAlchemy URL or an upload's name."
    )
    # An uploaded file's text travels in the row so that a worker on another machine can read it.
    upload = models.TextField(blank=True, editable=False)
    mapping = models.JSONField(null=True, blank=True, help_text="For SQL sources: tables/columns to our fields.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    phase = models.CharField(max_length=20, blank=True)
    processed = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    # The embedding phase after a successful import: its products embedded so far, of how many.
    embedded = models.PositiveIntegerField(default=0)
    to_embed = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True, help_text="Why the whole import failed, if it did.")
    task_id = models.CharField(max_length=255, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Import #{self.pk} into {self.store} ({self.status})"

    @property
    def embedding(self) -> bool:
        """Imported, and its new and changed products are being embedded (the assistant finds them by meaning)."""
        return self.status == self.Status.SUCCEEDED and self.phase == "embedding"

    @property
    def progress(self) -> tuple[int, int]:
        """(done, total) of the phase under way: rows imported, or products embedded once the import is done."""
        return (self.embedded, self.to_embed) if self.embedding else (self.processed, self.total)

    @property
    def percent(self) -> int:
        done, total = self.progress
        if self.status == self.Status.SUCCEEDED and not self.embedding:
            return 100
        return int(100 * done / total) if total else 0

    @property
    def label(self) -> str:
        """The run's state in a few words, for the page: "running 120 / 500 (writing)", "imported; embedding…"."""
        done, total = self.progress
        counted = f" {done} / {total}" if total else ""
        if self.embedding:
            return f"imported; embedding for search{counted}"
        if self.finished:
            return self.status
        return f"{self.status}{counted}" + (f" ({self.phase})" if self.phase else "")

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)

    @property
    def counts(self) -> dict[str, int]:
        """What the owner reads first: products added, updated, archived, and rows rejected."""
        products = self.summary.get("products", {})
        return {
            "added": products.get("created", 0),
            "updated": products.get("updated", 0),
            "archived": self.summary.get("archived", 0),
            "rejected": self.rejected_rows,
        }

    @property
    def rejected_rows(self) -> int:
        """Source rows refused: one row can carry two reasons (its variant's, and its product left with none)."""
        lines = {error.get("line") for error in self.errors if error.get("line") is not None}
        return len(lines) + sum(1 for error in self.errors if error.get("line") is None)


class ImportSource(models.Model):
    """A catalog source the owner saved in the studio: synced by hand or on a schedule (celery beat).

    ``location`` is a feed URL (CSV or JSON over http(s)) or a SQLAlchemy database URL; a database URL may hold
    a password, so pages show it through ``catalog.sync.display_location`` only.
    """

    class Kind(models.TextChoices):
        CSV = "csv", "Shopify product CSV (URL)"
        JSON = "json", "JSON feed (URL)"
        SQL = "sql", "SQL database (SQLAlchemy URL and query)"

    class Schedule(models.TextChoices):
        OFF = "off", "Off (sync by hand)"
        HOURLY = "hourly", "Every hour"
        DAILY = "daily", "Every day"

    INTERVALS = {Schedule.HOURLY: timedelta(hours=1), Schedule.DAILY: timedelta(days=1)}
    FORMATS = {Kind.CSV: ImportRun.Format.SHOPIFY, Kind.JSON: ImportRun.Format.JSON, Kind.SQL: ImportRun.Format.SQL}

    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="import_sources")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=4, choices=Kind.choices)
    location = models.CharField(max_length=1000)
    mapping = models.JSONField(null=True, blank=True, help_text="SQL sources: the query/tables and their columns.")
    schedule = models.CharField(max_length=6, choices=Schedule.choices, default=Schedule.OFF)
    archive_missing = models.BooleanField(
        default=False, help_text="Archive the store's products this source no longer lists."
    )
    next_due_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey(ImportRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["store", "name"]
        constraints = [models.UniqueConstraint(fields=["store", "name"], name="import_source_name_unique_per_store")]
        indexes = [models.Index(fields=["schedule", "next_due_at"], name="import_source_due")]

    def __str__(self) -> str:
        return f"{self.store}: {self.name}"

    @property
    def format(self) -> str:
        return self.FORMATS[self.kind]

    def interval(self) -> timedelta | None:
        return self.INTERVALS.get(self.schedule)


class DocumentVersion(models.Model):
    """One version of a StoreDocument's text: drafts are edited, one version is published (its text is the
    document's body, which the assistant quotes), and earlier ones are archived, as the prompt's versions are."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        ARCHIVED = "archived"

    document = models.ForeignKey(StoreDocument, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    restored_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["document", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["document", "version"], name="document_version_unique"),
            models.UniqueConstraint(
                fields=["document"], condition=Q(status="published"), name="one_published_version_per_document"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document} v{self.version} ({self.status})"


class SearchSynonym(models.Model):
    """A shopper's word in one language -> the store's own words for it ("es", "chaqueta impermeable" -> "rain
    jacket"), as Shopify's and Algolia's search synonyms: the store's search reads a message in that language with
    its terms replaced by the store's words (``catalog.synonyms``). Proposed rows (the translation generator's)
    are used only once the owner accepts them."""

    class Language(models.TextChoices):
        EN = "en", "English"
        ES = "es", "Spanish"
        FR = "fr", "French"
        DE = "de", "German"

    class Status(models.TextChoices):
        ACCEPTED = "accepted", "Accepted: used by the search"
        PROPOSED = "proposed", "Proposed: waiting for the owner"

    class Source(models.TextChoices):
        OWNER = "owner", "Written by the owner"
        FILE = "file", "Uploaded file"
        GENERATED = "generated", "Proposed by the model"
        DEMO = "demo", "Demo store's file"

    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="search_synonyms")
    language = models.CharField(max_length=2, choices=Language.choices)
    term = models.CharField(max_length=100, help_text="The shopper's word or words, as written (any case, accents).")
    replacement = models.CharField(max_length=200, help_text="The store's own word or words the term means.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACCEPTED)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.OWNER)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["store", "language", "term"]
        constraints = [
            models.UniqueConstraint(fields=["store", "language", "term"], name="search_synonym_unique_per_store")
        ]

    def __str__(self) -> str:
        return f"{self.language}: {self.term} -> {self.replacement}"
