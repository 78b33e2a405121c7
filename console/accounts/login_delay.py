"""Progressive delay per user name: a guesser spread over many addresses is slowed.

Lockouts lock one (name, address) pair (console/accounts/lockouts.py), so a guesser with
many addresses never trips one. Here every wrong password for a name counts, from any
address: past ``TIDEMARK_LOGIN_FREE_FAILURES`` of them within the lockout cool-off, the
name's logins are paused after each further failure, for twice as long as the time before
(``TIDEMARK_LOGIN_DELAY_BASE_SECONDS``, doubling, at most
``TIDEMARK_LOGIN_DELAY_MAX_SECONDS``). A paused login is answered 429 with Retry-After and is
neither judged nor counted: `console.accounts.backends.PausedNameBackend` refuses it inside
``authenticate`` (so every login page, Django admin's too, is paused alike) and the lockout
answer (``AXES_LOCKOUT_CALLABLE``) renders it.

The real user is not paused: a browser that logged in as a user carries a signed
known-browser cookie naming that user, and a login for that user from it skips the pause
(its pair lockout still holds). The failures are django-axes' rows, keyed by the name's
canonical form (``AXES_USERNAME_CALLABLE``), so "VERA" and "ｖｅｒａ" count for "vera".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.models import AccessAttempt
from django.conf import settings
from django.core import signing
from django.db.models import Max, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.accounts.lockouts import cool_off
from console.accounts.usernames import canonical

KNOWN_BROWSER_COOKIE = "tidemark_known_browser"
_SALT = "console.accounts.login_delay.known_browser"


def axes_username(request: HttpRequest, credentials: dict | None = None) -> str:
    """The name django-axes counts failures under (``AXES_USERNAME_CALLABLE``): canonical."""
    field = settings.AXES_USERNAME_FORM_FIELD
    if credentials:
        name = credentials.get(field)
    else:
        name = getattr(request, "data", request.POST).get(field)
    return canonical(str(name or ""))


def pause_for(failures: int) -> timedelta:
    """How long the name is paused after its ``failures``-th failure (0 while free)."""
    beyond = failures - settings.TIDEMARK_LOGIN_FREE_FAILURES
    if beyond < 0:
        return timedelta(0)
    ceiling = settings.TIDEMARK_LOGIN_DELAY_MAX_SECONDS
    seconds = settings.TIDEMARK_LOGIN_DELAY_BASE_SECONDS * 2 ** min(beyond, 32)
    return timedelta(seconds=min(seconds, ceiling))


@dataclass(frozen=True)
class Pause:
    """Logins as ``username`` are paused until ``until``."""

    username: str
    failures: int
    until: datetime

    def seconds_left(self, now: datetime) -> int:
        return max(1, math.ceil((self.until - now).total_seconds()))


def pause_of(username: str, now: datetime | None = None) -> Pause | None:
    """The pause on that name's logins in force now, or None."""
    now = now or timezone.now()
    name = canonical(username)
    recent = AccessAttempt.objects.filter(username=name, attempt_time__gt=now - cool_off())
    totals = recent.aggregate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
    failures = totals["failures"] or 0
    if not failures:
        return None
    until = totals["last"] + pause_for(failures)
    return Pause(name, failures, until) if until > now else None


def remember_browser(response: HttpResponse, username: str) -> None:
    """Mark the browser that just logged in as ``username`` as known for that name."""
    value = signing.dumps(canonical(username), salt=_SALT)
    response.set_cookie(
        KNOWN_BROWSER_COOKIE,
        value,
        max_age=settings.TIDEMARK_KNOWN_BROWSER_DAYS * 86400,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
        path="/accounts/",
    )


def is_known_browser(request: HttpRequest, username: str) -> bool:
    value = request.COOKIES.get(KNOWN_BROWSER_COOKIE)
    if not value:
        return False
    max_age = settings.TIDEMARK_KNOWN_BROWSER_DAYS * 86400
    try:
        return signing.loads(value, salt=_SALT, max_age=max_age) == canonical(username)
    except signing.BadSignature:
        return False


def paused_login(request: HttpRequest, username: str) -> Pause | None:
    """The pause on this login's name, or None when it goes on (no pause, or a browser known
    for the name)."""
    if not username or is_known_browser(request, username):
        return None
    return pause_of(username)


def paused_response(request: HttpRequest, pause: Pause) -> HttpResponse:
    """429 saying how long the name is paused, with Retry-After."""
    seconds = pause.seconds_left(timezone.now())
    response = render(
        request, "registration/login_paused.html", {"pause": pause, "seconds": seconds}, status=429
    )
    response["Retry-After"] = str(seconds)
    return response
