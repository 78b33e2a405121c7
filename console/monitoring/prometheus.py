"""/metrics: what the console knows, in Prometheus' text format (prometheus-client).

Three parts, each read when scraped:

- **the store, now**: up, disk use and its thresholds, segments, the commit log's
  offsets, the last flush, the last retention run and the last recovery (the engine's
  ``stats(topics=False)`` and ``storeadapter.disk_use``; nothing per queue);
- **topics, now**: per topic its queue count, per queue its start and end offsets;
- **groups, as of the latest sample**: per group lag, lag in seconds, Burrow status (a
  state set, and Burrow's number), lost to retention, consume and produce rates, drain
  time and answer, live members; per group, topic and queue lag, lag in seconds,
  committed offset, lost to retention and status in Burrow's numbers (a big topic is one
  row, ``queue="all"``, as the sampler keeps it); per queue a live member holds, that
  member (``tidemark_queue_member_info``, read now, as the group's page does). These
  are the figures the pages and alerts use; ``tidemark_sample_timestamp_seconds`` says
  when they were read;
- **background tasks**: per task its last success, age since then, interval, staleness
  (the rule of /tasks/), runs and failures;
- **the alerting**: notifications by state and channel, the last delivery and the oldest
  undelivered notification per channel, firing events and failing evaluations per rule,
  the last evaluation and heartbeat (console/alerts/exposition.py).

docs/deploy/tidemark-kafka-names.rules.yml turns these into kafka-lag-exporter's,
kafka_exporter's and Burrow's names for the dashboards people already have.

Names follow Prometheus' conventions: base units (seconds, bytes, ratios 0–1),
``_total`` for counters, ``_timestamp_seconds`` for times since the epoch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

from django.conf import settings
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
)

from console.alerts.exposition import alert_families
from console.background.health import task_health
from console.monitoring.current import group_metrics, store_metrics
from console.monitoring.metrics import (
    CAUGHT_UP,
    DRAINING,
    ERR,
    GROUP_STATUSES,
    NOT_DRAINING,
    OK,
    QUEUE_STATUSES,
    REWIND,
    STALL,
    STOP,
    UNMEASURED,
    WARN,
    WHOLE_TOPIC,
    GroupMetrics,
)
from storeadapter.engine import StoreStats

PREFIX = "tidemark"
QUEUE_LABELS = ["group", "topic", "queue"]
#: Burrow's status numbers (its StatusConstant, as Burrow's own /metrics exports them):
#: NOTFOUND 0, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, REWIND 6.
BURROW_CODES = {"NOTFOUND": 0, OK: 1, WARN: 2, ERR: 3, STOP: 4, STALL: 5, REWIND: 6}
#: tidemark_queue_status's values: Burrow's numbers.
QUEUE_STATUS_CODES = {status: BURROW_CODES[status] for status in QUEUE_STATUSES}
#: tidemark_group_status_code's values: Burrow's numbers.
GROUP_STATUS_CODES = {status: BURROW_CODES[status] for status in GROUP_STATUSES}
#: The drain answers, as the states of tidemark_group_drain.
DRAIN_STATES = (CAUGHT_UP, DRAINING, NOT_DRAINING, UNMEASURED)


def queue_status_code(status: str | None) -> int:
    """Burrow's number for a queue's status; NOTFOUND (0) for one never committed on."""
    return BURROW_CODES["NOTFOUND"] if status is None else QUEUE_STATUS_CODES[status]


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)


def _seconds(ms: float | int | None) -> float | None:
    return None if ms is None else ms / 1000


def store_families() -> Iterator[Metric]:
    from console.core.store import get_store
    from storeadapter.disk_use import disk_use

    up = _gauge("store_up", "1 when the store is open and accepts writes (not failed), else 0.")
    try:
        store = get_store()
        stats = store.stats(topics=False)
        disk = disk_use(store)
    except Exception:  # noqa: BLE001 - a scrape must answer whatever the store does
        up.add_metric([], 0)
        yield up
        return
    up.add_metric([], 0 if stats.failed else 1)
    yield up

    gauges = [
        ("store_disk_used_ratio", "Used over total of the store's file system.", disk.ratio),
        ("store_disk_used_bytes", "Used bytes of the store's file system.", disk.used_bytes),
        ("store_disk_total_bytes", "Size of the store's file system.", disk.total_bytes),
        ("store_segments", "Commit-log segments on disk.", stats.segment_count),
        ("store_log_bytes", "Disk space the commit-log segments take.", stats.disk_bytes),
        ("store_segment_bytes", "Size of new commit-log segments.", stats.segment_bytes),
        ("store_retention_seconds", "How long segments are kept.", stats.retention_hours * 3600),
    ]
    for name, doc, value in gauges:
        family = _gauge(name, doc)
        family.add_metric([], value)
        yield family
    thresholds = _gauge(
        "store_disk_threshold_ratio",
        "Disk use at which retention deletes expired segments at once (warn), deletes "
        "before expiry (force), and appends are refused (reject).",
        ["threshold"],
    )
    for name, ratio in (
        ("warn", disk.warn_ratio),
        ("force", disk.force_ratio),
        ("reject", disk.reject_ratio),
    ):
        thresholds.add_metric([name], ratio)
    yield thresholds
    log = stats.commit_log
    offsets = _gauge(
        "store_commit_log_offset",
        "Commit-log byte offsets: first kept (min), end (tail), fsynced up to (flushed).",
        ["position"],
    )
    for position in ("min_offset", "tail", "flushed"):
        offsets.add_metric([position.removesuffix("_offset")], getattr(log, position))
    yield offsets
    yield from _store_times(stats)


def _store_times(stats: StoreStats) -> Iterator[Metric]:
    flushed = _seconds(stats.last_flush_ms)
    if flushed:
        family = _gauge("store_last_flush_timestamp_seconds", "When the store last fsynced.")
        family.add_metric([], flushed)
        yield family
    retention = stats.last_retention or {}
    if retention.get("now_ms") is not None:
        for name, doc, value in (
            (
                "store_last_retention_timestamp_seconds",
                "When retention last ran.",
                retention["now_ms"] / 1000,
            ),
            (
                "store_last_retention_deleted_segments",
                "Segments the last retention run deleted.",
                len(retention.get("deleted_segments") or []),
            ),
            (
                "store_last_retention_freed_bytes",
                "Bytes the last retention run freed.",
                retention.get("freed_bytes", 0),
            ),
        ):
            family = _gauge(name, doc)
            family.add_metric([], value)
            yield family
    recovery = stats.last_recovery
    if recovery.finished_ms:
        for name, doc, value in (
            (
                "store_last_recovery_timestamp_seconds",
                "When the store was last opened by a first process (and recovered if it "
                "had crashed).",
                recovery.finished_ms / 1000,
            ),
            (
                "store_last_recovery_clean",
                "1 when the last opening found a clean shutdown, 0 after a crash.",
                1 if recovery.clean_shutdown else 0,
            ),
            (
                "store_last_recovery_duration_seconds",
                "How long the last recovery took.",
                (recovery.duration_ms or 0) / 1000,
            ),
            (
                "store_last_recovery_truncated_bytes",
                "Bytes of torn tail the last recovery cut.",
                recovery.truncated_bytes,
            ),
            (
                "store_last_recovery_corruptions",
                "Damaged stretches the last recovery reported.",
                len(recovery.corruptions),
            ),
        ):
            family = _gauge(name, doc)
            family.add_metric([], value)
            yield family


def topic_families() -> Iterator[Metric]:
    """Per topic its queue count, and per queue its start and end offsets, read now
    (Kafka's earliest and latest offsets). A topic above ``TIDEMARK_BIG_TOPIC_QUEUES``
    queues has its count only: a scrape never reads tens of thousands of queues."""
    from console.core.store import get_store

    queues = _gauge("topic_queues", "Queues of the topic.", ["topic"])
    start = _gauge(
        "queue_start_offset",
        "The queue's first offset still kept (Kafka's earliest offset).",
        ["topic", "queue"],
    )
    end = _gauge(
        "queue_end_offset",
        "The offset the queue's next message gets (Kafka's latest offset).",
        ["topic", "queue"],
    )
    try:
        store = get_store()
        topics = store.topics()
    except Exception:  # noqa: BLE001 - tidemark_store_up already says the store is down
        return
    big = int(getattr(settings, "TIDEMARK_BIG_TOPIC_QUEUES", 10_000))
    for topic in topics:
        queues.add_metric([topic.name], topic.queues)
        if topic.queues > big:
            continue
        for queue, (first, last) in enumerate(store.queue_ranges(topic.name)):
            start.add_metric([topic.name, str(queue)], first)
            end.add_metric([topic.name, str(queue)], last)
    yield from (queues, start, end)


def _members(groups: list[GroupMetrics]) -> dict[str, list[dict]]:
    """Live members per group (``group_members``); none when the store cannot be read."""
    from console.core.store import get_store
    from console.groups.detail import live_members

    try:
        store = get_store()
    except Exception:  # noqa: BLE001 - tidemark_store_up already says the store is down
        return {}
    return {group.group: live_members(store, group.group) for group in groups}


def group_families() -> Iterator[Metric]:
    groups = group_metrics()
    sample = store_metrics()
    if sample is not None:
        family = _gauge(
            "sample_timestamp_seconds", "When the sample the group figures come from was taken."
        )
        family.add_metric([], sample.sampled_ms / 1000)
        yield family
    group_lag = _gauge("group_lag_messages", "Messages behind, over the group's queues.", ["group"])
    group_seconds = _gauge(
        "group_lag_seconds", "Age of the group's oldest unconsumed message.", ["group"]
    )
    group_status = StateSetMetricFamily(
        f"{PREFIX}_group_status", "The group's Burrow status (OK, WARN, ERR).", labels=["group"]
    )
    group_code = _gauge(
        "group_status_code",
        "The group's Burrow status as Burrow numbers it: 1 OK, 2 WARN, 3 ERR.",
        ["group"],
    )
    group_lost = _gauge(
        "group_lost_messages",
        "Messages retention deleted before the group consumed them, over its queues.",
        ["group"],
    )
    consumed = _gauge(
        "group_consumed_per_second",
        "Messages the group consumed per second over the rate window.",
        ["group"],
    )
    produced = _gauge(
        "group_produced_per_second",
        "Messages written per second to the group's queues over the rate window.",
        ["group"],
    )
    drain_seconds = _gauge(
        "group_drain_seconds",
        "Seconds until the group's lag is consumed at the window's rates (0: caught up, "
        "+Inf: not draining; left out before a rate could be measured).",
        ["group"],
    )
    drain = StateSetMetricFamily(
        f"{PREFIX}_group_drain",
        "The group's drain answer: caught up, draining, not draining, not measured yet.",
        labels=["group"],
    )
    members = _gauge("group_members", "Live members of the group (consumers).", ["group"])
    holders = _gauge(
        "queue_member_info",
        "1 for each queue a live member of the group holds: the member's consumer id and host "
        "(kafka-lag-exporter's consumer_id and member_host).",
        [*QUEUE_LABELS, "consumer_id", "member_host"],
    )
    lag = _gauge("queue_lag_messages", "Messages behind the queue's end.", QUEUE_LABELS)
    seconds = _gauge(
        "queue_lag_seconds", "Age of the oldest unconsumed message in the queue.", QUEUE_LABELS
    )
    committed = _gauge("queue_committed_offset", "The group's committed offset.", QUEUE_LABELS)
    lost = _gauge(
        "queue_lost_messages",
        "Messages of the queue retention deleted before the group consumed them.",
        QUEUE_LABELS,
    )
    status = _gauge(
        "queue_status",
        "Burrow status of the group on the queue, as Burrow numbers it: "
        + ", ".join(f"{code} {name}" for name, code in BURROW_CODES.items() if name != ERR)
        + " (NOTFOUND: never committed on).",
        QUEUE_LABELS,
    )
    live = _members(groups)
    for group in groups:
        name = group.group
        group_lag.add_metric([name], group.lag)
        if group.lag_seconds is not None:
            group_seconds.add_metric([name], group.lag_seconds)
        group_status.add_metric([name], {s: s == group.status for s in GROUP_STATUSES})
        group_code.add_metric([name], GROUP_STATUS_CODES[group.status])
        group_lost.add_metric([name], group.lost)
        consumed.add_metric([name], group.consume_rate)
        produced.add_metric([name], group.produce_rate)
        answer = group.drain
        if answer == NOT_DRAINING:
            drain_seconds.add_metric([name], math.inf)
        elif answer in (CAUGHT_UP, DRAINING):
            drain_seconds.add_metric([name], 0.0 if answer == CAUGHT_UP else group.drain_seconds)
        drain.add_metric([name], {state: state == answer for state in DRAIN_STATES})
        if name in live:
            members.add_metric([name], len(live[name]))
            for member in live[name]:
                for topic, queue in member["queues"]:
                    holder = [member["consumer_id"], member["host"]]
                    holders.add_metric([name, topic, str(queue), *holder], 1)
        for queue in group.queues:
            labels = [name, queue.topic, "all" if queue.queue == WHOLE_TOPIC else str(queue.queue)]
            lag.add_metric(labels, queue.lag)
            if queue.lag_seconds is not None:
                seconds.add_metric(labels, queue.lag_seconds)
            if queue.committed is not None:
                committed.add_metric(labels, queue.committed)
            lost.add_metric(labels, queue.lost)
            status.add_metric(labels, queue_status_code(queue.status))
    yield from (group_lag, group_seconds, group_status, group_code, group_lost)
    yield from (consumed, produced, drain_seconds, drain, members, holders)
    yield from (lag, seconds, committed, lost, status)


def task_families() -> Iterator[Metric]:
    now = timezone.now()
    last_ok = _gauge(
        "task_last_success_timestamp_seconds", "When the task last ended well.", ["task"]
    )
    age = _gauge(
        "task_since_last_success_seconds",
        "Seconds since the task last ended well (+Inf: a scheduled task never did).",
        ["task"],
    )
    every = _gauge("task_interval_seconds", "How often the schedule runs the task.", ["task"])
    stale = _gauge(
        "task_stale",
        "1 when the task has not finished within 3 intervals (the rule of /tasks/).",
        ["task"],
    )
    runs = CounterMetricFamily(f"{PREFIX}_task_runs", "Runs of the task.", labels=["task"])
    failures = CounterMetricFamily(
        f"{PREFIX}_task_failures", "Runs of the task that failed.", labels=["task"]
    )
    for line in task_health(now):
        labels = [line.name]
        row = line.row
        ok_at = row.last_ok_at if row is not None else None
        if ok_at is not None:
            last_ok.add_metric(labels, ok_at.timestamp())
            age.add_metric(labels, max(0.0, (now - ok_at).total_seconds()))
        elif line.scheduled:
            age.add_metric(labels, math.inf)
        if line.every_s:
            every.add_metric(labels, line.every_s)
        stale.add_metric(labels, 1 if line.stale else 0)
        runs.add_metric(labels, row.runs if row is not None else 0)
        failures.add_metric(labels, row.failures if row is not None else 0)
    yield from (last_ok, age, every, stale, runs, failures)


class TidemarkCollector:
    """Every family above, read at each scrape."""

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        yield from store_families()
        yield from topic_families()
        yield from group_families()
        yield from task_families()
        yield from alert_families()
        took = _gauge("scrape_duration_seconds", "How long this answer took to make.")
        took.add_metric([], time.monotonic() - started)
        yield took


def render() -> bytes:
    """The text exposition of every family."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TidemarkCollector())
    return generate_latest(registry)
