"""Personal API tokens: stored hashed, shown once."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import models

#: Letters shown in lists to tell tokens apart; the rest of the key is never stored.
TOKEN_PREFIX_LENGTH = 8


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def password_stamp(user) -> str:
    """A digest of the user's stored password hash: it changes whenever the password is
    changed or reset, and a token made before then stops working."""
    return hashlib.sha256(f"tidemark-token:{user.password}".encode()).hexdigest()


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
    #: None: never expires.
    expires_at = models.DateTimeField(null=True, blank=True)
    #: Reads only (GET, HEAD, OPTIONS), whatever its user's role allows.
    read_only = models.BooleanField(default=False)
    #: ``password_stamp`` of its user when it was made; empty for tokens made before stamps.
    password_stamp = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(
        cls, user, name: str, expires_at: datetime | None = None, read_only: bool = False
    ) -> tuple[ApiToken, str]:
        """A new token for ``user`` and its key, which is not kept: show it once."""
        key = secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user,
            name=name,
            prefix=key[:TOKEN_PREFIX_LENGTH],
            key_hash=hash_key(key),
            expires_at=expires_at,
            read_only=read_only,
            password_stamp=password_stamp(user),
        )
        return token, key

    def state(self, now: datetime) -> TokenState:
        """Whether the token works now ("active") and, when it does not, why."""
        owner = self.user.get_username()
        if not self.user.is_active:
            return TokenState(
                "revoked", f"{owner} is deactivated", "The token's user is deactivated."
            )
        if self.expires_at is not None and self.expires_at <= now:
            when = f"{self.expires_at:%Y-%m-%d %H:%M:%S} UTC"
            return TokenState("expired", f"at {when}", f"The token expired at {when}.")
        if self.password_stamp != password_stamp(self.user):
            return TokenState(
                "revoked",
                f"{owner}'s password was changed after it was made",
                "The token's user changed their password since it was made; make a new one.",
            )
        return TokenState("active", "", "")

    def refusal(self, now: datetime) -> str | None:
        """Why this token cannot be used now (a sentence for its caller), or None."""
        state = self.state(now)
        return None if state.active else state.refusal


@dataclass(frozen=True)
class TokenState:
    """``name``: "active", "expired" or "revoked"; ``why`` for the tokens page (empty when
    active); ``refusal``: the sentence the API answers a caller using the token."""

    name: str
    why: str
    refusal: str

    @property
    def active(self) -> bool:
        return self.name == "active"

    def __str__(self) -> str:
        if self.active:
            return self.name
        return f"{self.name} {self.why}" if self.name == "expired" else f"{self.name}: {self.why}"


class PasswordResetRequest(models.Model):
    """One password-reset mail asked for: what the per-hour limit counts."""

    #: SHA-256 of the address asked for, lower-cased (the address itself is not kept).
    address_hash = models.CharField(max_length=64, db_index=True)
    client_ip = models.CharField(max_length=45, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)


class PasswordChangeFailures(models.Model):
    """Wrong current passwords a user gave on the password-change form lately
    (console/accounts/password_change_limit.py)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    failures = models.PositiveIntegerField(default=0)
    last_failure = models.DateTimeField()


class SsoIdentity(models.Model):
    """The console user a single sign-on identity (the provider's issuer and subject) logs
    in as (console/accounts/sso.py); made at that identity's first sign-on."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class RoleRule(models.Model):
    """One rule of a role (a Django group): on resources of ``kind`` whose name matches
    ``pattern`` (a shell-style pattern: ``*``, ``?``, ``[…]``), the ``actions`` are allowed
    (see console/accounts/permissions.py). A user gets the union of their roles' rules;
    the built-in roles viewer, operator and admin are presets with rules of their own."""

    KINDS = [("topic", "topic"), ("group", "consumer group")]

    role = models.ForeignKey("auth.Group", on_delete=models.CASCADE, related_name="rules")
    kind = models.CharField(max_length=10, choices=KINDS)
    pattern = models.CharField(max_length=255)
    actions = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role__name", "kind", "pattern", "pk"]

    def __str__(self) -> str:
        return f"{self.role.name}: {self.kind} {self.pattern} → {', '.join(self.actions)}"


class MaskRule(models.Model):
    """Data masking (console/accounts/masking.py): on topics whose name matches
    ``pattern``, a user who may view the topic but not read it sees its messages with
    ``part`` (a JSON body's field ``field``, dotted for nested ones, ``*`` for the whole
    body; a property named ``field`` or ``*`` for all; the keys) masked or removed."""

    PARTS = [("body", "body field"), ("property", "property"), ("key", "keys")]
    HOWS = [("mask", "mask"), ("remove", "remove")]

    pattern = models.CharField(max_length=255)
    part = models.CharField(max_length=10, choices=PARTS)
    field = models.CharField(max_length=255, default="*")
    how = models.CharField(max_length=10, choices=HOWS, default="mask")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pattern", "part", "field", "pk"]

    def __str__(self) -> str:
        return f"{self.how} {self.part} {self.field} on topics {self.pattern}"


class SecondFactor(models.Model):
    """Whether a user has a confirmed TOTP device: what the second factor's rule reads on
    every request (console/accounts/totp.py's ``SecondFactorMiddleware``), joined to the
    user row by the login backends' ``get_user`` so that it costs no query of its own. The
    devices are the truth; this row follows them, kept by totp.py's receivers on every
    device saved or deleted (by the console, Django's admin or the shell): one owner. No row
    is the same as ``totp=False``."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="second_factor",
    )
    totp = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"user {self.user_id}: TOTP {'on' if self.totp else 'off'}"
