"""python manage.py load_demo_store: the demo store, its catalog, embeddings, prompt and a staff login."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.management.base import BaseCommand

from catalog.demo import DEFAULT_STAFF_PASSWORD, STAFF_USERNAME, load_demo_store

# Console accounts of the demo store besides the superuser: (username, e-mail, first name, role).
DEMO_STAFF = [
    ("agent", "agent@demo-outfitters.example", "Dana", "agent"),
    ("owner", "owner@demo-outfitters.example", "Olivia", "owner"),
]


def add_demo_staff(store, password: str) -> list[str]:
    from shop_assistant.console.staff import add_staff

    changes = []
    for username, email, first_name, role in DEMO_STAFF:
        result = add_staff(store, email, role, username=username, password=password, first_name=first_name)
        if result.created or result.role_changed:
            changes.append(f'{role} "{username}" of the demo store')
    return changes


class Command(BaseCommand):
    help = (
        'Create the demo store "Demo Outfitters" (slug demo) with its catalog, documents, embeddings and prompt, '
        "and a staff superuser. Idempotent: prints nothing when everything is already there."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-embed", action="store_true", help="skip computing embeddings")

    def handle(self, *args, **options) -> None:
        result = load_demo_store(embed=not options["no_embed"])
        result.changes += add_demo_staff(result.store, os.environ.get("DEMO_STAFF_PASSWORD") or DEFAULT_STAFF_PASSWORD)
        if not result.changed and options["verbosity"] < 2:
            return
        for change in result.changes or ["nothing to do: the demo store is up to date"]:
            self.stdout.write(f"- {change}")
        login = f"Demo store ready. Log in at http://127.0.0.1:8000/admin/ as {STAFF_USERNAME!r}"
        if result.user_created:
            password = "the password in DEMO_STAFF_PASSWORD" if result.password_from_env else DEFAULT_STAFF_PASSWORD
            login += f" with {password}"
        self.stdout.write(self.style.SUCCESS(login + "."))
        self.stdout.write(
            "Support console: http://127.0.0.1:8000/console/ as 'agent' (Dana) or 'owner' (Olivia), same password."
        )
        if result.user_created and not result.password_from_env and not settings.DEBUG:
            self.stderr.write(
                self.style.WARNING(
                    "DEBUG is off and the staff password is the public default: set DEMO_STAFF_PASSWORD."
                )
            )
