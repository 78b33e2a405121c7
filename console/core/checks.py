"""Start-up checks of a deployment's settings (Django's system checks): each says in one
sentence what is unsafe and which setting fixes it.

- tidemark.W001: behind a same-host TLS proxy, /metrics left to a loopback allow-list
  without a token is public (every client arrives from the proxy's 127.0.0.1).
- tidemark.E001: SECRET_KEY is a known placeholder (refused with DEBUG off).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning

#: Secret keys published in examples and docs, and the marks of one (lower case).
PLACEHOLDER_KEYS = frozenset(
    {
        "change-me-python3-c-import-secrets-print-secrets-token-urlsafe-50",
        "django-insecure-tidemark-development-key-do-not-use-in-production",
    }
)
PLACEHOLDER_MARKS = ("django-insecure-", "change-me", "changeme", "replace-with", "your-secret")

#: Loopback addresses: where a same-host proxy's requests come from.
_LOOPBACK = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


def _admits_loopback(entries: list[str]) -> bool:
    for entry in entries:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if any(ip.version == network.version and ip in network for ip in _LOOPBACK):
            return True
    return False


def metrics_exposure(app_configs: Any, **kwargs: Any) -> list[Warning]:
    """tidemark.W001 when /metrics is open to anyone the TLS proxy forwards."""
    if not settings.TIDEMARK_BEHIND_TLS_PROXY or settings.TIDEMARK_METRICS_TOKEN:
        return []
    if not _admits_loopback(settings.TIDEMARK_METRICS_ALLOW):
        return []
    return [
        Warning(
            "/metrics is public: behind the TLS proxy every client arrives from the proxy "
            "at 127.0.0.1, which TIDEMARK_METRICS_ALLOW admits without a token.",
            hint="Set TIDEMARK_METRICS_TOKEN (Prometheus sends it as a bearer token) and "
            "drop the loopback addresses from TIDEMARK_METRICS_ALLOW.",
            id="tidemark.W001",
        )
    ]


def secret_key_placeholder(app_configs: Any, **kwargs: Any) -> list[Error]:
    """tidemark.E001 when DEBUG is off and SECRET_KEY is a published placeholder."""
    if settings.DEBUG:
        return []
    key = str(settings.SECRET_KEY).strip().lower()
    if key not in PLACEHOLDER_KEYS and not any(mark in key for mark in PLACEHOLDER_MARKS):
        return []
    return [
        Error(
            "SECRET_KEY is a placeholder from the examples: anyone who read them can forge "
            "sessions, password-reset links and signed values.",
            hint="Generate one: python3 -c 'import secrets; print(secrets.token_urlsafe(50))'",
            id="tidemark.E001",
        )
    ]
