"""Admin for stores, products, variants, images, documents and imports (with the upload form)."""

from __future__ import annotations

import logging

from django.contrib import admin, messages
from django.db import models, transaction
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from .forms import ImportRunForm
from .ingest import describe_source
from .models import ImportRun, Product, ProductImage, Store, StoreDocument, Variant

logger = logging.getLogger(__name__)

# Links typed without a scheme are https (and Django 6 makes that the default anyway).
URL_FIELDS = {models.URLField: {"assume_scheme": "https"}}


@admin.register(Store)
class StoreAdmin(admin.ModelAdmin):
    formfield_overrides = URL_FIELDS
    list_display = ("name", "slug", "currency", "base_url", "product_count", "created_at")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    actions = ["compute_embeddings"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_products=Count("products"))

    @admin.display(description="products", ordering="_products")
    def product_count(self, obj: Store) -> int:
        return obj._products

    @admin.action(description="Compute embeddings of new and changed products")
    def compute_embeddings(self, request, queryset) -> None:
        from .tasks import embed_store_products

        for store in queryset:
            embed_store_products.delay(store.pk)
        self.message_user(request, f"Embedding queued for {queryset.count()} store(s).")


class VariantInline(admin.TabularInline):
    formfield_overrides = URL_FIELDS
    model = Variant
    extra = 0
    fields = (
        "sku", "option1", "option2", "option3", "price", "compare_at_price", "currency",
        "inventory_quantity", "inventory_policy", "position", "image_src",
    )


