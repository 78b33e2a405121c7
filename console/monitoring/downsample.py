"""Thin the sampled history as it ages, RabbitMQ-style.

10 s points are kept 6 hours, then one point per minute for 7 days, then one point per
hour for 90 days; older points are deleted. Every value sampled is a gauge or a counter
(offsets, lags, totals, counters of appended and consumed messages), so a coarser point is
the last point of its bucket: the row is kept, relabelled with the coarser resolution, and
the other rows of the bucket are deleted. The last point alone would lose what happened in
between (a 40-minute ERR episode with lag 4,800 between two hourly points), so the kept row
also keeps the bucket's least and most lag (a group's ``lag_min``/``lag_max``, the store's
``backlog_min``/``backlog_max``) and its worst status (``worst_status``): the charts draw
that envelope. Each series is thinned on its own (the store; each topic; each group and
topic).

Idempotent and safe to run twice at once: the cut-off is aligned to whole buckets, and
each chunk of buckets is relabelled and deleted in one transaction, so a second run sees
either the chunk untouched (and makes the same choice) or already thinned (and finds
nothing left to do). It also forgets the state rows (offset timelines, commit windows) of
topics and groups that are no longer sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection, transaction
from django.db.models import Min

from console.monitoring.models import (
    RES_HOUR,
    RES_MINUTE,
    RES_RAW,
    CommitWindow,
    GroupSample,
    OffsetTimeline,
    StoreSample,
    TopicSample,
)
from console.monitoring.status import worse
from storeadapter.engine import clock as engine_clock

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

#: (resolution, kept at that resolution for, then thinned to)
TIERS: list[tuple[int, int, int]] = [
    (RES_RAW, 6 * HOUR_MS, RES_MINUTE),
    (RES_MINUTE, 7 * DAY_MS, RES_HOUR),
]
#: Points older than this are deleted, whatever their resolution.
RETENTION_MS = 90 * DAY_MS

#: Each model with the fields that name one series of it.
SERIES: list[tuple[type, tuple[str, ...]]] = [
    (StoreSample, ()),
    (TopicSample, ("topic",)),
    (GroupSample, ("group", "topic")),
]
#: Per model, its (value, least, most) fields and whether it has a worst status.
ENVELOPES: dict[type, tuple[str, str, str, bool]] = {
    StoreSample: ("backlog", "backlog_min", "backlog_max", False),
    GroupSample: ("lag", "lag_min", "lag_max", True),
}
#: Per model, the fields whose most over the bucket is kept besides (the kept row's own
#: value is the last point's): a group's largest lag in seconds over its queues.
PEAKS: dict[type, tuple[str, str]] = {GroupSample: ("lag_seconds", "lag_seconds_max")}

#: Fine points per series read at once (a chunk holds whole buckets).
CHUNK_POINTS = 60
#: Ids per UPDATE statement.
ID_BATCH = 500


@dataclass
class DownsampleReport:
    now_ms: int
    #: Per "<model>@<resolution>": rows relabelled to the coarser resolution.
    kept: dict[str, int] = field(default_factory=dict)
    #: Rows deleted: thinned away, and past retention.
    thinned: int = 0
    expired: int = 0
    state_forgotten: int = 0

    def message(self) -> str:
        kept = ", ".join(f"{name} {count}" for name, count in sorted(self.kept.items()) if count)
        return (
            f"kept {sum(self.kept.values())} coarser points ({kept or 'none'}), "
            f"deleted {self.thinned} thinned and {self.expired} expired rows, "
            f"forgot {self.state_forgotten} state rows"
        )


def cutoff_for(now_ms: int, keep_ms: int, coarser: int) -> int:
    """Points before this are thinned: ``now − keep``, down to a whole coarser bucket."""
    cutoff = now_ms - keep_ms
    return cutoff - cutoff % (coarser * 1000)


def thin_series(model: type, keys: tuple[str, ...], resolution: int, coarser: int, cutoff: int):
    """Thin ``model``'s points of ``resolution`` older than ``cutoff`` to ``coarser``.

    Returns (rows kept, rows deleted).
    """
    bucket_ms = coarser * 1000
    per_bucket = max(1, coarser // resolution)
    chunk_ms = bucket_ms * max(1, CHUNK_POINTS // per_bucket)
    fine = model.objects.filter(resolution=resolution, ts_ms__lt=cutoff)
    oldest = fine.aggregate(oldest=Min("ts_ms"))["oldest"]
    kept = deleted = 0
    if oldest is None:
        return kept, deleted
    envelope = ENVELOPES.get(model)
    extra: tuple[str, ...] = ()
    if envelope is not None:
        value, least, most, has_status = envelope
        extra = (value, least, most, *(("status", "worst_status") if has_status else ()))
    peak = PEAKS.get(model)
    if peak is not None:
        extra = (*extra, *peak)
    start = oldest - oldest % bucket_ms
    while start < cutoff:
        end = min(cutoff, start + chunk_ms)
        with transaction.atomic():
            rows = fine.filter(ts_ms__gte=start, ts_ms__lt=end).values_list(
                "id", *keys, "ts_ms", *extra
            )
            last: dict[tuple, tuple[int, int]] = {}
            spans: dict[tuple, list] = {}
            width = len(keys)
            for row_id, *rest in rows:
                series, ts, figures = rest[:width], rest[width], rest[width + 1 :]
                bucket = (*series, ts // bucket_ms)
                if bucket not in last or ts > last[bucket][0]:
                    last[bucket] = (ts, row_id)
                if envelope is not None:
                    _widen(spans, bucket, figures[:-2] if peak else figures)
                if peak is not None:
                    _widen_peak(spans, bucket, *figures[-2:])
            ids = [row_id for _ts, row_id in last.values()]
            for index in range(0, len(ids), ID_BATCH):
                kept += model.objects.filter(
                    id__in=ids[index : index + ID_BATCH], resolution=resolution
                ).update(resolution=coarser)
            if envelope is not None:
                _save_envelopes(
                    model, envelope, peak, [(last[b][1], span) for b, span in spans.items()]
                )
            deleted += fine.filter(ts_ms__gte=start, ts_ms__lt=end).delete()[0]
        start = end
        if not last:  # an empty chunk: go on from the next point, past the gap
            following = fine.filter(ts_ms__gte=end).aggregate(next=Min("ts_ms"))["next"]
            if following is None:
                break
            start = max(end, following - following % bucket_ms)
    return kept, deleted


def _widen(spans: dict[tuple, list], bucket: tuple, figures: list) -> None:
    """Fold one row's (value, least, most[, status, worst]) into its bucket's span."""
    value, least, most, *statuses = figures
    low = value if least is None else least
    high = value if most is None else most
    worst = ""
    for status in statuses:
        worst = worse(worst, status)
    span = spans.get(bucket)
    if span is None:
        spans[bucket] = [low, high, worst, None]
        return
    span[0], span[1] = min(span[0], low), max(span[1], high)
    span[2] = worse(span[2], worst)


def _widen_peak(spans: dict[tuple, list], bucket: tuple, values: list | None, most) -> None:
    """Fold one row's peak (its own most, else the most of its per-queue values)."""
    known = [v for v in values or [] if v is not None]
    high = most if most is not None else (max(known) if known else None)
    span = spans[bucket]
    if high is not None:
        span[3] = high if span[3] is None else max(span[3], high)


