"""Alert kinds: one class per kind of condition, owning its reading, its condition text,
the format of its value and the validation of its threshold. A new kind is one class here,
added to ``KINDS``; the rule form, the API, the evaluator and the mail take it from there.

A kind judges a subject: a consumer group (its queues in the rule's scope) or, for the
store-wide kinds, the store (subject "store") or the monitoring itself ("monitoring").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.core.exceptions import ValidationError

from console.alerts.patterns import pattern_matches
from console.monitoring.metrics import (
    DRAINING,
    GROUP_STATUSES,
    NOT_DRAINING,
    OK,
    QUEUE_STATUSES,
    GroupMetrics,
    QueueMetrics,
    StoreMetrics,
    group_status,
)

STORE_SUBJECT = "store"
MONITORING_SUBJECT = "monitoring"
#: At most this many queues are kept in an event's details (and listed in its mail).
MAX_DETAIL_QUEUES = 20
#: The largest threshold accepted for counts and durations.
MAX_THRESHOLD = 1e15


def format_seconds(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Reading:
    """A rule's condition on one subject: the value it compared and whether it holds."""

    subject: str
    value: float | None
    holds: bool
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Monitoring:
    """How fresh the monitoring is, for the built-in staleness kind
    (console/monitoring/freshness.py)."""

    stale: bool
    #: Seconds since the older of the last sample and the last evaluation that succeeded.
    age_s: float | None
    reason: str


@dataclass(frozen=True)
class Inputs:
    """What one evaluation judges: every group's metrics, the store's, the monitoring's."""

    groups: list[GroupMetrics]
    store: StoreMetrics | None
    monitoring: Monitoring | None
    now: datetime


@dataclass(frozen=True)
class GroupView:
    """A group as a rule sees it: with a topic pattern, only the matching topics' queues."""

    group: GroupMetrics
    queues: list[QueueMetrics]
    lag: int
    lag_seconds: float | None
    status: str
    lost: int


def _view(rule: Any, group: GroupMetrics) -> GroupView:
    queues = list(group.queues)
    if rule.scope == rule.SCOPE_MATCH and rule.topic_pattern:
        queues = [q for q in queues if pattern_matches(rule.topic_pattern, q.topic)]
    if len(queues) == len(group.queues):
        return GroupView(
            group, queues, group.lag, finite(group.lag_seconds), group.status, group.lost
        )
    known = [s for s in (finite(q.lag_seconds) for q in queues) if s is not None]
    return GroupView(
        group,
        queues,
        sum(q.lag for q in queues),
        max(known) if known else None,
        group_status([q.status for q in queues]),
        sum(q.lost for q in queues),
    )


def in_scope(rule: Any, group: GroupMetrics) -> bool:
    if rule.scope != rule.SCOPE_MATCH:
        return True
    if rule.group_pattern and not pattern_matches(rule.group_pattern, group.group):
        return False
    if rule.topic_pattern:
        topics = set(group.topics) | {queue.topic for queue in group.queues}
        return any(pattern_matches(rule.topic_pattern, topic) for topic in topics)
    return True


def _queue_row(queue: QueueMetrics) -> dict[str, Any]:
    return {
        "topic": queue.topic,
        "queue": queue.queue,
        "lag": queue.lag,
        "lag_seconds": finite(queue.lag_seconds),
        "lost": queue.lost,
        "status": queue.status,
    }


def _severity(queue: QueueMetrics) -> int:
    return QUEUE_STATUSES.index(queue.status) if queue.status in QUEUE_STATUSES else 0


