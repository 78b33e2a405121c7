"""What the monitoring knows right now, as the contract's dataclasses (metrics.py).

Everything comes from the sampled rows of the latest sample, and for the rates (and so the
drain time) from the oldest sample within the rate window before it
(``TIDEMARK_RATE_WINDOW_S``, 5 minutes by default; the previous sample when none is that
old yet): nothing here opens the store. ``group_metrics()`` builds every group once per
sample and keeps the result until a newer sample appears (per process), so alerts and pages
may call it as often as they like; ``group_metrics_for(group)`` reads only that group's
rows when the cache does not already hold it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from django.conf import settings

from console.monitoring import lag as lagmath
from console.monitoring.metrics import (
    CAUGHT_UP,
    GROUP_STATUSES,
    QUEUE_STATUSES,
    UNMEASURED,
    WHOLE_TOPIC,
    GroupMetrics,
    QueueMetrics,
    StoreMetrics,
    group_status,
)
from console.monitoring.models import CommitWindow, GroupSample, StoreSample, TopicSample

#: ``latest_two()``'s answer: the latest sample and the one the rates start from.
Samples = tuple[StoreSample | None, StoreSample | None]

_lock = threading.Lock()
_cache: dict[str, object] = {"token": None, "groups": None}


DEFAULT_RATE_WINDOW_S = 300
#: What the rates read of a row at the rate window's start (its other lists are not decoded).
WINDOW_START_FIELDS = ("group", "topic", "ts_ms", "consumed", "committed", "last_commits")
#: A consume rate measured between commits is trusted to this many times its commits'
#: jitter over the span measured (lag.commit_jitter).
JITTER_SIGMAS = 3


def rate_window_ms() -> int:
    """How far back rates are measured (``TIDEMARK_RATE_WINDOW_S``)."""
    return 1000 * max(1, int(getattr(settings, "TIDEMARK_RATE_WINDOW_S", DEFAULT_RATE_WINDOW_S)))


def latest_two() -> tuple[StoreSample | None, StoreSample | None]:
    """The latest sample and the one the rates are measured from: the oldest within the
    rate window before it, else the one just before it."""
    latest = StoreSample.objects.order_by("-ts_ms").first()
    if latest is None:
        return None, None
    earlier = StoreSample.objects.filter(ts_ms__lt=latest.ts_ms)
    start = earlier.filter(ts_ms__gte=latest.ts_ms - rate_window_ms()).order_by("ts_ms").first()
    return latest, start or earlier.order_by("-ts_ms").first()


def _topic_rows(ts_ms: int | None, topics: Iterable[str] | None = None) -> dict[str, TopicSample]:
    if ts_ms is None:
        return {}
    rows = TopicSample.objects.filter(ts_ms=ts_ms)
    if topics is not None:
        rows = rows.filter(topic__in=sorted(set(topics)))
    return {row.topic: row for row in rows}


class _Pace:
    """A group's consumption and production over the rate window, queue by queue,
    measured between commits (lag.queue_consume_rate), and whether its lag is fresh
    (lag.queue_is_fresh): what the drain answer is decided on."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.interval_ms = int(settings.TIDEMARK_SAMPLE_INTERVAL_S) * 1000
        self.consume = self.produce = self.noise = 0.0
        self.measured = False
        self.fresh: bool | None = True

    def add(
        self,
        row: GroupSample,
        before: GroupSample | None,
        topic: TopicSample | None,
        then: TopicSample | None,
        commits: list | None,
    ) -> None:
        cadences: dict[int, float | None] = {}
        for queue, lag in enumerate(row.lags):
            if lag <= 0:
                continue
            window = commits[queue] if commits is not None and queue < len(commits) else []
            cadence = cadences[queue] = lagmath.commit_cadence_ms(window)
            fresh = lagmath.queue_is_fresh(
                lag,
                row.lag_seconds[queue],
                row.last_commits[queue],
                self.now_ms,
                cadence,
                self.interval_ms,
            )
            if fresh is False or self.fresh is False:
                self.fresh = False
            elif fresh is None:
                self.fresh = None
        if before is None or topic is None or then is None or topic.ts_ms <= then.ts_ms:
            return
        span_s = (topic.ts_ms - then.ts_ms) / 1000
        moved = sum(
            max(0, now - was)
            for now, was in zip(row.committed, before.committed, strict=False)
            if now is not None and was is not None
        )
        by_reset = row.consumed - before.consumed != moved  # a reset moved offsets meanwhile
        if by_reset:
            self.measured = True
            self.consume += lagmath.rate(before.consumed, before.ts_ms, row.consumed, row.ts_ms)
            self.produce += max(0, topic.appended - then.appended) / span_s
            return
        for queue in range(len(row.lags)):
            if queue >= len(topic.max_offsets) or queue >= len(then.max_offsets):
                continue
            window = commits[queue] if commits is not None and queue < len(commits) else []
            then_ms = _item_or_none(before.last_commits, queue)
            if then_ms is not None and row.last_commits[queue] == then_ms:
                cadence = (
                    cadences[queue] if queue in cadences else lagmath.commit_cadence_ms(window)
                )
            else:
                cadence = None  # not needed: a commit in the window measures the rate
            rate = lagmath.queue_consume_rate(
                _item_or_none(before.committed, queue),
                then_ms,
                row.committed[queue],
                row.last_commits[queue],
                self.now_ms,
                cadence,
                self.interval_ms,
            )
            if rate is None:
                continue
            self.measured = True
            self.consume += rate
            span_ms = (row.last_commits[queue] or 0) - (
                _item_or_none(before.last_commits, queue) or 0
            )
            if span_ms > 0:
                self.noise += JITTER_SIGMAS * lagmath.commit_jitter(window) * 1000 / span_ms
            self.produce += max(0, topic.max_offsets[queue] - then.max_offsets[queue]) / span_s


