"""What the monitoring knows about each group right now: the contract between the sampler
(console/monitoring) and its readers (alerts, pages, API).

Statuses are Burrow's (see ../shared/DESIGN.md): per queue OK, WARN, STALL, STOP, REWIND;
a group takes its worst queue, and reads ERR at group level for STOP, STALL or REWIND.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OK = "OK"
WARN = "WARN"
STALL = "STALL"
STOP = "STOP"
REWIND = "REWIND"
ERR = "ERR"

#: Queue statuses, best first: a group takes the worst of its queues.
QUEUE_STATUSES: tuple[str, ...] = (OK, WARN, STALL, STOP, REWIND)
#: Group statuses, best first.
GROUP_STATUSES: tuple[str, ...] = (OK, WARN, ERR)


def group_status(queue_statuses: list[str]) -> str:
    """OK, WARN or ERR: the worst queue's status, with STALL, STOP and REWIND read as ERR."""
    worst = max(queue_statuses, key=QUEUE_STATUSES.index, default=OK)
    return ERR if worst in (STALL, STOP, REWIND) else worst


#: The queue id of a big topic's one row: the topic as a whole (see sampler.py).
WHOLE_TOPIC = -1


@dataclass(frozen=True)
class QueueMetrics:
    """One queue of a group's topic; a big topic has one, ``queue == WHOLE_TOPIC``, whose
    offsets are sums over its queues and whose lag is the topic's."""

    group: str
    topic: str
    queue: int
    max_offset: int
    committed: int | None
    lag: int
    #: Seconds since the oldest unconsumed message was stored (interpolated); None: no lag
    #: or no history to estimate from.
    lag_seconds: float | None
    last_commit_ms: int | None
    status: str


@dataclass(frozen=True)
class GroupMetrics:
    group: str
    topics: list[str]
    lag: int
    #: The largest lag in seconds over its queues.
    lag_seconds: float | None
    #: Messages per second, from the sampled history.
    consume_rate: float
    produce_rate: float
    #: lag ÷ (consume rate − produce rate); None means never (not draining).
    drain_seconds: float | None
    #: Hours until retention deletes messages the group has not consumed; None: no risk.
    expiry_risk_hours: float | None
    status: str
    sampled_ms: int
    queues: list[QueueMetrics] = field(default_factory=list)


@dataclass(frozen=True)
class StoreMetrics:
    disk_bytes: int
    disk_ratio: float
    sampled_ms: int
    #: Messages per second appended over all topics, and consumed over all groups.
    produce_rate: float
    consume_rate: float
    backlog: int
