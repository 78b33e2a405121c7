"""Personal API tokens: stored hashed, shown once."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

#: Letters shown in lists to tell tokens apart; the rest of the key is never stored.
TOKEN_PREFIX_LENGTH = 8


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A personal token: ``Authorization: Token <key>`` acts as its user, with their role."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=TOKEN_PREFIX_LENGTH)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, user, name: str) -> tuple[ApiToken, str]:
        """A new token for ``user`` and its key, which is not kept: show it once."""
        key = secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, prefix=key[:TOKEN_PREFIX_LENGTH], key_hash=hash_key(key)
        )
        return token, key
