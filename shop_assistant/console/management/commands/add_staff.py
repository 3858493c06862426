"""python manage.py add_staff --store SLUG --role agent|owner EMAIL"""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email
from django.core.exceptions import ValidationError

from catalog.models import Store
from shop_assistant.console.staff import add_staff


class Command(BaseCommand):
    help = (
        "Give a person a role in a store (agent: the console; owner: also the studio). Creates the account when "
        "the e-mail is new, with the password in STAFF_PASSWORD or a generated one that is printed once."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("email")
        parser.add_argument("--store", required=True, help="the store's slug")
        parser.add_argument("--role", required=True, choices=["agent", "owner"])
        parser.add_argument("--name", default="", help="first name the shopper sees when this agent joins")

    def handle(self, *args, email: str, store: str, role: str, name: str, **options) -> None:
        try:
            validate_email(email)
        except ValidationError:
            raise CommandError(f"{email!r} is not an e-mail address") from None
        shop = Store.objects.filter(slug=store).first()
        if shop is None:
            raise CommandError(f'no store with the slug "{store}" (create it with create_store)')
        result = add_staff(shop, email, role, password=os.environ.get("STAFF_PASSWORD") or None, first_name=name)
        if result.created:
            self.stdout.write(f"Created the user {email}.")
            if result.password:
                self.stdout.write(f"Password (shown once): {result.password}")
        self.stdout.write(
            self.style.SUCCESS(f"{email} is {role} of {shop.slug}." if result.role_changed
                               else f"{email} already was {role} of {shop.slug}.")
        )
