"""Throttles on the login and password-reset pages, and the API's rate per user.

Logins are throttled by django-axes (settings: ``AXES_*``); it asks ``client_ip`` for the
client's address. Password-reset mails are limited here: at most
``TIDEMARK_PASSWORD_RESETS_PER_HOUR`` per address and per client address in any hour.
Past the limit the page answers as usual (so it tells nobody whether an account has that
address) but sends nothing.

The API's rate per user (``TIDEMARK_API_RATE``) is DRF's UserRateThrottle with a wait that
is always a whole number of seconds from 1, so every 429 it causes carries Retry-After.
"""

from __future__ import annotations

import hashlib
import logging
import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils import timezone
from redis import RedisError
from rest_framework.throttling import UserRateThrottle

from console.accounts.models import PasswordResetRequest

logger = logging.getLogger(__name__)

WINDOW = timedelta(hours=1)


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or behind a TLS proxy (TIDEMARK_BEHIND_TLS_PROXY)
    the last address the proxy appended to X-Forwarded-For."""
    if getattr(settings, "TIDEMARK_BEHIND_TLS_PROXY", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-1][:45]
    return str(request.META.get("REMOTE_ADDR") or "")[:45]


def address_hash(address: str) -> str:
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()


def reset_allowed(address: str, ip: str) -> bool:
    """Note a reset asked for ``address`` from ``ip``; whether it is within the limit."""
    limit = settings.TIDEMARK_PASSWORD_RESETS_PER_HOUR
    since = timezone.now() - WINDOW
    recent = PasswordResetRequest.objects.filter(created_at__gte=since)
    digest = address_hash(address)
    over = recent.filter(address_hash=digest).count() >= limit or (
        ip and recent.filter(client_ip=ip).count() >= limit
    )
    PasswordResetRequest.objects.filter(created_at__lt=since).delete()
    if not over:
        PasswordResetRequest.objects.create(address_hash=digest, client_ip=ip)
    return not over


class ThrottledPasswordResetView(auth_views.PasswordResetView):
    """Django's password reset, sending at most the hourly limit of mails."""

    def form_valid(self, form) -> HttpResponse:
        if not reset_allowed(form.cleaned_data["email"], client_ip(self.request)):
            return HttpResponseRedirect(self.get_success_url())
        return super().form_valid(form)


class ApiRateThrottle(UserRateThrottle):
    """DRF's rate per user, counted in Django's cache (Redis, settings.CACHES). DRF's own
    wait is None when more requests were counted than the rate allows (requests racing past
    the check), and its 429 then has no Retry-After; here it is the time until enough of
    them leave the window for one more. When the cache's Redis does not answer, the request
    is let through (and logged): the rate is a guard, Redis's absence is /readyz's to tell."""

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except RedisError as error:
            logger.warning("API rate not counted, Redis did not answer: %s", error)
            return True

    def wait(self) -> float:
        wait = super().wait()
        if wait is None:
            last_to_leave = self.history[self.num_requests - 1]
            wait = self.duration - (self.now - last_to_leave)
        return max(1, math.ceil(wait))
