"""Time a large Shopify CSV imported through the studio's upload path, and the progress the page would see.

    python -m tools.studio_import_timing --rows 20000 [--variants 4] [--embed] [--keep PATH]

Makes a scratch SQLite database (migrated; the project's own is never touched), a store and its owner, writes a
Shopify product CSV of ``--rows`` rows (``--variants`` rows per product: sizes), and posts it to
/studio/<store>/catalog/upload with Django's test client, as the owner's browser would. Celery runs eagerly (the
embedded defaults), so the import runs inside that request; a second thread polls the run's progress endpoint
meanwhile, as the page does, and every change it sees is printed. Without ``--embed`` the embedding task queued
after the import is skipped (it is timed on its own with ``--embed``).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HEADER = [
    "Handle", "Title", "Body (HTML)", "Vendor", "Type", "Tags", "Published", "Option1 Name", "Option1 Value",
    "Variant SKU", "Variant Inventory Qty", "Variant Inventory Policy", "Variant Price", "Variant Compare At Price",
    "Image Src", "Status",
]
SIZES = ["XS", "S", "M", "L", "XL", "XXL", "3XL", "4XL"]
KINDS = ["Jacket", "Boots", "Tent", "Backpack", "Scarf", "Gloves", "Stove", "Lamp"]


def write_csv(path: Path, rows: int, variants: int) -> int:
    """A Shopify export of ``rows`` rows: products of ``variants`` sizes each. Returns the product count."""
    products = (rows + variants - 1) // variants
    written = 0
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for n in range(products):
            kind = KINDS[n % len(KINDS)]
            handle_name = f"{kind.lower()}-{n:06d}"
            for v in range(variants):
                if written == rows:
                    break
                first = v == 0
                writer.writerow([
                    handle_name,
                    f"Trail {kind} {n}" if first else "",
                    f"<p>A sturdy {kind.lower()} for the trail, model {n}.</p>" if first else "",
                    "Northpeak" if first else "",
                    kind if first else "",
                    f"outdoor, {kind.lower()}, model-{n % 50}" if first else "",
                    "true" if first else "",
                    "Size" if first else "",
                    SIZES[v % len(SIZES)],
                    f"{handle_name}-{SIZES[v % len(SIZES)]}".upper(),
                    (n * 7 + v) % 40,
                    "deny",
                    f"{20 + n % 180}.{(n * 13) % 100:02d}",
                    "",
                    f"https://cdn.example.com/{handle_name}.jpg" if first else "",
                    "active" if first else "",
                ])
                written += 1
    return products


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--embed", action="store_true", help="also run the embedding task queued after the import")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between progress polls (the page: 0.7)")
    parser.add_argument("--keep", help="write the CSV here (and keep it)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="studio-import-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'db.sqlite3'}"
    os.environ.pop("REDIS_URL", None)  # eager Celery, as the embedded defaults
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
    os.environ.setdefault("ENGINE_AUTOSTART", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from catalog.models import ImportRun, Store
    from shop_assistant.console.models import StoreMembership

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", verbosity=0)
    store = Store.objects.create(slug="timing", name="Timing")
    owner = get_user_model().objects.create_user("timing-owner", "o@example.com", "x")
    StoreMembership.objects.create(user=owner, store=store, role="owner")
    if not args.embed:
        import catalog.tasks

        catalog.tasks.embed_store_products.delay = lambda *a, **k: None

    path = Path(args.keep) if args.keep else scratch / "catalog.csv"
    products = write_csv(path, args.rows, args.variants)
    print(f"{args.rows} rows, {products} products, {path.stat().st_size / 1e6:.1f} MB: {path}")

    seen: list[tuple[float, str, str, int, int]] = []
    stop = threading.Event()
    started = time.perf_counter()

    def poll() -> None:
        client = Client()
        client.force_login(owner)
        last = None
        while True:
            final = stop.is_set()  # one more poll after the request: the page's last word on the run
            run = ImportRun.objects.filter(store=store).order_by("-pk").first()
            if run is not None:
                state = client.get(f"/studio/{store.slug}/catalog/runs/{run.pk}/").json()
                key = (state["status"], state["phase"], state["done"], state["total"])
                if key != last:
                    seen.append((time.perf_counter() - started, *key))
                    last = key
            if final:
                return
            stop.wait(args.poll)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    client = Client()
    client.force_login(owner)
    with path.open("rb") as handle:
        response = client.post(f"/studio/{store.slug}/catalog/upload", {"file": handle})
    elapsed = time.perf_counter() - started
    stop.set()
    poller.join()
    run = ImportRun.objects.filter(store=store).order_by("-pk").first()
    if response.status_code != 302 or run is None:
        sys.exit(f"upload refused: HTTP {response.status_code}")
    print(f"request: {elapsed:.1f} s (HTTP {response.status_code}); run #{run.pk} {run.status}")
    print(f"import (started -> finished): {(run.finished_at - run.started_at).total_seconds():.1f} s; "
          f"upsert alone: {run.summary.get('seconds')} s; counts: {run.counts}")
    if "embeddings" in run.summary:
        print(f"embeddings: {run.summary['embeddings']}")
    print(f"progress updates seen by polling every {args.poll} s: {len(seen)}")
    for t, status, phase, done, total in seen:
        print(f"  {t:7.1f} s  {status:9s} {phase or '-':8s} {done}/{total}")


if __name__ == "__main__":
    main()
