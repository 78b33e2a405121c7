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
