"""storeadapter.lagrule.lag_and_lost answers what queue_lag and lost_to_retention answer."""

from __future__ import annotations

import itertools

from storeadapter.lagrule import lag_and_lost, lost_to_retention, queue_lag


def test_lag_and_lost_is_queue_lag_and_lost_to_retention():
    for committed, low, high in itertools.product([None, 0, 3, 5, 9, 12], [0, 3, 5], [0, 5, 9]):
        if low > high:
            continue
        assert lag_and_lost(committed, low, high) == (
            queue_lag(committed, low, high),
            lost_to_retention(committed, low),
        )


def test_lag_and_lost_counts_from_the_committed_offset_or_the_first():
    assert lag_and_lost(None, 3, 9) == (6, 0)  # never committed: from the first offset
    assert lag_and_lost(5, 3, 9) == (4, 0)
    assert lag_and_lost(1, 3, 9) == (8, 2)  # retention took offsets 1 and 2 unconsumed
    assert lag_and_lost(9, 3, 9) == (0, 0)
    assert lag_and_lost(12, 3, 9) == (0, 0)  # past the end (a queue truncated under it)
