"""Burrow's status of a queue, by Burrow's evaluation rules, and why, in words.

The window is the queue's last N commits (N = ``settings.TIDEMARK_STATUS_WINDOW``), each
``(offset, commit time ms, lag at that time)``, oldest first, as seen by consecutive
samples: a new commit is a change of the queue's last-commit time (a consumer that commits
the same offset again counts, which is how STALL shows). Burrow's rules (its evaluator,
``calculatePartitionStatus``), in its order:

1. OK unless the lag now is above zero (above the allowed lag) and the lag was above zero at
   every commit of the window: lag zero anywhere in the window means OK;
2. REWIND when the offset went backwards between two commits of the window;
3. STOP when the last commit is older than the window's span (now − last commit time >
   last commit time − first commit time);
4. STALL when the offset never moved over the window although commits went on;
5. WARN when the lag never decreased from one commit to the next;
6. else OK.

A queue the group never committed on has no status (None): Burrow leaves such partitions
out, and so does the group's status. A queue with a committed offset but no commit seen yet
is OK (Burrow: an incomplete window with no offsets).

Where Tidemark differs: a consumer that died right after catching up leaves a window of
zero-lag commits, which Burrow reads as OK for ever. Tidemark reads STOP when, besides, no
commit came for longer than the window's span (at least ``min_span_ms``) while the oldest
unconsumed message has waited longer than that too. A caught-up consumer on a bursty topic
that is sampled a second before it commits is still OK: its oldest message is a second old.

A group takes its worst queue (``metrics.group_status``: STALL, STOP and REWIND read ERR).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from django.conf import settings

from console.monitoring.metrics import (
    GROUP_STATUSES,
    OK,
    QUEUE_STATUSES,
    REWIND,
    STALL,
    STOP,
    WARN,
    group_status,
)

#: (offset, commit time ms, lag at that time)
Commit = Sequence[int]

DEFAULT_WINDOW = 10


def _rank(status: str) -> tuple[int, int]:
    if status in QUEUE_STATUSES:
        return (GROUP_STATUSES.index(group_status([status])), QUEUE_STATUSES.index(status))
    return (GROUP_STATUSES.index(status), 0)


_SEVERITY = {status: _rank(status) for status in (*QUEUE_STATUSES, *GROUP_STATUSES)}


def severity(status: str | None) -> tuple[int, int]:
    """How bad a queue's or a group's status is, for picking the worst of several: first
    its group level (OK < WARN < ERR, where STALL, STOP and REWIND read ERR), then the
    queue status within it. Unknown or empty statuses rank below OK."""
    return _SEVERITY.get(status or "", (-1, -1))


def worse(a: str | None, b: str | None) -> str:
    """The worse of two statuses (see ``severity``)."""
    return (a if severity(a) >= severity(b) else b) or ""


def window_size() -> int:
    """N, the commits per queue the status looks at (``TIDEMARK_STATUS_WINDOW``)."""
    return max(1, int(getattr(settings, "TIDEMARK_STATUS_WINDOW", DEFAULT_WINDOW)))


def min_stop_span_ms() -> int:
    """The shortest span Tidemark's STOP-after-catching-up waits for: a full window of
    samples."""
    return window_size() * int(settings.TIDEMARK_SAMPLE_INTERVAL_S) * 1000


@dataclass(frozen=True)
class Verdict:
    """A queue's status and the rule that gave it, as a sentence."""

    status: str
    rule: str


def _seconds(ms: float) -> str:
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _reset_mark(commit: Commit) -> bool:
    """Whether a window entry marks a reset (``record_reset``) rather than a commit."""
    return len(commit) > 3


def judge(
    commits: Sequence[Commit],
    lag: int,
    now_ms: int,
    lag_seconds: float | None = None,
    allowed_lag: int = 0,
    min_span_ms: int | None = None,
) -> Verdict:
    """The status of one queue from its commit window, its lag now and the age of its
    oldest unconsumed message (see the module for the rules)."""
    mark = None
    for index in range(len(commits) - 1, -1, -1):
        if _reset_mark(commits[index]):
            mark = commits[index]
            commits = commits[index + 1 :]  # the consumer's commits since the reset
            break
    if lag <= allowed_lag:
        return Verdict(OK, "no lag")
    floor = min_stop_span_ms() if min_span_ms is None else min_span_ms
    if len(commits) < 2:
        return _too_few_commits(commits, mark, now_ms, floor)
    first_ms, last_ms = commits[0][1], commits[-1][1]
    span = last_ms - first_ms
    silent = now_ms - last_ms
    if any(commit[2] <= allowed_lag for commit in commits):
        wait = max(span, floor)
        waited_ms = None if lag_seconds is None else lag_seconds * 1000
        if silent > wait and waited_ms is not None and waited_ms > wait:
            return Verdict(
                STOP,
                f"caught up at a commit of the window, but no commit for {_seconds(silent)} "
                f"while the oldest unconsumed message waits {_seconds(waited_ms)}: the "
                "consumer seems to have stopped after catching up (Tidemark's rule; "
                "Burrow reads OK)",
            )
        return Verdict(OK, "lag was zero at a commit of the window")
    if any(later[0] < earlier[0] for earlier, later in pairwise(commits)):
        return Verdict(REWIND, "the committed offset went backwards within the window")
    if silent > span:
        return Verdict(
            STOP,
            f"no commit for {_seconds(silent)}, longer than the window's span "
            f"({_seconds(span)}), with lag throughout",
        )
    if all(commit[0] == commits[0][0] for commit in commits):
        return Verdict(
            STALL,
            f"commits go on but the offset stays at {commits[0][0]} over the last "
            f"{len(commits)} commit{'s' if len(commits) != 1 else ''}, with lag throughout",
        )
    if all(later[2] >= earlier[2] for earlier, later in pairwise(commits)):
        return Verdict(
            WARN,
            f"the offset moves but the lag never decreased over the last {len(commits)} commits",
        )
    return Verdict(OK, "the offset moves and the lag decreased within the window")


