"""Wrong current passwords on the password-change form: at most
``TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT`` per user within
``TIDEMARK_PASSWORD_CHANGE_WINDOW_MINUTES``; past that, the form answers 429 with Retry-After
until the window after the last wrong one has passed. A right one clears the count.

Counted in the database (one row per user), so every server process sees the same count.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from console.accounts.models import PasswordChangeFailures


def window() -> timedelta:
    return timedelta(minutes=settings.TIDEMARK_PASSWORD_CHANGE_WINDOW_MINUTES)


def seconds_refused(user_pk: int, now: datetime | None = None) -> int:
    """Seconds the user's password changes are still refused, 0 when they are not."""
    now = now or timezone.now()
    row = PasswordChangeFailures.objects.filter(user_id=user_pk).first()
    if row is None or row.failures < settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT:
        return 0
    left = (row.last_failure + window() - now).total_seconds()
    return max(0, math.ceil(left))


def note_failure(user_pk: int) -> None:
    """Count one wrong current password; a count older than the window starts again."""
    now = timezone.now()
    with transaction.atomic():
        row, created = PasswordChangeFailures.objects.select_for_update().get_or_create(
            user_id=user_pk, defaults={"failures": 1, "last_failure": now}
        )
        if created:
            return
        if row.last_failure <= now - window():
            row.failures = 1
        else:
            row.failures = F("failures") + 1
        row.last_failure = now
        row.save(update_fields=["failures", "last_failure"])


def clear(user_pk: int) -> None:
    PasswordChangeFailures.objects.filter(user_id=user_pk).delete()