class AlertKind:
    """One kind of condition. Subclasses set the class attributes and ``judge``."""

    key: ClassVar[str]
    label: ClassVar[str]
    #: Evaluated once on the store (or the monitoring), not on each group.
    store_wide: ClassVar[bool] = False
    #: Kinds whose threshold is not used (the kind names the level).
    needs_threshold: ClassVar[bool] = True
    #: Made by the console itself (a migration), not offered in the rule form.
    built_in: ClassVar[bool] = False

    @classmethod
    def default_for_seconds(cls) -> int:
        """The ``for`` a new rule of this kind gets unless told otherwise: 0 (at once)."""
        return 0

    # ---------------------------------------------------------------- the threshold

    def clean_threshold(self, threshold: float | None) -> float | None:
        """The threshold to keep, or ValidationError with a sentence."""
        if not self.needs_threshold:
            return None
        if threshold is None:
            raise ValidationError("This condition needs a threshold.")
        if not 0 <= threshold <= MAX_THRESHOLD:
            raise ValidationError("A number of 0 or more.")
        return threshold

    def threshold_schema(self) -> dict[str, Any] | None:
        """What ``clean_threshold`` takes, as JSON Schema (OpenAPI 3.0); None: anything."""
        if not self.needs_threshold:
            return None
        return {"type": "number", "minimum": 0, "maximum": MAX_THRESHOLD}

    # ----------------------------------------------------------------- the wording

    def condition_text(self, threshold: float | None) -> str:
        raise NotImplementedError

    def format_value(self, value: float | None) -> str:
        if value is None:
            return "—"
        return f"{value:g}" if math.isfinite(value) else str(value)

    # ---------------------------------------------------------------- the readings

    def readings(self, rule: Any, inputs: Inputs) -> dict[str, Reading] | None:
        """Each subject the rule covers, with its reading; None when there is no data to
        judge (open events are then left as they are)."""
        return {
            group.group: self.judge(rule, _view(rule, group))
            for group in inputs.groups
            if in_scope(rule, group)
        }

    def judge(self, rule: Any, view: GroupView) -> Reading:
        raise NotImplementedError

    def _reading(
        self, view: GroupView, value: float | None, holds: bool, offending: Iterable[QueueMetrics]
    ) -> Reading:
        offending = list(offending)
        group = view.group
        details: dict[str, Any] = {
            "status": view.status,
            "status_reason": getattr(group, "status_reason", ""),
            "lag": view.lag,
            "lag_seconds": view.lag_seconds,
            "lost": view.lost,
            "topics": sorted(set(group.topics) | {q.topic for q in view.queues}),
            "consume_rate": finite(group.consume_rate),
            "produce_rate": finite(group.produce_rate),
            "drain": group.drain,
            "drain_seconds": finite(group.drain_seconds),
            "expiry_risk_hours": finite(group.expiry_risk_hours),
            "queues": [_queue_row(q) for q in offending[:MAX_DETAIL_QUEUES]],
            "queues_total": len(offending),
        }
        return Reading(group.group, value, holds, details)


class LagMessages(AlertKind):
    key = "lag_messages"
    label = "Lag in messages is above N (counted from the committed offset)"

    def condition_text(self, threshold: float | None) -> str:
        return f"lag > {threshold or 0:g} messages"

    def format_value(self, value: float | None) -> str:
        return "—" if value is None else f"{value:.0f} messages"

    def judge(self, rule: Any, view: GroupView) -> Reading:
        holds = view.lag > (rule.threshold or 0)
        offending = sorted((q for q in view.queues if q.lag > 0), key=lambda q: -q.lag)
        return self._reading(view, float(view.lag), holds, offending)


class LagSeconds(AlertKind):
    key = "lag_seconds"
    label = "Lag in seconds (age of the oldest unconsumed message) is above N"

    def condition_text(self, threshold: float | None) -> str:
        return f"lag > {format_seconds(threshold or 0)}"

    def format_value(self, value: float | None) -> str:
        return "—" if value is None else format_seconds(value)

    def judge(self, rule: Any, view: GroupView) -> Reading:
        threshold = rule.threshold or 0
        value = view.lag_seconds
        offending = sorted(
            (q for q in view.queues if (finite(q.lag_seconds) or 0.0) > threshold),
            key=lambda q: -(finite(q.lag_seconds) or 0.0),
        )
        return self._reading(view, value, value is not None and value > threshold, offending)


class DrainSeconds(AlertKind):
    key = "drain_seconds"
    label = "Drain time is above N seconds, or not draining"

    def condition_text(self, threshold: float | None) -> str:
        return f"drain time > {format_seconds(threshold or 0)} or not draining"

    def format_value(self, value: float | None) -> str:
        return "not draining" if value is None else format_seconds(value)

    def judge(self, rule: Any, view: GroupView) -> Reading:
        group = view.group
        offending = sorted((q for q in view.queues if q.lag > 0), key=lambda q: -q.lag)
        drain = group.drain
        if drain == NOT_DRAINING and view.lag > 0:
            return self._reading(view, None, True, offending)
        if drain == DRAINING and view.lag > 0:
            value = finite(group.drain_seconds)
            return self._reading(view, value, value is None or value > (rule.threshold or 0), [])
        return self._reading(view, 0.0, False, [])  # caught up, or no rate measured yet


class StatusKind(AlertKind):
    needs_threshold = False
    level: ClassVar[str]

    @classmethod
    def default_for_seconds(cls) -> int:
        """Two sample intervals: a status holds over two samples before it pages (a
        single sample is one reading of a commit window)."""
        from django.conf import settings

        return 2 * int(settings.TIDEMARK_SAMPLE_INTERVAL_S)

    def condition_text(self, threshold: float | None) -> str:
        return "status = ERR" if self.level == "ERR" else "status ≥ WARN"

    def format_value(self, value: float | None) -> str:
        if value is None:
            return "—"
        index = int(value)
        return GROUP_STATUSES[index] if 0 <= index < len(GROUP_STATUSES) else str(value)

    def judge(self, rule: Any, view: GroupView) -> Reading:
        rank = GROUP_STATUSES.index(view.status) if view.status in GROUP_STATUSES else 0
        offending = sorted((q for q in view.queues if q.status not in (OK, None)), key=_severity)
        holds = rank >= GROUP_STATUSES.index(self.level)
        return self._reading(view, float(rank), holds, reversed(offending))


