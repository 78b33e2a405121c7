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


def worst_queue_status(queue_statuses: list[str | None]) -> str:
    """The worst of the queues' statuses; queues never committed (None) are left out."""
    return max((s for s in queue_statuses if s is not None), key=QUEUE_STATUSES.index, default=OK)


def group_status(queue_statuses: list[str | None]) -> str:
    """OK, WARN or ERR: the worst queue's status, with STALL, STOP and REWIND read as ERR.
    Queues the group never committed on (None) are left out, as Burrow does."""
    worst = worst_queue_status(queue_statuses)
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
    #: Messages behind, counted from the committed offset (Kafka's and Burrow's lag): what
    #: retention deleted unconsumed still counts (see ``lost``). A queue never committed
    #: counts from its first offset.
    lag: int
    #: The age of the oldest unconsumed message, from its store time (0 at lag 0); a big
    #: topic's virtual queue takes its chunks' oldest. None: not known.
    lag_seconds: float | None
    last_commit_ms: int | None
    #: Burrow's status; None for a queue the group never committed on (left out).
    status: str | None
    #: Unconsumed messages retention deleted: the queue's first offset less the committed.
    lost: int = 0


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
    #: Seconds until the lag is consumed at the window's rates: 0 caught up, None not
    #: draining (``drain_state`` says which of the three answers it is).
    drain_seconds: float | None
    #: Hours until retention deletes messages the group has not consumed; None: no risk.
    expiry_risk_hours: float | None
    status: str
    sampled_ms: int
    queues: list[QueueMetrics] = field(default_factory=list)
    #: Unconsumed messages retention deleted, over its queues.
    lost: int = 0
    #: CAUGHT_UP, NOT_DRAINING, DRAINING (then ``drain_seconds`` is the ETA) or UNMEASURED
    #: (no rate yet: ``drain_seconds`` None, and no alert holds on it); "" when the
    #: metrics were made by hand: derived from ``lag`` and ``drain_seconds``.
    drain_state: str = ""
    #: Why the group has its status, in words (the worst queue and the rule it met).
    status_reason: str = ""

    @property
    def drain(self) -> str:
        """CAUGHT_UP, NOT_DRAINING, DRAINING or UNMEASURED."""
        if self.drain_state:
            return self.drain_state
        if self.lag <= 0:
            return CAUGHT_UP
        return NOT_DRAINING if self.drain_seconds is None else DRAINING


#: The three answers of a drain time, and what it is before a rate could be measured (a
#: group's first sample).
CAUGHT_UP = "caught up"
NOT_DRAINING = "not draining"
DRAINING = "draining"
UNMEASURED = "not measured yet"


@dataclass(frozen=True)
class StoreMetrics:
    disk_bytes: int
    disk_ratio: float
    sampled_ms: int
    #: Messages per second appended over all topics, and consumed over all groups.
    produce_rate: float
    consume_rate: float
    backlog: int