class ProductImageInline(admin.TabularInline):
    formfield_overrides = URL_FIELDS
    model = ProductImage
    extra = 0
    fields = ("src", "position", "alt_text")


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    formfield_overrides = URL_FIELDS
    list_display = ("title", "handle", "store", "vendor", "product_type", "status", "variant_count", "embedded")
    list_filter = ("store", "status", "product_type", "vendor")
    search_fields = ("handle", "title", "tags", "vendor", "variants__sku")
    readonly_fields = ("embedding_hash", "embedded_at", "created_at", "updated_at")
    inlines = [VariantInline, ProductImageInline]
    fieldsets = (
        (None, {"fields": ("store", "handle", "title", "status", "vendor", "product_type", "tags", "option_names")}),
        ("Description", {"fields": ("description_html", "description")}),
        ("Search", {"classes": ("collapse",), "fields": ("embedding_hash", "embedded_at", "created_at", "updated_at")}),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding").annotate(_variants=Count("variants"))

    @admin.display(description="variants", ordering="_variants")
    def variant_count(self, obj: Product) -> int:
        return obj._variants

    @admin.display(description="embedded", boolean=True)
    def embedded(self, obj: Product) -> bool:
        return bool(obj.embedding_hash)

    def save_model(self, request, obj, form, change):
        from .ingest.records import html_to_text

        # The plain text is what search and the assistant read: keep it in step with edited HTML.
        if "description_html" in form.changed_data and obj.description_html.strip():
            obj.description = html_to_text(obj.description_html)
        super().save_model(request, obj, form, change)

    def save_formset(self, request, form, formset, change):
        instances = formset.save(commit=False)
        for instance in instances:
            if isinstance(instance, Variant):
                instance.store_id = form.instance.store_id
            instance.save()
        for instance in formset.deleted_objects:
            instance.delete()
        formset.save_m2m()


@admin.register(Variant)
class VariantAdmin(admin.ModelAdmin):
    formfield_overrides = URL_FIELDS
    list_display = (
        "sku", "product", "option_summary", "price", "currency", "inventory_quantity", "inventory_policy", "in_stock",
    )
    list_editable = ("price", "inventory_quantity")
    list_filter = ("store", "inventory_policy", "currency")
    search_fields = ("sku", "product__title", "product__handle")
    list_select_related = ("product",)
    raw_id_fields = ("product",)
    readonly_fields = ("created_at", "updated_at")

    @admin.display(description="options")
    def option_summary(self, obj: Variant) -> str:
        return obj.title

    @admin.display(description="in stock", boolean=True)
    def in_stock(self, obj: Variant) -> bool:
        return obj.in_stock

    def save_model(self, request, obj, form, change):
        obj.store_id = obj.product.store_id
        super().save_model(request, obj, form, change)


@admin.register(ProductImage)
class ProductImageAdmin(admin.ModelAdmin):
    formfield_overrides = URL_FIELDS
    list_display = ("src", "product", "position")
    search_fields = ("src", "product__title", "product__handle")
    list_filter = ("product__store",)
    raw_id_fields = ("product",)


@admin.register(StoreDocument)
class StoreDocumentAdmin(admin.ModelAdmin):
    list_display = ("title", "kind", "store", "updated_at")
    list_filter = ("store", "kind")
    search_fields = ("title", "body")


@admin.register(ImportRun)
class ImportRunAdmin(admin.ModelAdmin):
    """The add view is the upload form; saving it queues the import task. Runs are read-only afterwards."""

    form = ImportRunForm
    list_display = ("id", "store", "format", "shown_source", "status", "progress", "outcome", "created_at")
    list_filter = ("status", "format", "store")
    readonly_fields = (
        "store", "format", "shown_source", "status", "progress", "outcome", "error_table", "message",
        "task_id", "created_by", "created_at", "started_at", "finished_at",
    )

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("store", "import_format", "file", "database_url", "mapping_file", "mapping_text", "embed")
        return self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def has_change_permission(self, request, obj=None) -> bool:
        # A run is a record of what happened: view it, never edit it.
        return False if obj is not None else super().has_change_permission(request, obj)

    @admin.display(description="source")
    def shown_source(self, obj: ImportRun) -> str:
        return describe_source(obj.source)

    @admin.display(description="progress")
    def progress(self, obj: ImportRun) -> str:
        phase = f" ({obj.phase})" if obj.phase else ""
        return f"{obj.processed}/{obj.total} products, {obj.percent}%{phase}"

    @admin.display(description="summary")
    def outcome(self, obj: ImportRun) -> str:
        if not obj.summary:
            return "-"
        p = obj.summary.get("products", {})
        v = obj.summary.get("variants", {})
        text = (
            f"products {p.get('created', 0)} created, {p.get('updated', 0)} updated, "
            f"{p.get('unchanged', 0)} unchanged, {p.get('failed', 0)} failed; "
            f"variants {v.get('created', 0)}/{v.get('updated', 0)}/{v.get('unchanged', 0)}/{v.get('failed', 0)}"
        )
        missing = obj.summary.get("missing_products_count", 0)
        if missing:
            text += f"; {missing} products not in this import (kept)"
        embedded = obj.summary.get("embeddings")
        if embedded:
            text += f"; {embedded.get('embedded', 0)} embedded"
        return text

    @admin.display(description="row errors")
    def error_table(self, obj: ImportRun) -> str:
        if not obj.errors:
            return "none"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (e.get("where", ""), e.get("handle", ""), e.get("sku", ""), e.get("reason", ""))
                for e in obj.errors[:500]
            ),
        )
        more = f" (first 500 of {len(obj.errors)})" if len(obj.errors) > 500 else ""
        return format_html(
            "<table><thead><tr><th>where</th><th>handle</th><th>SKU</th><th>reason</th></tr></thead>"
            "<tbody>{}</tbody></table>{}",
            rows,
            more,
        )

    def save_model(self, request, obj: ImportRun, form, change) -> None:
        obj.created_by = request.user
        super().save_model(request, obj, form, change)
        embed = form.cleaned_data.get("embed", True)
        transaction.on_commit(lambda: _queue_import(obj.pk, embed))

    def response_add(self, request, obj, post_url_continue=None):
        obj.refresh_from_db()
        if obj.status == ImportRun.Status.FAILED:
            self.message_user(request, f"Import #{obj.pk} failed: {obj.message}", messages.ERROR)
        elif obj.status == ImportRun.Status.SUCCEEDED:
            self.message_user(request, f"Import #{obj.pk} finished: {self.outcome(obj)}", messages.SUCCESS)
        else:
            self.message_user(request, f"Import #{obj.pk} queued; this page shows its progress.", messages.INFO)
        return HttpResponseRedirect(reverse("admin:catalog_importrun_change", args=[obj.pk]))


def _queue_import(run_id: int, embed: bool) -> None:
    from .tasks import ingest_catalog

    try:
        ingest_catalog.delay(run_id, embed=embed)
    except Exception as exc:  # noqa: BLE001 - the broker may be down; the run must say so, not hang "pending"
        logger.exception("could not queue import run %s", run_id)
        ImportRun.objects.filter(pk=run_id, status=ImportRun.Status.PENDING).update(
            status=ImportRun.Status.FAILED, message=f"could not queue the import: {exc}", finished_at=timezone.now()
        )
