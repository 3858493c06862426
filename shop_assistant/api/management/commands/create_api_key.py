"""``manage.py create_api_key <store slug> [--name NAME]``: print a new API key for the store (shown once)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from catalog.models import Store
from shop_assistant.api.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for a store's OpenAI-compatible API and print it (only its hash is kept)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("store", help="the store's slug")
        parser.add_argument("--name", default="default", help="a label to tell keys apart")

    def handle(self, *args: Any, store: str, name: str, **options: Any) -> None:
        found = Store.objects.filter(slug=store).first()
        if found is None:
            raise CommandError(f"no store with slug {store!r}")
        _, key = ApiKey.create_key(found, name)
        self.stdout.write(key)
