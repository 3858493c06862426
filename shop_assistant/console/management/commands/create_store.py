"""python manage.py create_store SLUG NAME: a new store, without the admin."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from catalog.models import Store
from shop_assistant.studio.services import ensure_default_prompt


class Command(BaseCommand):
    help = "Create a store (slug and name) with the default assistant prompt. Then add staff with add_staff."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("name")
        parser.add_argument("--currency", default="USD")
        parser.add_argument("--base-url", default="", help="product links are built from it")
        parser.add_argument("--retention-days", type=int, default=None, help="delete conversations after N days")

    def handle(self, *args, slug: str, name: str, **options) -> None:
        if Store.objects.filter(slug=slug).exists():
            raise CommandError(f'a store with the slug "{slug}" already exists')
        store = Store(slug=slug, name=name, currency=options["currency"].upper(), base_url=options["base_url"],
                      retention_days=options["retention_days"])
        store.full_clean()
        store.save()
        ensure_default_prompt(store)
        self.stdout.write(self.style.SUCCESS(f'Created the store "{name}" ({slug}).'))
        self.stdout.write(f'Widget: <script src="/static/widget/widget.js" data-store="{slug}" async></script>')