def _item_or_none(values: list, index: int):
    return values[index] if index < len(values) else None


def _build(
    group: str,
    rows: list[GroupSample],
    prev_rows: dict[str, GroupSample],
    topics_now: dict[str, TopicSample],
    topics_then: dict[str, TopicSample],
    latest: StoreSample,
    previous: StoreSample | None,
    windows: dict[str, list] | None = None,
) -> GroupMetrics:
    """One group's metrics from its rows of the latest sample (one per topic);
    ``windows``: its commit windows by topic."""
    queues: list[QueueMetrics] = []
    consume_rate = produce_rate = 0.0
    measured = False
    pace = _Pace(latest.ts_ms)
    for row in sorted(rows, key=lambda r: r.topic):
        topic = topics_now.get(row.topic)
        maxes = topic.max_offsets if topic is not None else []
        for queue, committed in enumerate(row.committed):
            queues.append(
                QueueMetrics(
                    group=group,
                    topic=row.topic,
                    queue=WHOLE_TOPIC if row.aggregated else queue,
                    max_offset=maxes[queue] if queue < len(maxes) else 0,
                    committed=committed,
                    lag=row.lags[queue],
                    lag_seconds=row.lag_seconds[queue],
                    last_commit_ms=row.last_commits[queue],
                    status=row.statuses[queue],
                    lost=_item(row.lost_per_queue, queue),
                )
            )
        if previous is not None:
            before = prev_rows.get(row.topic)
            if before is not None:
                measured = True
                consume_rate += lagmath.rate(
                    before.consumed, before.ts_ms, row.consumed, latest.ts_ms
                )
            then = topics_then.get(row.topic)
            if topic is not None and then is not None:
                produce_rate += lagmath.rate(then.appended, then.ts_ms, topic.appended, topic.ts_ms)
            pace.add(row, before, topic, then, (windows or {}).get(row.topic))
    lag = sum(row.lag for row in rows)
    seconds = [q.lag_seconds for q in queues if q.lag_seconds is not None]
    expiries = [row.expires_at_ms for row in rows if row.expires_at_ms is not None]
    interval = settings.TIDEMARK_SAMPLE_INTERVAL_S
    if pace.measured:
        drain = lagmath.drain(lag, pace.consume, pace.produce, interval, pace.fresh, pace.noise)
    elif pace.fresh:  # no commit in a window shorter than the consumer's cadence yet
        drain = lagmath.Drain(CAUGHT_UP, 0.0)
    else:
        drain = lagmath.drain(lag, consume_rate, produce_rate, interval, pace.fresh)
    if not measured and drain.state != CAUGHT_UP:
        drain = lagmath.Drain(UNMEASURED, None)  # the group's first sample: no rate yet
    status = group_status([q.status for q in queues])
    return GroupMetrics(
        group=group,
        topics=sorted(row.topic for row in rows),
        lag=lag,
        lag_seconds=max(seconds) if seconds else (0.0 if lag == 0 else None),
        consume_rate=consume_rate,
        produce_rate=produce_rate,
        drain_seconds=drain.seconds,
        expiry_risk_hours=lagmath.expiry_risk_hours(
            min(expiries) if expiries else None, latest.ts_ms
        ),
        status=status,
        sampled_ms=latest.ts_ms,
        queues=queues,
        lost=sum(row.lost for row in rows),
        drain_state=drain.state,
        status_reason=_reason(rows, status),
    )