def _save_envelopes(
    model: type, envelope: tuple, peak: tuple[str, str] | None, rows: list[tuple[int, list]]
) -> None:
    """Write each kept row's span with one prepared statement."""
    _value, least, most, has_status = envelope
    quote = connection.ops.quote_name
    columns = [least, most, *(("worst_status",) if has_status else ())]
    params = [
        (*span[: len(columns)], *((span[3],) if peak else ()), row_id) for row_id, span in rows
    ]
    if peak is not None:
        columns.append(peak[1])
    sets = ", ".join(f"{quote(name)} = %s" for name in columns)
    sql = f"UPDATE {quote(model._meta.db_table)} SET {sets} WHERE {quote('id')} = %s"
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def forget_state() -> int:
    """Delete offset timelines and commit windows of topics and groups that the latest
    sample no longer has (and that no sample since changed)."""
    latest = StoreSample.objects.order_by("-ts_ms").values_list("ts_ms", flat=True).first()
    if latest is None:
        return 0
    topics = set(TopicSample.objects.filter(ts_ms=latest).values_list("topic", flat=True))
    pairs = set(GroupSample.objects.filter(ts_ms=latest).values_list("group", "topic"))
    stale_timelines = [
        pk
        for pk, topic in OffsetTimeline.objects.filter(updated_ms__lte=latest).values_list(
            "id", "topic"
        )
        if topic not in topics
    ]
    stale_windows = [
        pk
        for pk, group, topic in CommitWindow.objects.filter(updated_ms__lte=latest).values_list(
            "id", "group", "topic"
        )
        if (group, topic) not in pairs
    ]
    forgotten = 0
    for model, ids in ((OffsetTimeline, stale_timelines), (CommitWindow, stale_windows)):
        for index in range(0, len(ids), ID_BATCH):
            forgotten += model.objects.filter(id__in=ids[index : index + ID_BATCH]).delete()[0]
    return forgotten


def downsample(now_ms: int | None = None) -> DownsampleReport:
    """Thin every tier, delete what is past retention, forget state of vanished series."""
    now = engine_clock.now_ms() if now_ms is None else int(now_ms)
    report = DownsampleReport(now)
    for resolution, keep_ms, coarser in TIERS:
        cutoff = cutoff_for(now, keep_ms, coarser)
        for model, keys in SERIES:
            kept, deleted = thin_series(model, keys, resolution, coarser, cutoff)
            name = f"{model.__name__}@{coarser}s"
            report.kept[name] = report.kept.get(name, 0) + kept
            report.thinned += deleted
    for model, _keys in SERIES:
        report.expired += model.objects.filter(ts_ms__lt=now - RETENTION_MS).delete()[0]
    report.state_forgotten = forget_state()
    return report
