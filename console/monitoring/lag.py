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


def drain(lag: int, consume_rate: float, produce_rate: float, interval_s: float) -> Drain:
    """The drain time of ``lag`` at rates measured over a window (minutes, not the last
    two samples, which a bursty consumer makes swing from 0 to infinity):

    - caught up: no lag, or no more than the group consumes in one sample interval at its
      rate (messages in flight: a steady consumer keeping pace is here, whatever the noise
      of ``consume − produce``, which is about zero for it);
    - not draining: the group does not consume faster than producers write;
    - else the ETA, lag ÷ (consume rate − produce rate).
    """
    if lag <= 0 or (consume_rate > 0 and lag <= consume_rate * interval_s):
        return Drain(CAUGHT_UP, 0.0)
    net = consume_rate - produce_rate
    if net <= 0:
        return Drain(NOT_DRAINING, None)
    return Drain(DRAINING, lag / net)


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