def _reason(rows: list[GroupSample], status: str) -> str:
    """The reason of the topic whose status is the group's worst."""
    worst = max(rows, key=lambda r: QUEUE_STATUSES.index(r.status), default=None)
    if worst is None:
        return ""
    return f"{status}: {worst.status_reason}" if worst.status_reason else status


def _item(values: list, index: int) -> int:
    return values[index] if index < len(values) and values[index] is not None else 0


def _worst_first(metrics: GroupMetrics) -> tuple:
    return (
        -GROUP_STATUSES.index(metrics.status),
        -metrics.lag,
        -(metrics.lag_seconds or 0.0),
        metrics.group,
    )


def _all_groups(latest: StoreSample, previous: StoreSample | None) -> list[GroupMetrics]:
    by_group: dict[str, list[GroupSample]] = {}
    for row in GroupSample.objects.filter(ts_ms=latest.ts_ms):
        by_group.setdefault(row.group, []).append(row)
    prev_by_group: dict[str, dict[str, GroupSample]] = {}
    if previous is not None:
        for row in GroupSample.objects.filter(ts_ms=previous.ts_ms).only(*WINDOW_START_FIELDS):
            prev_by_group.setdefault(row.group, {})[row.topic] = row
    topics_now = _topic_rows(latest.ts_ms)
    topics_then = _topic_rows(previous.ts_ms if previous else None)
    if previous is not None:
        _fill_window_starts(latest, previous, by_group, prev_by_group, topics_now, topics_then)
    windows = _commit_windows()
    built = [
        _build(
            group,
            rows,
            prev_by_group.get(group, {}),
            topics_now,
            topics_then,
            latest,
            previous,
            windows.get(group),
        )
        for group, rows in by_group.items()
    ]
    return sorted(built, key=_worst_first)


def group_metrics(samples: Samples | None = None) -> list[GroupMetrics]:
    """Every group sampled in the latest sample, worst first (status, then lag);
    ``samples``: ``latest_two()``'s answer when the caller has read it already."""
    latest, previous = latest_two() if samples is None else samples
    if latest is None:
        return []
    with _lock:
        if _cache["token"] == latest.token:
            return list(_cache["groups"])  # type: ignore[arg-type]
    groups = _all_groups(latest, previous)
    with _lock:
        _cache["token"], _cache["groups"] = latest.token, groups
    return list(groups)


def group_metrics_for(group: str) -> GroupMetrics | None:
    """One group's metrics from the latest sample; None when that sample does not have it."""
    latest, previous = latest_two()
    if latest is None:
        return None
    with _lock:
        if _cache["token"] == latest.token:
            return next((g for g in _cache["groups"] if g.group == group), None)  # type: ignore[union-attr]
    rows = list(GroupSample.objects.filter(ts_ms=latest.ts_ms, group=group))
    if not rows:
        return None
    topics = [row.topic for row in rows]
    prev_rows = (
        {
            r.topic: r
            for r in GroupSample.objects.filter(ts_ms=previous.ts_ms, group=group).only(
                *WINDOW_START_FIELDS
            )
        }
        if previous is not None
        else {}
    )
    topics_now = _topic_rows(latest.ts_ms, topics)
    topics_then = _topic_rows(previous.ts_ms if previous else None, topics)
    if previous is not None:
        prev_by_group = {group: prev_rows}
        _fill_window_starts(latest, previous, {group: rows}, prev_by_group, topics_now, topics_then)
    windows = _commit_windows(group).get(group)
    return _build(group, rows, prev_rows, topics_now, topics_then, latest, previous, windows)


