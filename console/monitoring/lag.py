"""Rates, drain time, expiry risk, and a big topic's lag in seconds: pure functions over
sampled values.

A queue's lag in seconds is the age of its oldest unconsumed message, read from the message's
store time (sampler.py). Only a big topic, sampled as one virtual queue, has it estimated
here, as kafka-lag-exporter does: each virtual queue has a table of (max offset, time)
points from the samples; the time at which the queue's max offset was the group's
committed offset is interpolated linearly between the two points around it, and the lag is
the time since then. Below the table's oldest point the table's overall rate is
extrapolated backwards; with fewer than two distinct points there is nothing to estimate
from (None).

The table of a queue is its *corners* (kept in ``OffsetTimeline``) followed by the previous
sample's point and the current one (both in the ``TopicSample`` rows). The previous point
becomes a corner, as in a process historian's compression, when

- it is off the straight line from the last corner to the current point by more than half
  the time between the two samples, or ``TOLERANCE_SHARE`` of the line's span when that is
  more (in time: where the line says the queue reached that offset);
- the queue stopped there (the current point has the same offset, the last corner a lower
  one): where a pause begins;
- the last corner is older than ``MAX_CORNER_GAP_MS`` and the offset moved since.

So a queue written at a steady rate adds a corner every ``MAX_CORNER_GAP_MS``, an idle one
none, and a burst, a pause or a change of rate one or two. When a table holds more than
``TIMELINE_POINTS`` corners every other corner of its older half goes, so recent history
stays fine-grained and older history thins out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from console.monitoring.metrics import CAUGHT_UP, DRAINING, NOT_DRAINING

#: Corners per queue in an offset timeline.
TIMELINE_POINTS = 32
#: How far off the line, as a share of its span, a point may be and still be left out.
TOLERANCE_SHARE = 0.1
#: A steadily written queue still gets a corner this often.
MAX_CORNER_GAP_MS = 10 * 60_000

Point = Sequence[int]  # (max offset, time ms); stored as JSON lists


def add_corner(
    corners: list[list[int]],
    previous: Point | None,
    current: Point,
    capacity: int = TIMELINE_POINTS,
) -> bool:
    """Update a queue's corners with the current sample's point; True if they changed.

    ``previous`` is the queue's point at the previous sample (None when it has none). An
    offset below the last one known (the queue was removed and made again) starts over.
    """
    offset, ts_ms = int(current[0]), int(current[1])
    if previous is not None and previous[1] >= ts_ms:
        previous = None
    if previous is not None and previous[0] > offset:  # went back: a new queue
        corners[:] = [[offset, ts_ms]]
        return True
    if not corners:
        first = previous if previous is not None else current
        corners.append([int(first[0]), int(first[1])])
        return True
    last_offset, last_ms = corners[-1]
    if offset < last_offset:
        corners[:] = [[offset, ts_ms]]
        return True
    if previous is None or previous[1] <= last_ms or offset == last_offset:
        return False  # nothing to judge, or flat since the last corner
    if previous[0] == offset:
        corner = True  # a pause begins
    else:
        expected = last_ms + (previous[0] - last_offset) * (ts_ms - last_ms) / (
            offset - last_offset
        )
        tolerance = max((ts_ms - previous[1]) / 2, TOLERANCE_SHARE * (ts_ms - last_ms))
        corner = abs(expected - previous[1]) > tolerance or (
            previous[1] - last_ms >= MAX_CORNER_GAP_MS and previous[0] > last_offset
        )
    if not corner:
        return False
    corners.append([int(previous[0]), int(previous[1])])
    while len(corners) > capacity:
        half = len(corners) // 2
        corners[:half] = corners[:half:2]
    return True


def timeline(corners: Sequence[Point], previous: Point | None, current: Point) -> list[Point]:
    """The table to interpolate on: the corners, then the previous and current points."""
    points = list(corners)
    for point in (previous, current):
        if point is not None and (not points or point[1] > points[-1][1]):
            if points and point[0] < points[-1][0]:
                points = []
            points.append(point)
    return points


def time_at_offset(points: Sequence[Sequence[int]], offset: int) -> float | None:
    """The time (ms) at which the queue's max offset was ``offset``, estimated from
    ``points``; None when the table cannot tell.

    Between two points the time is interpolated linearly; at or past the newest point it
    is unknown (the queue had not got there yet, as far as the table knows); before the
    oldest it is extrapolated with the rate between the oldest and newest points.
    """
    if not points:
        return None
    offsets = [p[0] for p in points]
    j = bisect.bisect_right(offsets, offset) - 1  # the last point at or below the offset
    if j >= len(points) - 1:
        return None
    if j >= 0:
        (o0, t0), (o1, t1) = points[j], points[j + 1]
        return t0 + (offset - o0) * (t1 - t0) / (o1 - o0)
    (o0, t0), (on, tn) = points[0], points[-1]
    if on <= o0 or tn <= t0:
        return None
    return t0 - (o0 - offset) * (tn - t0) / (on - o0)


def lag_seconds(
    points: Sequence[Sequence[int]], position: int, max_offset: int, now_ms: int
) -> float | None:
    """Seconds since the queue's max offset was ``position`` (the group's next offset to
    consume); None when there is no lag or the timeline cannot tell."""
    if position >= max_offset:
        return None
    when = time_at_offset(points, position)
    if when is None:
        return None
    return max(0.0, (now_ms - when) / 1000)


def counter_advance(before: Sequence[int | None], after: Sequence[int | None]) -> int:
    """How far a list of per-queue offsets moved forward, queue by queue.

    Queues that went back (a reset, a queue made again) count nothing; a queue unknown
    before counts from 0 when ``before`` is shorter (a new queue starts at 0) and nothing
    when its value before was None (a first commit says nothing about what was consumed).
    """
    moved = 0
    for queue, now in enumerate(after):
        if now is None:
            continue
        then = before[queue] if queue < len(before) else 0
        if then is not None and now > then:
            moved += now - then
    return moved


def consumed_advance(
    before: Sequence[int | None],
    after: Sequence[int | None],
    moved_by_resets: dict[int, int] | None = None,
) -> int:
    """How many messages a group consumed between two readings of its committed offsets,
    queue by queue: what the offset moved less what resets moved it (``moved_by_resets``,
    queue → the resets' net shift: a skip forwards is not consumption, and a consumer
    reading on after a rewind consumed what it read). Nothing is counted where a queue
    had no offset before or has none now (a first commit says nothing about what was
    consumed); a queue unknown before counts from 0 (a new queue starts at 0)."""
    shifts = moved_by_resets or {}
    consumed = 0
    for queue, now in enumerate(after):
        if now is None:
            continue
        then = before[queue] if queue < len(before) else 0
        if then is None:
            continue
        consumed += max(0, now - then - shifts.get(queue, 0))
    return consumed


def rate(counter_then: int, ts_then_ms: int, counter_now: int, ts_now_ms: int) -> float:
    """Messages per second between two readings of a counter (0 when time did not pass)."""
    if ts_now_ms <= ts_then_ms:
        return 0.0
    return max(0, counter_now - counter_then) * 1000 / (ts_now_ms - ts_then_ms)


@dataclass(frozen=True)
class Drain:
    """How long until a group's lag is consumed: one of three answers."""

    state: str  # CAUGHT_UP, NOT_DRAINING or DRAINING
    #: 0 caught up, None not draining, else the ETA in seconds.
    seconds: float | None


