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
from django.core.checks import Warning

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
