"""Start-up checks of a deployment's settings (Django's system checks): each says in one
sentence what is unsafe and which setting fixes it.

- tidemark.W001: behind a same-host TLS proxy, /metrics left to a loopback allow-list
  without a token is public (every client arrives from the proxy's 127.0.0.1).
- tidemark.E001: SECRET_KEY is a known placeholder (refused with DEBUG off).
- tidemark.E002: single sign-on is on (OIDC_RP_CLIENT_ID) but a setting it needs is empty.
- tidemark.E003: TIDEMARK_SSO_ROLE_MAP maps a group to a name that is no role.
- tidemark.W002: single sign-on is on but no group is mapped to a role: nobody gets in by it.
- tidemark.W003: with DEBUG off, a provider endpoint is plain http.
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


def single_sign_on(app_configs: Any, **kwargs: Any) -> list[Error | Warning]:
    """tidemark.E002, E003, W002, W003: single sign-on configured (console/accounts/sso.py)
    but missing a setting, mapping to no role, mapping nothing, or in plain http."""
    if not settings.OIDC_RP_CLIENT_ID:
        return []
    from console.accounts.roles import ROLES
    from console.accounts.sso import REQUIRED_SETTINGS

    found: list[Error | Warning] = []
    missing = [name for name in REQUIRED_SETTINGS if not getattr(settings, name, "")]
    if missing:
        found.append(
            Error(
                f"Single sign-on is on (OIDC_RP_CLIENT_ID is set) but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} empty.",
                hint="Copy them from the provider's /.well-known/openid-configuration "
                "(issuer, authorization_endpoint, token_endpoint, userinfo_endpoint, "
                "jwks_uri) and its client registration; or unset OIDC_RP_CLIENT_ID.",
                id="tidemark.E002",
            )
        )
    role_map = settings.TIDEMARK_SSO_ROLE_MAP
    for group, role in role_map.items():
        if role not in ROLES:
            found.append(
                Error(
                    f"TIDEMARK_SSO_ROLE_MAP maps group {group!r} to {role!r}, which is not "
                    f"a role (the roles are {', '.join(ROLES)}).",
                    id="tidemark.E003",
                )
            )
    if not role_map:
        found.append(
            Warning(
                "Single sign-on is on but TIDEMARK_SSO_ROLE_MAP maps no group to a role: "
                "every sign-on will be refused.",
                hint="Set TIDEMARK_SSO_ROLE_MAP, e.g. tidemark-admins=admin,developers=viewer.",
                id="tidemark.W002",
            )
        )
    endpoints = [name for name in REQUIRED_SETTINGS if name.startswith("OIDC_OP_")]
    plain = [name for name in endpoints if str(getattr(settings, name, "")).startswith("http:")]
    if plain and not settings.DEBUG:
        found.append(
            Warning(
                f"{', '.join(plain)} {'is' if len(plain) == 1 else 'are'} plain http: the "
                "client secret and the tokens would cross the network unencrypted.",
                hint="Use the provider's https:// endpoints.",
                id="tidemark.W003",
            )
        )
    return found