#: Consumption within this share of production keeps pace: the noise of commit timing
#: over a rate window (a consumer 1 to 3 s behind at 100 msg/s: under 1 % over 5 min).
PACE_TOLERANCE_SHARE = 0.01


def drain(
    lag: int,
    consume_rate: float,
    produce_rate: float,
    interval_s: float,
    fresh: bool | None = None,
    noise: float = 0.0,
) -> Drain:
    """The drain time of ``lag`` from the slope of the lag over the rate window
    (``produce_rate − consume_rate``, each measured between commits, see ``Pace``) and
    the age of the oldest unconsumed message (``fresh``):

    - caught up: no lag; or the lag does not grow (consumption within
      ``PACE_TOLERANCE_SHARE`` of production, or faster) and it is fresh: every lagging
      queue's oldest unconsumed message arrived after its last commit (or less than half
      an interval before it) and its commits keep their pace. ``fresh`` None (not known):
      no more lag than the group consumes in one interval, as before;
    - not draining: the lag grows (the group falls behind), or it neither grows nor
      shrinks and is not fresh (a backlog that stays);
    - else the ETA, lag ÷ (consume rate − produce rate).

    ``noise`` (msg/s) widens the tolerance by how uncertain the measured consume rate
    is (the jitter of the commits over the span they were measured on).
    """
    if lag <= 0:
        return Drain(CAUGHT_UP, 0.0)
    net = consume_rate - produce_rate
    tolerance = PACE_TOLERANCE_SHARE * max(produce_rate, consume_rate) + noise
    if net < -tolerance:
        return Drain(NOT_DRAINING, None)
    if fresh is None:
        fresh = consume_rate > 0 and lag <= consume_rate * interval_s
    if fresh:
        return Drain(CAUGHT_UP, 0.0)
    if net > tolerance:
        return Drain(DRAINING, lag / net)
    return Drain(NOT_DRAINING, None)