def _too_few_commits(
    commits: Sequence[Commit], mark: Commit | None, now_ms: int, floor_ms: int
) -> Verdict:
    """Fewer than two commits of the consumer (a new group, or since a reset): Burrow's
    rules need two; such a queue is STOP only once silent for a full window."""
    if mark is not None:
        offset, time_ms, _lag, reset_id, old = mark[:5]
        moved = "rewound" if old is not None and old >= 0 and offset < old else "moved"
        what = f"{moved} by reset #{reset_id}" if reset_id else f"{moved} by a reset"
    else:
        what = ""
    last_ms = commits[-1][1] if commits else (mark[1] if mark is not None else None)
    if last_ms is None:
        return Verdict(OK, "no commit seen yet: not judged")
    silent = now_ms - last_ms
    if silent > floor_ms:
        since = f" since it was {what}" if what else ""
        count = "one commit" if commits else "no commit"
        return Verdict(
            STOP,
            f"{count} of its consumer{since} and none for {_seconds(silent)} (a full "
            "window of samples), with lag",
        )
    if what:
        return Verdict(
            OK,
            f"{what} (an operator's, not the consumer's): judged again once the consumer "
            "has committed twice since",
        )
    return Verdict(OK, "one commit seen: judged from the second (Burrow needs two)")


def stuck_verdict(stopped: int, stalled: int, queues: int) -> Verdict | None:
    """A big topic's verdict from its queues stuck with lag across the window (committed
    offset unmoved for longer than the window's span), as Burrow would judge each of them:
    STOP when some had no commit either, else STALL; None when none is stuck."""
    stuck = stopped + stalled
    if not stuck:
        return None
    parts = []
    if stopped:
        parts.append(f"{stopped} with no commit (STOP)")
    if stalled:
        parts.append(f"{stalled} committing the same offset (STALL)")
    return Verdict(
        STOP if stopped else STALL,
        f"{stuck} of {queues:,} queues stuck: their committed offsets have not moved for "
        f"longer than the window's span with lag ({', '.join(parts)})",
    )


def worst_verdict(*verdicts: Verdict | None) -> Verdict | None:
    """The worst of several verdicts (see ``severity``), the first of equals."""
    known = [v for v in verdicts if v is not None]
    if not known:
        return None
    best = known[0]
    for verdict in known[1:]:
        if severity(verdict.status) > severity(best.status):
            best = verdict
    return best


def queue_status(
    commits: Sequence[Commit],
    lag: int,
    now_ms: int,
    allowed_lag: int = 0,
    lag_seconds: float | None = None,
) -> str:
    """The status alone (see ``judge``)."""
    return judge(commits, lag, now_ms, lag_seconds, allowed_lag).status


def record_commit(
    commits: list[list[int]], offset: int, time_ms: int, lag: int, size: int | None = None
) -> list[list[int]]:
    """Add a commit to a window (in place), keeping the last ``size`` (default N)."""
    commits.append([offset, time_ms, lag])
    keep = window_size() if size is None else size
    del commits[: max(0, len(commits) - keep)]
    return commits


def record_reset(
    commits: list[list[int]],
    offset: int,
    time_ms: int,
    lag: int,
    reset_id: int | None,
    old: int | None,
) -> list[list[int]]:
    """Mark a reset in a window (in place): the commits before it are the consumer's
    from before the operator moved it, and no longer judged."""
    commits[:] = [[offset, time_ms, lag, reset_id or 0, -1 if old is None else old]]
    return commits


def status_reason(row, verdicts: Sequence[Verdict | None]) -> str:
    """Why a group has its status on one topic (a ``GroupSample`` being written): the
    worst queue, the rule it met, and how many other queues share that status."""
    judged = [(queue, v) for queue, v in enumerate(verdicts) if v is not None]
    left_out = len(verdicts) - len(judged)
    note = (
        f" ({left_out} queue{'s' if left_out != 1 else ''} never committed on, left out)"
        if left_out
        else ""
    )
    if not judged:
        return f"no queue of {row.topic} was ever committed on: nothing to judge{note}"
    queue, worst = max(judged, key=lambda item: severity(item[1].status))
    name = row.topic if row.aggregated else f"{row.topic}/{queue}"
    if worst.status == OK:
        by_reset = [(q, v) for q, v in judged if "by reset" in v.rule or "by a reset" in v.rule]
        if by_reset:
            queue, verdict = by_reset[0]
            name = row.topic if row.aggregated else f"{row.topic}/{queue}"
            return f"{name} is OK: {verdict.rule}{note}"
        return f"every queue of {row.topic} is OK{note}"
    others = sum(1 for _q, v in judged if v.status == worst.status) - 1
    more = f"; {others} more queue{'s' if others != 1 else ''} {worst.status}" if others else ""
    return f"{name} is {worst.status}: {worst.rule}{more}{note}"