class StatusWarn(StatusKind):
    key = "status_warn"
    label = "Status is WARN or worse"
    level = "WARN"


class StatusErr(StatusKind):
    key = "status_err"
    label = "Status is ERR"
    level = "ERR"


class ExpiryHours(AlertKind):
    key = "expiry_hours"
    label = "Unconsumed messages expire within N hours"

    def clean_threshold(self, threshold: float | None) -> float | None:
        if threshold is None or not 0 < threshold <= MAX_THRESHOLD:
            raise ValidationError("A number of hours above 0.")
        return threshold

    def threshold_schema(self) -> dict[str, Any] | None:
        return {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": MAX_THRESHOLD}

    def condition_text(self, threshold: float | None) -> str:
        return f"expiry within {threshold or 0:g} h"

    def format_value(self, value: float | None) -> str:
        return "—" if value is None else f"{value:.1f} h"

    def judge(self, rule: Any, view: GroupView) -> Reading:
        value = finite(view.group.expiry_risk_hours)
        holds = value is not None and value < (rule.threshold or 0)
        offending = sorted((q for q in view.queues if q.lag > 0), key=lambda q: -q.lag)
        return self._reading(view, value, holds, offending)


class LostMessages(AlertKind):
    key = "lost_messages"
    label = "Messages lost to retention (deleted unconsumed) above N"

    def condition_text(self, threshold: float | None) -> str:
        return f"lost to retention > {threshold or 0:g} messages"

    def format_value(self, value: float | None) -> str:
        return "—" if value is None else f"{value:.0f} messages lost"

    def judge(self, rule: Any, view: GroupView) -> Reading:
        offending = sorted((q for q in view.queues if q.lost > 0), key=lambda q: -q.lost)
        return self._reading(view, float(view.lost), view.lost > (rule.threshold or 0), offending)


class DiskRatio(AlertKind):
    key = "disk_ratio"
    label = "Disk use is above a ratio (0..1)"
    store_wide = True

    def clean_threshold(self, threshold: float | None) -> float | None:
        if threshold is None or not 0 < threshold < 1:
            raise ValidationError("A disk use ratio between 0 and 1, such as 0.8.")
        return threshold

    def threshold_schema(self) -> dict[str, Any] | None:
        return {
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": True,
            "maximum": 1,
            "exclusiveMaximum": True,
        }

    def condition_text(self, threshold: float | None) -> str:
        return f"disk use > {threshold:.0%}" if threshold is not None else "disk use"

    def format_value(self, value: float | None) -> str:
        return "—" if value is None else f"{value:.1%}"

    def readings(self, rule: Any, inputs: Inputs) -> dict[str, Reading] | None:
        store = inputs.store
        if store is None:
            return None
        value = finite(store.disk_ratio)
        threshold = rule.threshold if rule.threshold is not None else 1.0
        details = {"disk_bytes": store.disk_bytes, "disk_ratio": value}
        holds = value is not None and value > threshold
        return {STORE_SUBJECT: Reading(STORE_SUBJECT, value, holds, details)}


class MonitoringStale(AlertKind):
    """Built in (Prometheus' watchdog and ``absent()`` habit): fires when sampling or
    evaluation has not succeeded for a few intervals."""

    key = "monitoring_stale"
    label = "Monitoring is stale (sampling or evaluation stopped)"
    store_wide = True
    needs_threshold = False
    built_in = True

    def condition_text(self, threshold: float | None) -> str:
        return "sampling or evaluation has not succeeded for 3 intervals"

    def format_value(self, value: float | None) -> str:
        return "—" if value is None else f"{format_seconds(value)} old"

    def readings(self, rule: Any, inputs: Inputs) -> dict[str, Reading] | None:
        health = inputs.monitoring
        if health is None:
            return None
        details = {"reason": health.reason}
        return {
            MONITORING_SUBJECT: Reading(MONITORING_SUBJECT, health.age_s, health.stale, details)
        }


KINDS: dict[str, AlertKind] = {
    kind.key: kind
    for kind in (
        LagMessages(),
        LagSeconds(),
        DrainSeconds(),
        StatusWarn(),
        StatusErr(),
        ExpiryHours(),
        LostMessages(),
        DiskRatio(),
        MonitoringStale(),
    )
}


def kind_of(key: str) -> AlertKind:
    """The kind registered under ``key``; ValueError for an unknown one."""
    try:
        return KINDS[key]
    except KeyError:
        raise ValueError(f"unknown alert kind {key!r}") from None


def choices(include_built_in: bool = True) -> list[tuple[str, str]]:
    return [(k.key, k.label) for k in KINDS.values() if include_built_in or not k.built_in]
