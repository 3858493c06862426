"""Who works for which store: the roles the console and the studio check."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class StoreMembership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"  # edits the assistant (studio) and everything an agent does
        AGENT = "agent"  # answers conversations in the console

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="store_memberships")
    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "store"], name="one_membership_per_user_and_store")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.store}"
