"""python manage.py import_orders <store> <file> [--format shopify|json]
python manage.py import_orders <store> --sql URL --mapping FILE

The operator's tool: it reads any file or database the operator names (the allow-list of ``catalog.outbound``
binds what store owners save in the studio). Recorded like the studio's imports: the studio shows its freshness.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from catalog.ingest import SourceError, detect_format, load_mapping
from catalog.models import Store
from shop_assistant.orders.imports import run_import
from shop_assistant.orders.ingest import validate_mapping

MAX_PRINTED_ERRORS = 50


class Command(BaseCommand):
    help = "Import a store's orders: a Shopify orders CSV, a JSON feed, or the store's database (--sql, --mapping)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("store", help="the store's slug")
        parser.add_argument("file", nargs="?", help="a Shopify orders CSV export or a JSON feed (path or URL)")
        parser.add_argument("--sql", metavar="URL", help="a SQLAlchemy URL of the store's database, read-only")
        parser.add_argument("--mapping", help="JSON mapping of the database's tables and columns (with --sql)")
        parser.add_argument("--format", choices=["shopify", "json"], help="default: from the file's name")

    def handle(self, *args, **options) -> None:
        store = Store.objects.filter(slug=options["store"]).first()
        if store is None:
            known = ", ".join(Store.objects.values_list("slug", flat=True)) or "none yet"
            raise CommandError(f"no store {options['store']!r} (stores: {known})")
        if bool(options["file"]) == bool(options["sql"]):
            raise CommandError("name a file, or a database with --sql URL --mapping FILE")
        try:
            if options["sql"]:
                if not options["mapping"]:
                    raise CommandError("a database import needs --mapping FILE")
                fmt, source, mapping = "sql", options["sql"], load_mapping(options["mapping"], validate_mapping)
            else:
                fmt, source, mapping = options["format"] or detect_format(options["file"]), options["file"], None
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        record = run_import(store, fmt, source, mapping=mapping, restricted=False)
        if not record.succeeded:
            raise CommandError(f"import of {record.source} failed: {record.message}")
        for error in record.errors[:MAX_PRINTED_ERRORS]:
            self.stderr.write(f"refused {error['where']}: {error['reason']}")
        self.stdout.write(f"{store.slug}: {record.created} added, {record.updated} updated, {record.failed} refused "
                          f"(import #{record.pk}).")
