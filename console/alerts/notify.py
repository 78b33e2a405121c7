"""Deliver: send a queued notification to its channel (console/alerts/channels.py), once
per attempt, and record how it went. The ``send_notification`` task (tasks.py) calls
``attempt`` and retries a failure with backoff (``backoff_s``, at most 10 minutes apart).
Each attempt sends what holds at that moment (console/alerts/compose.py), never the state
of when it was queued; a newer notification of the same rule and channel supersedes it
(console/alerts/outbox.py). While it tells of a subject firing it is retried for as long
as it takes; otherwise, after ``TIDEMARK_ALERT_MAX_ATTEMPTS`` attempts, it is ``failed``.
A failure its channel says is not worth retrying (a webhook's 4xx answer, as Alertmanager
has it) is ``failed`` at once, firing or not.

A notification's events are marked notified (``AlertEvent.last_notified_at``) only after a
delivery succeeded: a mail server that refuses never makes the page say "notified". Each
attempt is claimed with a conditional UPDATE (``pending`` → ``sending``), so two workers
never send one notification at once; a worker that died mid-send leaves it ``sending``,
and ``lost`` hands such rows (and pending ones whose retry never came) back.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from console.alerts import compose, outbox
from console.alerts.channels import DeliveryFailed, channel_of
from console.alerts.evaluate import Notice
from console.alerts.models import AlertEvent, Notification

DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_RETRY_BASE_S = 10.0
MAX_BACKOFF_S = 600.0
#: A notification left sending or overdue this long is taken as lost and sent again.
LOST_AFTER = timedelta(minutes=15)
MAX_ERROR_CHARS = 1000


def max_attempts() -> int:
    return max(1, int(getattr(settings, "TIDEMARK_ALERT_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)))


def backoff_s(failures: int) -> float:
    """Seconds before the next attempt after ``failures`` failed ones: doubling from
    ``TIDEMARK_ALERT_RETRY_BASE_S``, at most 10 minutes."""
    base = float(getattr(settings, "TIDEMARK_ALERT_RETRY_BASE_S", DEFAULT_RETRY_BASE_S))
    return min(MAX_BACKOFF_S, base * 2 ** max(0, failures - 1))


def error_text(error: BaseException) -> str:
    if isinstance(error, DeliveryFailed):
        return str(error)[:MAX_ERROR_CHARS]
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS]


def _sections(said: Notice) -> dict[str, list[int]]:
    names = ("fired", "resolved", "still", "unsilenced", "reminded")
    return {name: [e.pk for e in getattr(said, name)] for name in names}


def attempt(notification_id: int, now: datetime | None = None) -> Notification | None:
    """Try to deliver the notification once, saying what holds now (compose.py). Returns
    it (sent), or None when there was nothing to do: it was not pending (sent, or being
    sent elsewhere), a newer notification of its rule and channel took it over, or it had
    nothing new to say (both leave it ``superseded``). Raises DeliveryFailed when the
    attempt failed: it is then pending again, with the error and the time of its next
    attempt; ``final`` (``failed``) only after ``max_attempts()`` and only when it says
    nothing of a subject firing now (a page is never dropped while its alert fires), or
    at once when its channel says the failure is not worth retrying (the receiver refused
    the request itself: sending it again would get the same answer)."""
    now = now or timezone.now()
    claimed = Notification.objects.filter(pk=notification_id, state=Notification.PENDING).update(
        state=Notification.SENDING, attempts=F("attempts") + 1, last_attempt_at=now
    )
    if not claimed:
        return None
    row = Notification.objects.select_related("rule").get(pk=notification_id)
    if outbox.supersede(row) is not None:
        return None
    said = compose.notice(row, now)
    if said is None:
        why = (
            "not sent: its rule was deleted"
            if row.rule is None
            else "nothing new to say: what it was about resolved before this channel was told"
        )
        Notification.objects.filter(pk=row.pk, state=Notification.SENDING).update(
            state=Notification.SUPERSEDED, next_attempt_at=None, last_error=why
        )
        return None
    channel = channel_of(row)
    row.headline, row.payload = channel.render(said, row.target)
    row.sections = _sections(said)
    Notification.objects.filter(pk=row.pk).update(
        headline=row.headline[:300], payload=row.payload, sections=row.sections
    )
    try:
        channel.send(row)
    except Exception as error:
        text = error_text(error)
        final = row.attempts >= max_attempts() and not (said.fired or said.still)
        if not channel.worth_retrying(error):
            text = f"{text}; not retried: sending it again would get the same answer"
            final = True
        Notification.objects.filter(pk=row.pk, state=Notification.SENDING).update(
            state=Notification.FAILED if final else Notification.PENDING,
            last_error=text,
            next_attempt_at=None if final else now + timedelta(seconds=backoff_s(row.attempts)),
        )
        raise DeliveryFailed(text, final) from error
    # One commit: whoever sees it sent also sees whom it told and when (a crash between
    # the two would leave a delivered page that no RESOLVED could follow). Its state is
    # written last, so that holds for a reader of uncommitted rows too (SQLite's shared
    # cache with read_uncommitted, as the test suite's worker threads read).
    with transaction.atomic():
        compose.record_told(row, said, now)
        ids = [e.pk for e in said.fired + said.resolved + said.still]
        AlertEvent.objects.filter(pk__in=ids).filter(
            Q(last_notified_at__isnull=True) | Q(last_notified_at__lt=now)
        ).update(last_notified_at=now)
        Notification.objects.filter(pk=row.pk).update(
            state=Notification.SENT, sent_at=now, next_attempt_at=None
        )
    row.refresh_from_db()
    return row


def lost(now: datetime | None = None) -> list[int]:
    """Notifications whose delivery was lost (a worker died while sending, or a retry
    never came): pending again from now; their ids, to be sent again."""
    now = now or timezone.now()
    limit = now - LOST_AFTER
    Notification.objects.filter(state=Notification.SENDING, last_attempt_at__lt=limit).update(
        state=Notification.PENDING, last_error="the worker sending it stopped", next_attempt_at=now
    )
    overdue = Notification.objects.filter(state=Notification.PENDING, next_attempt_at__lt=limit)
    ids = list(overdue.values_list("pk", flat=True))
    if ids:
        Notification.objects.filter(pk__in=ids).update(next_attempt_at=now)
    return ids
