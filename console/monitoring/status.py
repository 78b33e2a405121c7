"""Burrow-style status of a queue, exactly as ../shared/DESIGN.md defines it.

The window is the queue's last N commits (N = ``settings.TIDEMARK_STATUS_WINDOW``), each
``(offset, commit time ms, lag at that time)``, oldest first, as seen by consecutive
samples: a new commit is a change of the queue's last-commit time. The rules, in order:

1. OK when the queue's lag now is at most the allowed lag;
2. STOP when the last commit is older than the window's span (now − last commit time >
   last commit time − first commit time); a queue with lag and no commit at all is STOP;
3. REWIND when the offset went backwards between two commits of the window;
4. with lag above zero at every commit of the window: STALL when the offset never moved
   although commits went on (two commits or more, one offset), WARN when the lag never
   decreased from one commit to the next;
5. else OK.

A group takes its worst queue (``metrics.group_status``: STALL, STOP and REWIND read ERR).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from django.conf import settings

from console.monitoring.metrics import OK, REWIND, STALL, STOP, WARN

#: (offset, commit time ms, lag at that time)
Commit = Sequence[int]

DEFAULT_WINDOW = 10


def window_size() -> int:
    """N, the commits per queue the status looks at (``TIDEMARK_STATUS_WINDOW``)."""
    return max(1, int(getattr(settings, "TIDEMARK_STATUS_WINDOW", DEFAULT_WINDOW)))


def queue_status(commits: Sequence[Commit], lag: int, now_ms: int, allowed_lag: int = 0) -> str:
    """The status of one queue from its commit window and its lag now (see the module)."""
    if lag <= allowed_lag:
        return OK
    if not commits:
        return STOP
    first_ms, last_ms = commits[0][1], commits[-1][1]
    if now_ms - last_ms > last_ms - first_ms:
        return STOP
    if any(later[0] < earlier[0] for earlier, later in pairwise(commits)):
        return REWIND
    if all(commit[2] > 0 for commit in commits):
        if len(commits) > 1 and all(commit[0] == commits[0][0] for commit in commits):
            return STALL
        if all(later[2] >= earlier[2] for earlier, later in pairwise(commits)):
            return WARN
    return OK


def record_commit(
    commits: list[list[int]], offset: int, time_ms: int, lag: int, size: int | None = None
) -> list[list[int]]:
    """Add a commit to a window (in place), keeping the last ``size`` (default N)."""
    commits.append([offset, time_ms, lag])
    keep = window_size() if size is None else size
    del commits[: max(0, len(commits) - keep)]
    return commits
