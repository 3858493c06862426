"""python manage.py load_demo_store: the demo store, its catalog, embeddings, prompt and staff logins."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from shop_assistant.demo.store import STAFF_USERNAME, load_demo_store

# Console accounts of the demo store besides the superuser: (username, e-mail, first name, role).
DEMO_STAFF = [
    ("agent", "agent@demo-outfitters.example", "Dana", "agent"),
    ("owner", "owner@demo-outfitters.example", "Olivia", "owner"),
]


def add_demo_staff(store, password: str) -> tuple[list[str], list[str]]:
    """Give the demo store its agent and owner; returns (changes to report, usernames created now)."""
    from shop_assistant.console.staff import add_staff

    changes, created = [], []
    for username, email, first_name, role in DEMO_STAFF:
        result = add_staff(store, email, role, username=username, password=password, first_name=first_name)
        if result.created or result.role_changed:
            changes.append(f'{role} "{username}" of the demo store')
        if result.created:
            created.append(username)
    return changes, created


class Command(BaseCommand):
    help = (
        'Create the demo store "Demo Outfitters" (slug demo) with its catalog, documents, embeddings and prompt, '
        "a staff superuser and its agent and owner. Their password is DEMO_STAFF_PASSWORD, or a random one printed "
        "once when the accounts are made. Idempotent: prints nothing when everything is already there."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-embed", action="store_true", help="skip computing embeddings")

    def handle(self, *args, **options) -> None:
        result = load_demo_store(embed=not options["no_embed"])
        changes, created = add_demo_staff(result.store, result.password)
        result.changes += changes
        created = ([STAFF_USERNAME] if result.user_created else []) + created
        if not result.changed and options["verbosity"] < 2:
            return
        for change in result.changes or ["nothing to do: the demo store is up to date"]:
            self.stdout.write(f"- {change}")
        self.stdout.write(self.style.SUCCESS(
            f"Demo store ready. Admin: http://127.0.0.1:8000/admin/ as {STAFF_USERNAME!r}; support console: "
            "http://127.0.0.1:8000/console/ as 'agent' (Dana) or 'owner' (Olivia)."
        ))
        if not created:
            return
        accounts = ", ".join(repr(name) for name in created)
        if result.password_from_env:
            self.stdout.write(f"Password of {accounts}: the one in DEMO_STAFF_PASSWORD.")
        else:
            # Shown this once and kept nowhere: a lost one is reset with `manage.py changepassword <user>`.
            self.stdout.write(self.style.WARNING(f"Password of {accounts} (shown once): {result.password}"))
