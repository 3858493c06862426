"""python manage.py create_store SLUG NAME: a new store, without the admin."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from catalog.models import Store
from shop_assistant.console.models import RetentionSettings


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
        store = Store(slug=slug, name=name, currency=options["currency"].upper(), base_url=options["base_url"])
        store.full_clean()
        with transaction.atomic():  # the store and the default prompt it gets on creation (studio.receivers)
            store.save()
            retention = RetentionSettings.of(store)
            retention.retention_days = options["retention_days"]
            retention.save()
        self.stdout.write(self.style.SUCCESS(f'Created the store "{name}" ({slug}).'))
        self.stdout.write(f'Widget: <script src="/static/widget/widget.js" data-store="{slug}" async></script>')
