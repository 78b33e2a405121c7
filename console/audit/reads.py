"""Audited reads: an optional audit level that also records who read, exported or pulled
which messages, and who produced through the API (issue 32, item 11).

With ``TIDEMARK_AUDIT_READS`` on, ``ReadAuditMiddleware`` writes one audit row per
answered request (status below 400) to a URL of ``READ_ACTIONS``: who, the action
(``read.search``, ``read.message``, ``read.export``, ``read.pull``, ``read.stream``,
``read.dlq``, ``write.produce``), the topic or group, the path and query asked, and how
many messages when the view said (``note_count``; an export, streamed after the row is
written, says it once sent: ``note_streamed``). Offset commits, resets, event appends
and test messages are audited at every level already.

Read rows are kept bounded: older than ``TIDEMARK_AUDIT_READS_KEEP_DAYS`` or past the
newest ``TIDEMARK_AUDIT_READS_MAX_ROWS`` they are deleted (checked every
``PURGE_EVERY`` rows written, and by ``manage.py purge_read_audit``, which with
``--all`` deletes every read row). Other audit rows are never touched.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.audit.log import record
from console.audit.models import AuditEntry

#: (URL pattern name, method) → (audit action, the URL keyword or query field naming the
#: topic or group, its kind).
READ_ACTIONS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("messages:search", "GET"): ("read.search", "topic", "topic"),
    ("messages:export", "GET"): ("read.export", "topic", "topic"),
    ("messages:detail", "GET"): ("read.message", "message_id", "message"),
    ("messages:body", "GET"): ("read.message", "message_id", "message"),
    ("streams:stream", "GET"): ("read.stream", "topic", "topic"),
    ("groups:dlq", "GET"): ("read.dlq", "group", "group"),
    ("api-messages", "GET"): ("read.search", "topic", "topic"),
    ("api-messages-export", "GET"): ("read.export", "topic", "topic"),
    ("api-topic-filter-export", "GET"): ("read.export", "topic", "topic"),
    ("api-topic-tail-export", "GET"): ("read.export", "topic", "topic"),
    ("api-message", "GET"): ("read.message", "message_id", "message"),
    ("api-queue-messages", "GET"): ("read.pull", "topic", "topic"),
    ("api-stream-events", "GET"): ("read.stream", "topic", "topic"),
    ("api-group-dlq", "GET"): ("read.dlq", "group", "group"),
    ("api-topic-messages", "POST"): ("write.produce", "topic", "topic"),
}
READ_PREFIXES = ("read.", "write.")
#: A purge runs every this many read rows written.
PURGE_EVERY = 500
_COUNT = "_tidemark_read_count"
_ROW = "_tidemark_read_row"


def enabled() -> bool:
    return bool(getattr(settings, "TIDEMARK_AUDIT_READS", False))


def note_count(request: Any, count: int) -> None:
    """Say how many messages the request read or wrote (a DRF request or Django's)."""
    target = getattr(request, "_request", request)
    setattr(target, _COUNT, int(count))


def _read_rows():
    return AuditEntry.objects.filter(action__startswith=READ_PREFIXES[0]) | (
        AuditEntry.objects.filter(action__startswith=READ_PREFIXES[1])
    )


def purge(everything: bool = False) -> int:
    """Delete read rows past the age and count bounds (``everything``: all of them);
    the number deleted."""
    rows = _read_rows()
    if everything:
        return rows.delete()[0]
    keep_days = max(0, int(getattr(settings, "TIDEMARK_AUDIT_READS_KEEP_DAYS", 30)))
    deleted = rows.filter(created_at__lt=timezone.now() - timedelta(days=keep_days)).delete()[0]
    keep_rows = max(0, int(getattr(settings, "TIDEMARK_AUDIT_READS_MAX_ROWS", 100_000)))
    newest = list(
        _read_rows().order_by("-id").values_list("id", flat=True)[keep_rows : keep_rows + 1]
    )
    if newest:
        deleted += _read_rows().filter(id__lte=newest[0]).delete()[0]
    return deleted


def audit_read(request: Any, view_name: str, kwargs: dict, status: int) -> None:
    """Write the read row for an answered request, if reads are audited and the URL is one
    of ``READ_ACTIONS``."""
    if not enabled() or status >= 400:
        return
    entry = READ_ACTIONS.get((view_name, (request.method or "GET").upper()))
    user = getattr(request, "user", None)
    if entry is None or user is None or not user.is_authenticated:
        return
    action, key, kind = entry
    name = kwargs.get(key) or request.GET.get(key, "")
    count = getattr(request, _COUNT, None)
    query = request.META.get("QUERY_STRING", "")
    row = record(
        user,
        action,
        f"{kind} {name}" if name else kind,
        after={"count": count} if count is not None else None,
        detail=(request.path + (f"?{query}" if query else ""))[:2000],
    )
    setattr(getattr(request, "_request", request), _ROW, row)
    if row.pk % PURGE_EVERY == 0:
        purge()


def note_streamed(request: Any, count: int) -> None:
    """Say how many messages a streamed answer (an export) held, once it has been sent:
    its read row, written when the answer started, gets the count."""
    row = getattr(getattr(request, "_request", request), _ROW, None)
    if row is not None:
        AuditEntry.objects.filter(pk=row.pk).update(after={"count": int(count)})


class ReadAuditMiddleware:
    """Records audited reads after the response (see the module's docstring)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if enabled():
            match = getattr(request, "resolver_match", None)
            if match is not None:
                audit_read(request, match.view_name, match.kwargs, response.status_code)
        return response
