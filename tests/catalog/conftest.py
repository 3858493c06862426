"""Catalog fixtures: independent counts of the Shopify samples, and an embedded sample store per module.

Embedding the samples is the slow part, so it happens once per session: the vectors are remembered and
reused by the next module that builds the store.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SAMPLE_FILES = ("apparel.csv", "home-and-garden.csv", "jewelery.csv")


@dataclass(frozen=True)
class SampleCounts:
    products: int
    variants: int
    images: int
    rows: int


def count_shopify_export(path: Path) -> SampleCounts:
    """Count products/variants/images straight from the CSV, without any of catalog's code."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    handles = {row["Handle"] for row in rows if row["Handle"].strip()}
    option_columns = ("Option1 Value", "Option2 Value", "Option3 Value")
    variants = [row for row in rows if row["Variant Price"].strip() or any(row[c].strip() for c in option_columns)]
    images = {(row["Handle"], row["Image Src"]) for row in rows if row["Image Src"].strip()}
    return SampleCounts(products=len(handles), variants=len(variants), images=len(images), rows=len(rows))


@pytest.fixture(scope="session")
def embedding_model():
    """Loads all-MiniLM-L6-v2 once for the whole session; returns the seconds the load took."""
    from catalog import embeddings

    started = time.perf_counter()
    embeddings.get_model()
    return time.perf_counter() - started


@pytest.fixture(scope="session")
def product_vectors() -> dict:
    """Product text -> vector, shared by the modules that build the sample store (the model is slow here)."""
    return {}


@pytest.fixture(scope="module")
def sample_store(django_db_setup, django_db_blocker, shopify_samples_dir, embedding_model, product_vectors):
    """A store holding all three Shopify samples, with embeddings. Yields (store, timings).

    Committed for the module's tests (they only read it, each in its own rolled-back transaction) and
    deleted after the module, so other apps' tests never see it.
    """
    import numpy as np

    from catalog import embeddings, search
    from catalog.ingest import apply_catalog, read_source
    from catalog.models import Store

    real_encode = embeddings.encode

    def remembering_encode(texts: list[str], batch_size: int = embeddings.BATCH_SIZE) -> np.ndarray:
        missing = [text for text in texts if text not in product_vectors]
        if missing:
            product_vectors.update(zip(missing, real_encode(missing, batch_size=batch_size)))
        return np.stack([product_vectors[text] for text in texts])

    timings: dict[str, float] = {"model_load_s": embedding_model}
    with django_db_blocker.unblock():
        store = Store.objects.create(slug="shopify-samples", name="Shopify samples", base_url="https://samples.example")
        try:
            for name in SAMPLE_FILES:
                started = time.perf_counter()
                result = apply_catalog(store, read_source("shopify", str(shopify_samples_dir / name)))
                timings[f"ingest_{name}_s"] = time.perf_counter() - started
                assert not result.errors, result.errors
            timings["embed_fresh"] = not product_vectors  # False: another module computed the vectors
            patch = pytest.MonkeyPatch()
            patch.setattr(embeddings, "encode", remembering_encode)
            try:
                outcome = embeddings.embed_products(store)
            finally:
                patch.undo()
            timings["embed_s"] = outcome["seconds"]
            timings["embedded"] = outcome["embedded"]
            search.clear_index()
            yield store, timings
        finally:
            store.delete()
            search.clear_index()
