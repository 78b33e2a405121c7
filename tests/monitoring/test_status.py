"""Burrow's status of a queue on scripted commit windows, one rule per test, in Burrow's
order (its evaluator's ``calculatePartitionStatus``), and where Tidemark differs.

A window is the queue's last commits, oldest first, each (offset, commit time ms, lag).
"""

from __future__ import annotations

from console.monitoring.metrics import ERR, OK, REWIND, STALL, STOP, WARN, group_status
from console.monitoring.status import judge, queue_status, record_commit

S = 1000  # ms


def commits(*rows: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """(offset, seconds, lag) → (offset, ms, lag)."""
    return [(offset, seconds * S, lag) for offset, seconds, lag in rows]


def test_a_queue_without_lag_is_ok_whatever_its_window():
    stopped_long_ago = commits((10, 0, 5), (10, 10, 5))

    assert queue_status(stopped_long_ago, lag=0, now_ms=10_000 * S) == OK


def test_lag_up_to_the_allowed_lag_is_ok():
    stopped_long_ago = commits((10, 0, 60), (12, 10, 60))

    assert queue_status(stopped_long_ago, lag=50, now_ms=10_000 * S, allowed_lag=50) == OK
    assert queue_status(stopped_long_ago, lag=51, now_ms=10_000 * S, allowed_lag=50) == STOP


def test_a_last_commit_older_than_the_window_span_is_stop():
    window = commits((10, 0, 5), (20, 10, 5), (30, 20, 5))  # span 20 s

    assert queue_status(window, lag=5, now_ms=41 * S) == STOP


def test_a_last_commit_within_the_window_span_is_not_stop():
    window = commits((10, 0, 9), (20, 10, 8), (30, 20, 7))  # span 20 s

    assert queue_status(window, lag=7, now_ms=40 * S) == OK


def test_a_committed_queue_with_no_commit_seen_yet_is_not_judged():
    assert queue_status([], lag=3, now_ms=100 * S) == OK


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


def test_rewind_is_judged_before_stop_as_burrow_does():
    window = commits((30, 0, 5), (10, 10, 25))

    assert queue_status(window, lag=25, now_ms=100 * S) == REWIND


def test_stop_is_judged_before_stall_as_burrow_does():
    window = commits((10, 0, 5), (10, 10, 8))

    assert queue_status(window, lag=8, now_ms=100 * S) == STOP


def test_lag_zero_at_a_commit_of_the_window_is_ok_even_long_after_as_burrow_says():
    caught_up = commits((10, 0, 0), (20, 10, 0), (30, 20, 0))  # span 20 s

    verdict = judge(caught_up, lag=5, now_ms=60 * S, lag_seconds=2.0, min_span_ms=20 * S)

    assert verdict.status == OK


def test_tidemark_differs_a_consumer_that_died_after_catching_up_is_stop():
    caught_up = commits((10, 0, 0), (20, 10, 0), (30, 20, 0))  # span 20 s

    verdict = judge(caught_up, lag=5, now_ms=60 * S, lag_seconds=35.0, min_span_ms=20 * S)

    assert verdict.status == STOP
    assert "Burrow reads OK" in verdict.rule


def test_each_status_says_which_rule_gave_it():
    stalled = commits((10, 0, 5), (10, 10, 8), (10, 20, 12))

    verdict = judge(stalled, lag=12, now_ms=25 * S)

    assert verdict.rule == (
        "commits go on but the offset stays at 10 over the last 3 commits, with lag throughout"
    )


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


def test_the_group_leaves_out_queues_never_committed_on():
    assert group_status([None, OK, None]) == OK


def test_severity_ranks_err_statuses_above_ok_and_warn():
    from console.monitoring.status import severity, worse

    ranked = sorted(["OK", "STOP", "WARN", "REWIND", "ERR", "STALL", ""], key=severity)
    assert ranked == [
        "",
        "OK",
        "WARN",
        "ERR",
        "STALL",
        "STOP",
        "REWIND",
    ]  # ERR: any of the last three
    assert worse("OK", "STOP") == worse("STOP", "WARN") == "STOP"
