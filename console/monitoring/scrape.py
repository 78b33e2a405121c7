"""/metrics for Prometheus: no login, but a bearer token or an allowed client address.

When ``TIDEMARK_METRICS_TOKEN`` is set, every request must send it
(``Authorization: Bearer <token>``), whatever its address: behind a same-host proxy every
client's address is the proxy's. Without a token, a request from an address in
``TIDEMARK_METRICS_ALLOW`` (addresses or networks; by default the loopback addresses) may
read it. Anything else is a 403 (401 when the token is set but not sent), saying which.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from console.monitoring.prometheus import render


def _networks(entries: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(entry, strict=False) for entry in entries]


def address_allowed(address: str, allowed: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(allowed) if network.version == ip.version)


def token_sent(request: HttpRequest) -> str | None:
    scheme, _, value = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read /metrics, else the answer that says why not."""
    expected = settings.TIDEMARK_METRICS_TOKEN
    if expected:
        sent = token_sent(request)
        if sent is None:
            response = _plain(401, "Send Authorization: Bearer <TIDEMARK_METRICS_TOKEN>.")
            response["WWW-Authenticate"] = 'Bearer realm="tidemark metrics"'
            return response
        if hmac.compare_digest(sent.encode(), expected.encode()):
            return None
        return _plain(403, "That metrics token is not valid.")
    if address_allowed(request.META.get("REMOTE_ADDR", ""), settings.TIDEMARK_METRICS_ALLOW):
        return None
    return _plain(403, "This address may not read /metrics (see TIDEMARK_METRICS_ALLOW).")


def _plain(status: int, sentence: str) -> HttpResponse:
    return HttpResponse(sentence + "\n", status=status, content_type="text/plain; charset=utf-8")


@login_not_required
@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    refused = refusal(request)
    if refused is not None:
        return refused
    return HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