def _commit_windows(group: str | None = None) -> dict[str, dict[str, list]]:
    """Commit windows by group, then topic (all groups', or one group's)."""
    rows = CommitWindow.objects.all() if group is None else CommitWindow.objects.filter(group=group)
    windows: dict[str, dict[str, list]] = {}
    for name, topic, commits in rows.values_list("group", "topic", "commits"):
        windows.setdefault(name, {})[topic] = commits
    return windows


def _fill_window_starts(
    latest: StoreSample,
    previous: StoreSample,
    by_group: dict[str, list[GroupSample]],
    prev_by_group: dict[str, dict[str, GroupSample]],
    topics_now: dict[str, TopicSample],
    topics_then: dict[str, TopicSample],
) -> None:
    """A group or topic that the window's first sample did not have yet (it appeared
    within the window) is measured from its own first row in the window."""
    missing = [
        (group, row.topic)
        for group, rows in by_group.items()
        for row in rows
        if row.topic not in prev_by_group.get(group, {})
    ]
    window = {"ts_ms__gt": previous.ts_ms, "ts_ms__lt": latest.ts_ms}
    if missing:
        wanted = set(missing)
        earliest = GroupSample.objects.filter(group__in={g for g, _ in missing}, **window)
        earliest = earliest.only(*WINDOW_START_FIELDS).order_by("ts_ms")
        for row in earliest:
            if (row.group, row.topic) in wanted:
                prev_by_group.setdefault(row.group, {})[row.topic] = row
                wanted.discard((row.group, row.topic))
    new_topics = set(topics_now) - set(topics_then)
    if new_topics:
        for row in TopicSample.objects.filter(topic__in=new_topics, **window).order_by("ts_ms"):
            topics_then.setdefault(row.topic, row)


def store_metrics(samples: Samples | None = None) -> StoreMetrics | None:
    """The store as of the latest sample; None before the first sample. ``samples``:
    ``latest_two()``'s answer when the caller has read it already."""
    latest, previous = latest_two() if samples is None else samples
    if latest is None:
        return None
    produce = consume = 0.0
    if previous is not None:
        produce = lagmath.rate(previous.appended, previous.ts_ms, latest.appended, latest.ts_ms)
        consume = lagmath.rate(previous.consumed, previous.ts_ms, latest.consumed, latest.ts_ms)
    return StoreMetrics(
        disk_bytes=latest.disk_bytes,
        disk_ratio=latest.disk_ratio,
        sampled_ms=latest.ts_ms,
        produce_rate=produce,
        consume_rate=consume,
        backlog=latest.backlog,
    )


def scoped_store_metrics(
    topics: Callable[[str], bool], groups: list[GroupMetrics], samples: Samples | None = None
) -> StoreMetrics | None:
    """``store_metrics`` as a scoped role sees it: produced to the ``topics`` it takes,
    consumed by ``groups`` (their metrics), their backlog; the disk as it is."""
    if samples is None:
        samples = latest_two()
    whole = store_metrics(samples)
    if whole is None:
        return None
    latest, previous = samples
    produce = 0.0
    if latest is not None and previous is not None:
        then = _topic_rows(previous.ts_ms)
        for name, row in _topic_rows(latest.ts_ms).items():
            if name in then and topics(name):
                before = then[name]
                produce += lagmath.rate(before.appended, before.ts_ms, row.appended, row.ts_ms)
    return StoreMetrics(
        disk_bytes=whole.disk_bytes,
        disk_ratio=whole.disk_ratio,
        sampled_ms=whole.sampled_ms,
        produce_rate=produce,
        consume_rate=sum(group.consume_rate or 0.0 for group in groups),
        backlog=sum(group.lag for group in groups),
    )


def status_since(group: str, status: str, scan: int = 2000) -> int | None:
    """When (sample time, ms) the group's status became ``status``, as far back as the
    latest ``scan`` rows of it tell; None before any sample."""
    rows = GroupSample.objects.filter(group=group).order_by("-ts_ms")[:scan]
    worst: dict[int, str] = {}
    for ts_ms, queue_status in rows.values_list("ts_ms", "status"):
        level = group_status([queue_status])
        held = worst.get(ts_ms)
        if held is None or GROUP_STATUSES.index(level) > GROUP_STATUSES.index(held):
            worst[ts_ms] = level
    since = None
    for ts_ms in sorted(worst, reverse=True):
        if worst[ts_ms] != status:
            break
        since = ts_ms
    return since
