"""Staff accounts: a user (found or made by e-mail) with a role in a store."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from catalog.models import Store

from .models import StoreMembership


@dataclass
class StaffResult:
    user: Any
    created: bool
    password: str | None  # the generated password, when one was made (shown once)
    role_changed: bool


def add_staff(store: Store, email: str, role: str, *, username: str | None = None, password: str | None = None,
              first_name: str = "") -> StaffResult:
    """Give ``email`` the ``role`` in ``store``, creating the user when there is none (with ``password`` or a
    generated one). Idempotent: a second call changes nothing."""
    if role not in StoreMembership.Role.values:
        raise ValueError(f"role must be one of {', '.join(StoreMembership.Role.values)}")
    User = get_user_model()
    generated = None
    with transaction.atomic():
        user = User.objects.filter(email__iexact=email).first() or (
            User.objects.filter(username=username).first() if username else None
        )
        created = user is None
        if created:
            generated = None if password else secrets.token_urlsafe(12)
            user = User.objects.create_user(username or email, email=email, password=password or generated,
                                            first_name=first_name)
        membership, made = StoreMembership.objects.get_or_create(user=user, store=store, defaults={"role": role})
        changed = made
        if not made and membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
            changed = True
    return StaffResult(user, created, generated, changed)
