"""Write a parsed catalog into a store: upsert by handle and SKU, never delete, report everything.

Products are matched by handle; variants by SKU, else (when the source has no SKUs, as in the Shopify samples)
by their option values within the product. A row is written only when a field differs, so a re-run of the
same file reports everything unchanged. Products and variants that the store has but the import lacks are
listed in the summary, not removed (a feed synced with ``archive_missing`` archives the missing products).
Each product is written in its own savepoint: one bad product never rolls back the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from ..models import Product, ProductImage, Store, StoreDocument, Variant
from .records import ParsedCatalog, ProductRecord, RowError, VariantRecord, html_to_text

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]
CHUNK = 100  # products per transaction: SQLite commits are what makes imports slow
MAX_LISTED_MISSING = 1000


def _counts() -> dict[str, int]:
    return {"created": 0, "updated": 0, "unchanged": 0, "failed": 0}


@dataclass
class ImportResult:
    summary: dict
    errors: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary_line(self) -> str:
        """One line per kind for people: "products: 3 created, 1 updated, 20 unchanged, 1 failed"."""
        lines = []
        for kind in ("products", "variants", "images", "documents"):
            counts = self.summary.get(kind, {})
            parts = [f"{counts.get(key, 0)} {key}" for key in ("created", "updated", "unchanged", "failed")]
            if kind in ("images", "documents"):
                parts = parts[:3]
            if kind == "documents" and not any(counts.values()):
                continue
            lines.append(f"{kind}: " + ", ".join(parts))
        missing = self.summary.get("missing_products_count", 0)
        archived = self.summary.get("archived", 0)
        if archived:
            lines.append(f"not in this import (archived): {archived} products")
        elif missing:
            lines.append(f"not in this import (kept, not deleted): {missing} products")
        missing_variants = self.summary.get("missing_variants_count", 0)
        if missing_variants:
            lines.append(f"variants not in this import (kept): {missing_variants}")
        return "\n".join(lines)


@dataclass
class _Written:
    outcome: str
    product: Product
    variants: list[Variant]
    images: dict[str, ProductImage]
    variant_outcomes: dict[str, int]
    image_outcomes: dict[str, int]
    missing_variants: list[Variant]


def _option_key(options: tuple[str, str, str] | list[str]) -> tuple[str, str, str]:
    return tuple(value.strip().lower() for value in options)  # type: ignore[return-value]


class _Upserter:
    def __init__(self, store: Store, parsed: ParsedCatalog, archive_missing: bool = False) -> None:
        self.store = store
        self.parsed = parsed
        self.archive_missing = archive_missing
        self.errors: list[RowError] = list(parsed.errors)
        self.products = _counts()
        self.variants = _counts()
        self.images = {"created": 0, "updated": 0, "unchanged": 0}
        self.documents = {"created": 0, "updated": 0, "unchanged": 0}
        self.missing_variants: list[str] = []
        self.products["failed"] += parsed.orphan_failures
        self.variants["failed"] += parsed.orphan_variant_failures
        self.by_handle: dict[str, Product] = {p.handle: p for p in Product.objects.filter(store=store)}
        self.variants_by_product: dict[int, list[Variant]] = {}
        self.by_sku: dict[str, Variant] = {}
        for variant in Variant.objects.filter(store=store):
            self.variants_by_product.setdefault(variant.product_id, []).append(variant)
            self.by_sku[variant.sku] = variant
        self.images_by_product: dict[int, dict[str, ProductImage]] = {}
        for image in ProductImage.objects.filter(product__store=store):
            self.images_by_product.setdefault(image.product_id, {})[image.src] = image

    # --- checks that need the whole import -------------------------------------------------------
    def _check_record(self, record: ProductRecord, skus_in_import: dict[str, str]) -> None:
        seen_options: dict[tuple, VariantRecord] = {}
        seen_skus: dict[str, VariantRecord] = {}
        kept = []
        for variant in record.variants:
            key = _option_key(variant.options)
            problem = None
            if key in seen_options:
                shown = " / ".join(v for v in variant.options if v) or "no options"
                problem = f"same options ({shown}) as the variant on {seen_options[key].where}"
            elif variant.sku in seen_skus:
                problem = f"SKU {variant.sku!r} already used by the variant on {seen_skus[variant.sku].where}"
            elif variant.sku and skus_in_import.get(variant.sku, record.handle) != record.handle:
                problem = f"SKU {variant.sku!r} is also used by product {skus_in_import[variant.sku]!r} in this import"
            else:
                existing = self.by_sku.get(variant.sku) if variant.sku else None
                owner = self.by_handle.get(record.handle)
                if existing is not None and (owner is None or existing.product_id != owner.pk):
                    problem = f"SKU {variant.sku!r} already belongs to another product of this store"
            if problem:
                self.errors.append(
                    RowError(variant.line, variant.where, problem, handle=record.handle, sku=variant.sku)
                )
                record.variant_failures += 1
                continue
            seen_options[key] = variant
            if variant.sku:
                seen_skus[variant.sku] = variant
                skus_in_import[variant.sku] = record.handle
            kept.append(variant)
        record.variants = kept
        if not record.variants and not record.fatal:
            reason = "no valid variant (every variant row was refused)" if record.variant_failures else "no variants"
            record.fatal.append(reason)
            self.errors.append(RowError(record.line, record.where, reason, handle=record.handle))

    # --- writing ---------------------------------------------------------------------------------
    def _generated_sku(self, record: ProductRecord, variant: VariantRecord, taken: set[str]) -> str:
        base = slugify(" ".join([record.handle, *[v for v in variant.options if v]]))[:240] or "variant"
        sku, n = base, 2
        while sku in self.by_sku or sku in taken:
            sku, n = f"{base}-{n}", n + 1
        return sku

    def _write_product(self, record: ProductRecord) -> _Written:
        description = record.description if record.description is not None else html_to_text(record.description_html)
        wanted = {
            "title": record.title[:255],
            "description_html": record.description_html,
            "description": description,
            "vendor": record.vendor[:255],
            "product_type": record.product_type[:255],
            "tags": record.tags,
            "status": record.status,
            "option_names": record.option_names,
        }
        product = self.by_handle.get(record.handle)
        outcome = "unchanged"
        if product is None:
            product = Product.objects.create(store=self.store, handle=record.handle, **wanted)
            outcome = "created"
        else:
            changed = [name for name, value in wanted.items() if getattr(product, name) != value]
            if changed:
                for name in changed:
                    setattr(product, name, wanted[name])
                product.save(update_fields=[*changed, "updated_at"])
                outcome = "updated"

        existing = list(self.variants_by_product.get(product.pk, [])) if outcome != "created" else []
        by_options = {_option_key((v.option1, v.option2, v.option3)): v for v in existing}
        matched: set[int] = set()
        variants: list[Variant] = []
        new_skus: set[str] = set()
        variant_outcomes = _counts()
        for position, incoming in enumerate(record.variants, 1):
            variant = self.by_sku.get(incoming.sku) if incoming.sku else None
            if variant is None or variant.product_id != product.pk:
                variant = by_options.get(_option_key(incoming.options))
            if variant is not None and variant.pk in matched:
                variant = None
            fields = {
                "option1": incoming.options[0][:255],
                "option2": incoming.options[1][:255],
                "option3": incoming.options[2][:255],
                "price": incoming.price,
                "compare_at_price": incoming.compare_at_price,
                "currency": (incoming.currency or self.store.currency)[:3],
                "inventory_quantity": incoming.inventory_quantity,
                "inventory_policy": incoming.inventory_policy,
                "position": position,
                "image_src": incoming.image_src[:1000],
            }
            if incoming.sku:
                fields["sku"] = incoming.sku[:255]
            if variant is None:
                sku = fields.pop("sku", None) or self._generated_sku(record, incoming, new_skus)
                variant = Variant.objects.create(store=self.store, product=product, sku=sku, **fields)
                variant_outcomes["created"] += 1
            else:
                changed = [name for name, value in fields.items() if getattr(variant, name) != value]
                if changed:
                    for name in changed:
                        setattr(variant, name, fields[name])
                    variant.save(update_fields=[*changed, "updated_at"])
                    variant_outcomes["updated"] += 1
                else:
                    variant_outcomes["unchanged"] += 1
            matched.add(variant.pk)
            new_skus.add(variant.sku)
            variants.append(variant)
        kept_missing = [v for v in existing if v.pk not in matched]

        images = dict(self.images_by_product.get(product.pk, {})) if outcome != "created" else {}
        image_outcomes = {"created": 0, "updated": 0, "unchanged": 0}
        seen_src: set[str] = set()
        for index, incoming in enumerate(record.images, 1):
            if incoming.src in seen_src:
                continue  # Shopify repeats variant images as product images
            seen_src.add(incoming.src)
            position = incoming.position or index
            image = images.get(incoming.src)
            if image is None:
                images[incoming.src] = ProductImage.objects.create(
                    product=product, src=incoming.src[:1000], position=position, alt_text=incoming.alt_text[:500]
                )
                image_outcomes["created"] += 1
            elif (image.position, image.alt_text) != (position, incoming.alt_text[:500]):
                image.position, image.alt_text = position, incoming.alt_text[:500]
                image.save(update_fields=["position", "alt_text"])
                image_outcomes["updated"] += 1
            else:
                image_outcomes["unchanged"] += 1

        children_changed = any(
            outcomes[key] for outcomes in (variant_outcomes, image_outcomes) for key in ("created", "updated")
        )
        if outcome == "unchanged" and children_changed:
            outcome = "updated"
        return _Written(
            outcome, product, variants + kept_missing, images, variant_outcomes, image_outcomes, kept_missing
        )

    def run(self, progress: ProgressCallback | None) -> ImportResult:
        started = time.perf_counter()
        skus_in_import: dict[str, str] = {}
        for record in self.parsed.products:
            if not record.fatal:
                self._check_record(record, skus_in_import)
        records = self.parsed.products
        total = len(records)
        if progress:
            progress(0, total)
        done = 0
        for start in range(0, total, CHUNK):
            with transaction.atomic():
                for record in records[start : start + CHUNK]:
                    self._one(record)
                    done += 1
                    if progress:
                        progress(done, total)
        with transaction.atomic():
            self._documents()

        handles = {record.handle for record in records}
        missing = sorted(handle for handle in self.by_handle if handle not in handles)
        archived = 0
        if self.archive_missing and missing:
            # A full feed no longer listing a product means the store stopped selling it: archived products
            # leave search and the assistant's answers but keep their history. A feed that failed to parse any
            # product archives nothing (an empty or broken file is not "the store sells nothing").
            if records:
                stale = Product.objects.filter(store=self.store, handle__in=missing).exclude(
                    status=Product.Status.ARCHIVED
                )
                archived = stale.update(status=Product.Status.ARCHIVED, updated_at=timezone.now())
        summary = {
            "products": self.products,
            "variants": self.variants,
            "images": self.images,
            "documents": self.documents,
            "missing_products": missing[:MAX_LISTED_MISSING],
            "missing_products_count": len(missing),
            "missing_variants": self.missing_variants[:MAX_LISTED_MISSING],
            "missing_variants_count": len(self.missing_variants),
            "archived": archived,
            "errors": len(self.errors),
            "seconds": round(time.perf_counter() - started, 3),
        }
        return ImportResult(summary=summary, errors=[error.as_dict() for error in self.errors])

    def _one(self, record: ProductRecord) -> None:
        if record.fatal:
            self.products["failed"] += 1
            self.variants["failed"] += len(record.variants) + record.variant_failures
            return
        try:
            with transaction.atomic():
                written = self._write_product(record)
        except (IntegrityError, DatabaseError) as exc:
            logger.warning("catalog import: product %s failed: %s", record.handle, exc)
            reason = f"database refused the product: {exc}"
            self.errors.append(RowError(record.line, record.where, reason, handle=record.handle))
            self.products["failed"] += 1
            self.variants["failed"] += len(record.variants) + record.variant_failures
            return
        # Caches change only once the savepoint has been released, so a rolled-back product leaves no trace.
        product = written.product
        self.by_handle[record.handle] = product
        self.variants_by_product[product.pk] = written.variants
        for variant in written.variants:
            self.by_sku[variant.sku] = variant
        self.images_by_product[product.pk] = written.images
        self.products[written.outcome] += 1
        for key, value in written.variant_outcomes.items():
            self.variants[key] += value
        self.variants["failed"] += record.variant_failures
        for key, value in written.image_outcomes.items():
            self.images[key] += value
        self.missing_variants.extend(f"{record.handle}: {variant.sku}" for variant in written.missing_variants)

    def _documents(self) -> None:
        existing = {(d.kind, d.title): d for d in StoreDocument.objects.filter(store=self.store)}
        for record in self.parsed.documents:
            document = existing.get((record.kind, record.title[:200]))
            if document is None:
                existing[(record.kind, record.title[:200])] = StoreDocument.objects.create(
                    store=self.store, kind=record.kind, title=record.title[:200], body=record.body
                )
                self.documents["created"] += 1
            elif document.body != record.body:
                document.body = record.body
                document.save(update_fields=["body", "updated_at"])
                self.documents["updated"] += 1
            else:
                self.documents["unchanged"] += 1


def apply_catalog(
    store: Store, parsed: ParsedCatalog, progress: ProgressCallback | None = None, archive_missing: bool = False
) -> ImportResult:
    """Upsert ``parsed`` into ``store``; ``progress(done, total)`` is called after each product. With
    ``archive_missing`` the store's products that ``parsed`` does not list are archived."""
    return _Upserter(store, parsed, archive_missing).run(progress)