def queue_consume_rate(
    committed_then: int | None,
    commit_then_ms: int | None,
    committed_now: int | None,
    commit_now_ms: int | None,
    now_ms: int,
    cadence_ms: float | None,
    interval_ms: int,
) -> float | None:
    """A queue's consume rate over the rate window, between its commits (not between
    samples, so a consumer committing once a minute reads its real pace): the offset moved
    over the time between the window's first and last commits. No commit in the window:
    0 once it has been silent past its usual cadence (it stopped), else None (not known
    yet: the window is shorter than its cadence). None too when never committed before."""
    if committed_now is None or commit_now_ms is None:
        return 0.0
    if committed_then is None or commit_then_ms is None:
        return None
    if commit_now_ms > commit_then_ms:
        return max(0, committed_now - committed_then) * 1000 / (commit_now_ms - commit_then_ms)
    if cadence_ms is not None and now_ms - commit_now_ms > 1.5 * cadence_ms + interval_ms:
        return 0.0
    return None


def queue_is_fresh(
    lag: int,
    lag_seconds: float | None,
    commit_ms: int | None,
    now_ms: int,
    cadence_ms: float | None,
    interval_ms: int,
) -> bool | None:
    """Whether a queue's lag is only what arrived since its consumer's last commit (its
    oldest unconsumed message arrived less than half an interval before that commit: the
    consumer's own latency) while the commits keep their cadence; None when not known."""
    if lag <= 0:
        return True
    if lag_seconds is None:
        return None
    if commit_ms is None:
        return False
    silent_ms = now_ms - commit_ms
    if cadence_ms is not None and silent_ms > 1.5 * cadence_ms + interval_ms:
        return False
    return lag_seconds * 1000 < silent_ms + interval_ms / 2


def _consumer_commits(commits: Sequence[Sequence[int]]) -> list[Sequence[int]]:
    """The commits after the window's last reset mark (a reset starts the consumer's
    history again)."""
    mine: list[Sequence[int]] = []
    for commit in commits:
        if len(commit) > 3:
            mine = []
            continue
        mine.append(commit)
    return mine


def commit_cadence_ms(commits: Sequence[Sequence[int]]) -> float | None:
    """The mean time between a queue's commits in its commit window (after its last
    reset mark); None with fewer than two."""
    times = [commit[1] for commit in _consumer_commits(commits)]
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (times[-1] - times[0]) / (len(times) - 1)


def commit_jitter(commits: Sequence[Sequence[int]]) -> float:
    """How far a queue's committed offsets stray from a straight line through them, in
    messages (the residuals' standard deviation over its commit window): a consumer
    committing at a steady pace has none, one whose latency varies has some. 0 with
    fewer than three commits."""
    points = [(commit[1], commit[0]) for commit in _consumer_commits(commits)]
    if len(points) < 3:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_o = sum(o for _, o in points) / n
    var_t = sum((t - mean_t) ** 2 for t, _ in points)
    if var_t <= 0:
        return 0.0
    slope = sum((t - mean_t) * (o - mean_o) for t, o in points) / var_t
    residuals = [o - mean_o - slope * (t - mean_t) for t, o in points]
    return (sum(r * r for r in residuals) / (n - 2)) ** 0.5


def earliest_expiry(forecast: Iterable[dict]) -> dict[tuple[str, str], int]:
    """From ``MessageStore.expiry_forecast()`` rows: per (group, topic), the earliest time
    retention deletes messages the group has not consumed."""
    earliest: dict[tuple[str, str], int] = {}
    for row in forecast:
        key = (row["group"], row["topic"])
        when = int(row["expires_at_ms"])
        if key not in earliest or when < earliest[key]:
            earliest[key] = when
    return earliest


def expiry_risk_hours(expires_at_ms: int | None, now_ms: int) -> float | None:
    """Hours until ``expires_at_ms`` (0 when already past); None when nothing is at risk."""
    if expires_at_ms is None:
        return None
    return max(0.0, (expires_at_ms - now_ms) / 3_600_000)
