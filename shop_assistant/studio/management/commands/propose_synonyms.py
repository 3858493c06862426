"""python manage.py propose_synonyms --store SLUG [--languages es,fr,de]"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from catalog.models import Store
from shop_assistant.runtime import engine_service
from shop_assistant.studio.synonym_proposals import CannotTranslate, propose_for_store


class Command(BaseCommand):
    help = (
        "Translate the store's catalog vocabulary (product types, tags, title nouns) with the planning model and "
        "store the translations as proposed search synonyms, which the owner accepts in the studio."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--store", required=True, help="the store's slug")
        parser.add_argument("--languages", default="es,fr,de")

    def handle(self, *args, **options) -> None:
        try:
            store = Store.objects.get(slug=options["store"])
        except Store.DoesNotExist as error:
            raise CommandError(f"no store {options['store']!r}") from error
        languages = tuple(part.strip() for part in options["languages"].split(",") if part.strip())
        started_here = engine_service.running_engine() is None
        try:
            result = propose_for_store(store, engine_service.get_engine(), languages)
        except CannotTranslate as error:
            raise CommandError(str(error)) from error
        finally:
            if started_here:
                engine_service.shutdown()
        self.stdout.write(f"{result.added} proposed synonyms for {store.name}: accept them in the studio's catalog.")
        for error in result.errors:
            self.stderr.write(error)
