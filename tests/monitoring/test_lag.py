"""Lag in seconds by interpolation (kafka-lag-exporter's method), the offset timeline's
corners, rates, drain time and expiry risk: pure functions on scripted histories."""

from __future__ import annotations

import pytest

from console.monitoring import lag
from console.monitoring.metrics import CAUGHT_UP, DRAINING, NOT_DRAINING

S = 1000  # ms


# ----------------------------------------------------------------- interpolation


def test_lag_seconds_interpolates_between_the_points_around_the_committed_offset():
    points = [[0, 0], [100, 100 * S], [300, 200 * S]]  # 1/s, then 2/s

    # Offset 200 was reached halfway between 100 s and 200 s.
    assert lag.lag_seconds(points, position=200, max_offset=300, now_ms=210 * S) == 60.0
    assert lag.lag_seconds(points, position=50, max_offset=300, now_ms=210 * S) == 160.0


def test_lag_seconds_takes_the_end_of_a_flat_stretch():
    # Nothing written from 10 s to 50 s, then 40 messages by 60 s.
    points = [[0, 0], [10, 10 * S], [10, 50 * S], [50, 60 * S]]

    # Message 10 was written after the pause, not when the offset first reached 10.
    assert lag.lag_seconds(points, position=10, max_offset=50, now_ms=70 * S) == 20.0


def test_lag_seconds_extrapolates_below_the_oldest_point_with_the_overall_rate():
    points = [[100, 100 * S], [200, 200 * S]]  # 1/s

    assert lag.lag_seconds(points, position=40, max_offset=200, now_ms=200 * S) == 160.0


def test_lag_seconds_is_none_without_lag():
    points = [[0, 0], [100, 100 * S]]

    assert lag.lag_seconds(points, position=100, max_offset=100, now_ms=110 * S) is None


def test_lag_seconds_is_none_from_a_single_point():
    assert lag.lag_seconds([[100, 100 * S]], position=40, max_offset=100, now_ms=110 * S) is None


def test_lag_seconds_is_never_negative():
    points = [[0, 0], [100, 100 * S]]

    assert lag.lag_seconds(points, position=50, max_offset=100, now_ms=10 * S) == 0.0


# -------------------------------------------------------------------- corners


def test_a_steady_queue_adds_no_corner():
    corners: list = []
    lag.add_corner(corners, None, [0, 0])
    for second in range(10, 200, 10):
        changed = lag.add_corner(corners, [second - 10, (second - 10) * S], [second, second * S])
        assert not changed

    assert corners == [[0, 0]]


def test_a_pause_adds_the_point_where_it_began_and_where_it_ended():
    corners = [[0, 0]]
    lag.add_corner(corners, [10, 10 * S], [20, 20 * S])  # steady 1/s: nothing
    lag.add_corner(corners, [20, 20 * S], [20, 30 * S])  # paused since 20 s
    lag.add_corner(corners, [20, 30 * S], [20, 40 * S])  # still paused: nothing
    lag.add_corner(corners, [20, 40 * S], [60, 50 * S])  # writing again

    assert corners == [[0, 0], [20, 20 * S], [20, 40 * S]]


