"""python manage.py load_demo_store: the demo store, its catalog, embeddings, prompt and a staff login."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from catalog.demo import DEFAULT_STAFF_PASSWORD, STAFF_USERNAME, load_demo_store


class Command(BaseCommand):
    help = (
        'Create the demo store "Demo Outfitters" (slug demo) with its catalog, documents, embeddings and prompt, '
        "and a staff superuser. Idempotent: prints nothing when everything is already there."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-embed", action="store_true", help="skip computing embeddings")

    def handle(self, *args, **options) -> None:
        result = load_demo_store(embed=not options["no_embed"])
        if not result.changed and options["verbosity"] < 2:
            return
        for change in result.changes or ["nothing to do: the demo store is up to date"]:
            self.stdout.write(f"- {change}")
        login = f"Demo store ready. Log in at http://127.0.0.1:8000/admin/ as {STAFF_USERNAME!r}"
        if result.user_created:
            password = "the password in DEMO_STAFF_PASSWORD" if result.password_from_env else DEFAULT_STAFF_PASSWORD
            login += f" with {password}"
        self.stdout.write(self.style.SUCCESS(login + "."))
        if result.user_created and not result.password_from_env and not settings.DEBUG:
            self.stderr.write(
                self.style.WARNING(
                    "DEBUG is off and the staff password is the public default: set DEMO_STAFF_PASSWORD."
                )
            )
