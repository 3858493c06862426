"""API keys: one store each; only a SHA-256 hash is stored (keys are 256-bit random, so no slow hash is needed)."""

from __future__ import annotations

import hashlib
import secrets

from django.db import models

KEY_PREFIX = "sa-"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKey(models.Model):
    store = models.ForeignKey("catalog.Store", on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    # The first characters of the key, shown in the admin so an owner can tell keys apart; not a secret.
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.BooleanField(default=False)

    class Meta:
        ordering = ["store", "name"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.store} {self.name} ({self.prefix}…)"

    @classmethod
    def create_key(cls, store: models.Model, name: str) -> tuple[ApiKey, str]:
        """A new key for ``store``: the row and the key itself, which is shown once and never stored."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        return cls.objects.create(store=store, name=name, prefix=key[:10], key_hash=hash_key(key)), key
