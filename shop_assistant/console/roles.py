"""Role rules, in one place: which stores a user may work on, as an agent (console) or an owner (studio).

Superusers see every store. Owners do everything agents do. A user with no membership sees nothing.
"""

from __future__ import annotations

from django.db.models import QuerySet

from catalog.models import Store

from .models import StoreMembership

Role = StoreMembership.Role


def _roles_at_least(role: str) -> list[str]:
    return [Role.OWNER] if role == Role.OWNER else [Role.OWNER, Role.AGENT]


def stores_for(user, role: str = Role.AGENT) -> QuerySet[Store]:
    """The stores where ``user`` holds ``role`` or a higher one (owner > agent)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return Store.objects.none()
    if user.is_superuser:
        return Store.objects.all()
    return Store.objects.filter(
        memberships__user=user, memberships__role__in=_roles_at_least(role)
    ).distinct()


def can_work_on(user, store: Store | int, role: str = Role.AGENT) -> bool:
    store_id = store if isinstance(store, int) else store.pk
    return stores_for(user, role).filter(pk=store_id).exists()


def is_staff_member(user, role: str = Role.AGENT) -> bool:
    """Whether the user may open the console (agent) or the studio (owner) at all."""
    return stores_for(user, role).exists()