def test_a_steady_queue_still_gets_a_corner_every_so_often():
    corners = [[0, 0]]
    step = 10 * S
    ts = 0
    while ts < lag.MAX_CORNER_GAP_MS + 3 * step:
        lag.add_corner(corners, [ts // S, ts], [(ts + step) // S, ts + step])
        ts += step

    assert len(corners) == 2


def test_corners_thin_their_older_half_when_full():
    corners = [[i, i * S] for i in range(lag.TIMELINE_POINTS)]
    pause_from = lag.TIMELINE_POINTS + 10
    lag.add_corner(corners, [pause_from, pause_from * S], [pause_from, (pause_from + 10) * S])

    assert len(corners) <= lag.TIMELINE_POINTS
    assert corners[0] == [0, 0]
    assert corners[-1] == [pause_from, pause_from * S]


def test_an_offset_that_went_back_starts_the_timeline_over():
    corners = [[0, 0], [500, 50 * S]]

    assert lag.add_corner(corners, [600, 60 * S], [3, 70 * S])
    assert corners == [[3, 70 * S]]


def test_the_timeline_ends_with_the_previous_and_current_points():
    points = lag.timeline([[0, 0]], [50, 50 * S], [60, 60 * S])

    assert points == [[0, 0], [50, 50 * S], [60, 60 * S]]


# ------------------------------------------------------ rates, drain, expiry risk


def test_rate_is_messages_per_second_between_two_readings():
    assert lag.rate(100, 0, 400, 30 * S) == 10.0


def test_rate_of_a_counter_that_went_back_is_zero():
    assert lag.rate(400, 0, 100, 30 * S) == 0.0


def test_counter_advance_counts_queues_forward_only():
    assert lag.counter_advance([10, 20, 30], [15, 10, 31]) == 6
    assert lag.counter_advance([10], [12, 7]) == 9  # a new queue counts from 0
    assert lag.counter_advance([None, 5], [40, 6]) == 1  # a first commit counts nothing


def test_drain_time_is_lag_over_the_net_consume_rate():
    assert lag.drain(1000, consume_rate=30.0, produce_rate=20.0, interval_s=10) == lag.Drain(
        DRAINING, 100.0
    )


def test_drain_time_is_not_draining_when_producers_keep_ahead():
    assert lag.drain(1000, 20.0, 20.0, 10) == lag.Drain(NOT_DRAINING, None)
    assert lag.drain(1000, 5.0, 20.0, 10) == lag.Drain(NOT_DRAINING, None)


def test_drain_time_without_lag_is_caught_up():
    assert lag.drain(0, 0.0, 20.0, 10) == lag.Drain(CAUGHT_UP, 0.0)


def test_lag_consumed_within_one_sample_interval_is_caught_up_whatever_the_net_rate():
    """A steady consumer keeping pace: consume − produce is noise around zero."""
    assert lag.drain(40, consume_rate=99.9, produce_rate=100.0, interval_s=10).state == CAUGHT_UP
    assert lag.drain(40, consume_rate=100.1, produce_rate=100.0, interval_s=10).state == CAUGHT_UP


def test_a_group_that_consumes_nothing_is_not_draining_even_with_little_lag():
    assert lag.drain(1, consume_rate=0.0, produce_rate=0.0, interval_s=10).state == NOT_DRAINING


def test_expiry_risk_is_hours_until_the_earliest_expiry_of_a_group_and_topic():
    hour = 3_600_000
    forecast = [
        {"group": "g", "topic": "t", "queue": 0, "expires_at_ms": 10 * hour},
        {"group": "g", "topic": "t", "queue": 1, "expires_at_ms": 4 * hour},
        {"group": "h", "topic": "t", "queue": 0, "expires_at_ms": 8 * hour},
    ]

    earliest = lag.earliest_expiry(forecast)

    assert earliest == {("g", "t"): 4 * hour, ("h", "t"): 8 * hour}
    assert lag.expiry_risk_hours(earliest[("g", "t")], now_ms=1 * hour) == pytest.approx(3.0)
    assert lag.expiry_risk_hours(None, now_ms=hour) is None
    assert lag.expiry_risk_hours(2 * hour, now_ms=3 * hour) == 0.0


def test_consumed_advance_leaves_out_what_resets_moved():
    assert lag.consumed_advance([100], [5376], {0: 5276}) == 0  # a skip: nothing consumed
    assert lag.consumed_advance([1000], [600], {0: -500}) == 100  # read 100 after a rewind
    assert lag.consumed_advance([10, None], [15, 40]) == 5  # a first commit counts nothing


def test_a_consumer_keeping_pace_with_a_fresh_lag_is_caught_up_and_one_falling_behind_is_not():
    assert lag.drain(600, 100.0, 100.0, 10, fresh=True).state == "caught up"
    assert lag.drain(600, 98.0, 100.0, 10, fresh=True).state == "not draining"
    assert lag.drain(600, 100.0, 100.0, 10, fresh=False).state == "not draining"
    assert lag.drain(600, 130.0, 100.0, 10, fresh=False).seconds == 20.0
