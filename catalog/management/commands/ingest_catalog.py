"""python manage.py ingest_catalog <path-or-url> [--store SLUG] [--format shopify|json|sql] [--mapping FILE]

The operator's tool: its runs may read any file, database or URL the operator names (``operator=True``); the
lists of catalog.outbound (CATALOG_SQL_HOSTS, CATALOG_FEED_ALLOWED_NETWORKS) bind what store owners start.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from catalog.embeddings import embed_products
from catalog.ingest import SourceError, describe_source, detect_format, execute_run, load_mapping
from catalog.models import ImportRun, Store

MAX_PRINTED_ERRORS = 50


class Command(BaseCommand):
    help = (
        "Import a catalog (Shopify product CSV, JSON, or a SQL database through SQLAlchemy) into a store: "
        "upserts by handle/SKU, reports bad rows, then computes embeddings."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("source", help="a file path, an http(s) URL, or a SQLAlchemy database URL")
        parser.add_argument("--store", help="the store's slug (may be left out when there is only one store)")
        parser.add_argument("--format", choices=[f.value for f in ImportRun.Format], help="default: from the name")
        parser.add_argument("--mapping", help="JSON mapping of tables/columns to fields (SQL sources)")
        parser.add_argument("--no-embed", action="store_true", help="skip computing embeddings")
        parser.add_argument(
            "--background",
            action="store_true",
            help="run it as a Celery task on a worker and follow its progress (needs REDIS_URL)",
        )

    def _store(self, slug: str | None) -> Store:
        if slug:
            store = Store.objects.filter(slug=slug).first()
            if store is None:
                known = ", ".join(Store.objects.values_list("slug", flat=True)) or "none yet"
                raise CommandError(f"no store {slug!r} (stores: {known}); create it in the admin first")
            return store
        stores = list(Store.objects.all()[:2])
        if len(stores) != 1:
            raise CommandError("say which store with --store SLUG" if stores else "there is no store yet; create one")
        return stores[0]

    def handle(self, *args, **options) -> None:
        store = self._store(options["store"])
        source = options["source"]
        try:
            fmt = options["format"] or detect_format(source)
            mapping = load_mapping(options["mapping"]) if options["mapping"] else None
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        if fmt == "sql" and mapping is None:
            raise CommandError("a SQL import needs --mapping FILE")
        run = ImportRun.objects.create(store=store, format=fmt, source=source, mapping=mapping)
        quiet = options["verbosity"] == 0
        self.stdout.write(f"Importing {describe_source(source)} ({fmt}) into {store.slug}: run #{run.pk}")
        started = time.perf_counter()
        if options["background"]:
            self._follow_task(run, embed=not options["no_embed"], quiet=quiet)
        else:
            self._run_here(run, embed=not options["no_embed"], quiet=quiet)
        run.refresh_from_db()
        if run.status == ImportRun.Status.FAILED:
            raise CommandError(f"import #{run.pk} failed: {run.message}")
        self._print_result(run, time.perf_counter() - started)

    def _bar(self, desc: str, total: int | None, quiet: bool) -> tqdm:
        # The raw stream: Django's wrapper would end every redraw with a newline.
        return tqdm(total=total, desc=desc, unit="product", file=self.stderr._out, disable=quiet, leave=True)

    def _run_here(self, run: ImportRun, embed: bool, quiet: bool) -> None:
        bar: tqdm | None = None

        def progress(phase: str, done: int, total: int) -> None:
            nonlocal bar
            if phase != "writing":
                return
            if bar is None:
                bar = self._bar("importing", total, quiet)
            bar.update(done - bar.n)  # update() redraws at most every 0.1 s; refresh() would redraw every product

        try:
            result = execute_run(run, progress=progress, operator=True)
        finally:
            if bar is not None:
                bar.close()
        if result is None or not embed:
            return
        embed_bar: tqdm | None = None

        def embed_progress(done: int, total: int) -> None:
            nonlocal embed_bar
            if embed_bar is None:
                embed_bar = self._bar("embedding", total, quiet or total == 0)
            embed_bar.update(done - embed_bar.n)

        try:
            outcome = embed_products(run.store, progress=embed_progress)
        finally:
            if embed_bar is not None:
                embed_bar.close()
        run.summary = {**run.summary, "embeddings": outcome}
        run.save(update_fields=["summary"])

    def _follow_task(self, run: ImportRun, embed: bool, quiet: bool) -> None:
        from catalog.tasks import ingest_catalog

        if settings.CELERY_TASK_ALWAYS_EAGER:
            self.stderr.write("REDIS_URL is not set: the task runs here, not on a worker.")
        ingest_catalog.delay(run.pk, embed=embed, operator=True)
        bar = self._bar("importing", None, quiet)
        try:
            while True:
                run.refresh_from_db()
                if run.total:
                    bar.total = run.total
                bar.n = run.processed
                bar.refresh()
                if run.status in (ImportRun.Status.SUCCEEDED, ImportRun.Status.FAILED):
                    break
                time.sleep(0.5)
        finally:
            bar.close()

    def _print_result(self, run: ImportRun, seconds: float) -> None:
        from catalog.ingest.upsert import ImportResult

        result = ImportResult(summary=run.summary, errors=run.errors)
        self.stdout.write(result.summary_line())
        missing = run.summary.get("missing_products", [])
        if missing:
            shown = ", ".join(missing[:20]) + (" ..." if len(missing) > 20 else "")
            self.stdout.write(f"in the store but not in this import: {shown}")
        embedded = run.summary.get("embeddings")
        if embedded:
            self.stdout.write(
                f"embeddings: {embedded['embedded']} computed, {embedded['unchanged']} unchanged "
                f"({embedded['seconds']:.1f}s)"
            )
        if run.errors:
            self.stdout.write(self.style.WARNING(f"{len(run.errors)} rows refused:"))
            for error in run.errors[:MAX_PRINTED_ERRORS]:
                label = " ".join(part for part in (error.get("handle"), error.get("sku")) if part)
                self.stdout.write(f"  {error['where']}: {error['reason']}" + (f" [{label}]" if label else ""))
            if len(run.errors) > MAX_PRINTED_ERRORS:
                self.stdout.write(f"  ... {len(run.errors) - MAX_PRINTED_ERRORS} more in the admin (import #{run.pk})")
        self.stdout.write(self.style.SUCCESS(f"Done in {seconds:.2f}s (import #{run.pk})."))
