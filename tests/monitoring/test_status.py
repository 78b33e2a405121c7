"""The Burrow-style status of a queue on scripted commit windows, one rule per test.

A window is the queue's last commits, oldest first, each (offset, commit time ms, lag).
"""

from __future__ import annotations

from console.monitoring.metrics import ERR, OK, REWIND, STALL, STOP, WARN, group_status
from console.monitoring.status import queue_status, record_commit

S = 1000  # ms


def commits(*rows: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """(offset, seconds, lag) → (offset, ms, lag)."""
    return [(offset, seconds * S, lag) for offset, seconds, lag in rows]


def test_a_queue_without_lag_is_ok_whatever_its_window():
    stopped_long_ago = commits((10, 0, 5), (10, 10, 5))

    assert queue_status(stopped_long_ago, lag=0, now_ms=10_000 * S) == OK


def test_lag_up_to_the_allowed_lag_is_ok():
    stopped_long_ago = commits((10, 0, 5), (12, 10, 5))

    assert queue_status(stopped_long_ago, lag=50, now_ms=10_000 * S, allowed_lag=50) == OK
    assert queue_status(stopped_long_ago, lag=51, now_ms=10_000 * S, allowed_lag=50) == STOP


def test_a_last_commit_older_than_the_window_span_is_stop():
    window = commits((10, 0, 5), (20, 10, 5), (30, 20, 5))  # span 20 s

    assert queue_status(window, lag=5, now_ms=41 * S) == STOP


def test_a_last_commit_within_the_window_span_is_not_stop():
    window = commits((10, 0, 9), (20, 10, 8), (30, 20, 7))  # span 20 s

    assert queue_status(window, lag=7, now_ms=40 * S) == OK


def test_lag_with_no_commit_at_all_is_stop():
    assert queue_status([], lag=3, now_ms=100 * S) == STOP


def test_an_offset_that_went_backwards_is_rewind():
    window = commits((10, 0, 5), (30, 10, 3), (12, 20, 20), (15, 30, 18))

    assert queue_status(window, lag=18, now_ms=35 * S) == REWIND


def test_an_offset_that_never_moved_while_commits_went_on_is_stall():
    window = commits((10, 0, 5), (10, 10, 8), (10, 20, 12))

    assert queue_status(window, lag=12, now_ms=25 * S) == STALL


def test_an_unmoving_offset_with_lag_zero_at_one_commit_is_not_stall():
    window = commits((10, 0, 0), (10, 10, 8), (10, 20, 12))

    assert queue_status(window, lag=12, now_ms=25 * S) == OK


def test_lag_that_never_decreased_is_warn():
    window = commits((10, 0, 5), (20, 10, 7), (30, 20, 7), (40, 30, 9))

    assert queue_status(window, lag=9, now_ms=35 * S) == WARN


def test_lag_that_decreased_once_is_ok():
    window = commits((10, 0, 5), (20, 10, 7), (30, 20, 6), (40, 30, 9))

    assert queue_status(window, lag=9, now_ms=35 * S) == OK


def test_growing_lag_that_touched_zero_in_the_window_is_ok():
    window = commits((10, 0, 0), (20, 10, 7), (30, 20, 8))

    assert queue_status(window, lag=8, now_ms=25 * S) == OK


def test_stop_is_judged_before_rewind():
    window = commits((30, 0, 5), (10, 10, 25))

    assert queue_status(window, lag=25, now_ms=100 * S) == STOP


def test_the_window_keeps_the_last_n_commits():
    window: list = []
    for n in range(5):
        record_commit(window, offset=n, time_ms=n * S, lag=1, size=3)

    assert [c[0] for c in window] == [2, 3, 4]


def test_the_group_takes_its_worst_queue():
    assert group_status([OK, WARN, OK]) == WARN
    assert group_status([OK, WARN, STALL]) == ERR
    assert group_status([STOP]) == ERR
    assert group_status([REWIND, OK]) == ERR
    assert group_status([]) == OK
