"""Login lockouts: who is locked, from where, until when; the answer to a locked login, and
lifting a lockout.

django-axes counts wrong passwords per (user name, client address) pair
(``AXES_LOCKOUT_PARAMETERS``): after ``AXES_FAILURE_LIMIT`` of them the pair's logins are
refused until ``AXES_COOLOFF_TIME`` after its last failure. Other user names from that
address, and that user name from other addresses, still log in. axes keeps one
``AccessAttempt`` row per pair; this module reads those rows and deletes them to unlock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.accounts.throttle import client_ip


@dataclass(frozen=True)
class Lockout:
    """Logins as ``username`` from ``address`` are refused until ``until`` (UTC)."""

    username: str
    address: str
    failures: int
    until: datetime

    def seconds_left(self, now: datetime) -> int:
        """Whole seconds until the lockout ends, at least 1 (a Retry-After value)."""
        return max(1, math.ceil((self.until - now).total_seconds()))

    def describe(self) -> str:
        return f"login of {self.username} from {self.address}"


def cool_off() -> timedelta:
    """How long a lockout lasts after the pair's last wrong password."""
    return get_cool_off() or timedelta(0)


def failure_limit() -> int:
    return int(settings.AXES_FAILURE_LIMIT)


def _active(now: datetime):
    return AccessAttempt.objects.filter(
        failures_since_start__gte=failure_limit(), attempt_time__gt=now - cool_off()
    )


def _lockout(row: AccessAttempt) -> Lockout:
    return Lockout(
        username=row.username or "",
        address=row.ip_address or "",
        failures=row.failures_since_start,
        until=row.attempt_time + cool_off(),
    )


def current_lockouts(now: datetime | None = None) -> list[Lockout]:
    """Every lockout in force, the one ending last first. Rows of one pair that differ only
    by browser (axes keeps the user agent too) are one lockout, ending at the latest."""
    now = now or timezone.now()
    by_pair: dict[tuple[str, str], Lockout] = {}
    for row in _active(now).order_by("attempt_time"):
        lockout = _lockout(row)
        by_pair[(lockout.username, lockout.address)] = lockout
    return sorted(by_pair.values(), key=lambda lockout: lockout.until, reverse=True)


def lockout_of(username: str, address: str, now: datetime | None = None) -> Lockout | None:
    """The lockout of that pair in force now, or None."""
    now = now or timezone.now()
    rows = _active(now).filter(username=username, ip_address=address)
    row = rows.order_by("-attempt_time").first()
    return None if row is None else _lockout(row)


def unlock(username: str, address: str) -> Lockout | None:
    """Lift the pair's lockout (its failures are forgotten); the lockout lifted, or None
    when none was in force (any failures counted so far are forgotten all the same)."""
    lifted = lockout_of(username, address)
    AccessAttempt.objects.filter(username=username, ip_address=address).delete()
    return lifted


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict | None = None,
) -> HttpResponse:
    """429 naming who is locked, from where and until when, with ``Retry-After``
    (``AXES_LOCKOUT_CALLABLE``). A login refused by the pause per name
    (console/accounts/login_delay.py) gets that pause's page instead."""
    pause = getattr(request, "login_pause", None)
    if pause is not None:
        from console.accounts.login_delay import paused_response

        return paused_response(request, pause)
    now = timezone.now()
    username = get_client_username(request, credentials) or ""
    address = getattr(request, "axes_ip_address", None) or client_ip(request)
    lockout = lockout_of(username, address, now) or Lockout(
        username, address, failure_limit(), now + cool_off()
    )
    response = render(
        request,
        "registration/locked_out.html",
        {
            "lockout": lockout,
            "minutes_left": math.ceil(lockout.seconds_left(now) / 60),
        },
        status=429,
    )
    response["Retry-After"] = str(lockout.seconds_left(now))
    return response
