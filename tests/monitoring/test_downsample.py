"""Downsampling keeps the last point of each bucket per series and tier, and deletes what
is past 90 days."""

from __future__ import annotations

import pytest

from console.monitoring.downsample import downsample
from console.monitoring.models import (
    CommitWindow,
    GroupSample,
    OffsetTimeline,
    StoreSample,
    TopicSample,
)

pytestmark = pytest.mark.django_db

S = 1000
MIN = 60 * S
HOUR = 60 * MIN
DAY = 24 * HOUR
NOW = 1_800_000_000_000 - 1_800_000_000_000 % DAY  # midnight: buckets line up


def store_row(ts: int, resolution: int = 10, backlog: int = 0) -> StoreSample:
    return StoreSample.objects.create(
        ts_ms=ts,
        resolution=resolution,
        token="t",
        disk_bytes=0,
        disk_ratio=0.0,
        topics=1,
        queues=1,
        groups=1,
        messages=0,
        backlog=backlog,
        appended=0,
        consumed=0,
    )


def topic_row(ts: int, topic: str = "orders", resolution: int = 10, offset: int = 0):
    return TopicSample.objects.create(
        ts_ms=ts, resolution=resolution, topic=topic, max_offsets=[offset], messages=0, appended=0
    )


def group_row(ts: int, group: str = "billing", topic: str = "orders", resolution: int = 10):
    return GroupSample.objects.create(
        ts_ms=ts,
        resolution=resolution,
        group=group,
        topic=topic,
        committed=[0],
        lags=[0],
        last_commits=[None],
        lag_seconds=[None],
        statuses=["OK"],
        lag=0,
        status="OK",
        consumed=0,
    )


def raw_series(start: int, end: int, step: int = 10 * S) -> list[int]:
    return list(range(start, end, step))


def test_raw_points_younger_than_six_hours_stay():
    times = raw_series(NOW - 5 * HOUR, NOW - 5 * HOUR + 3 * MIN)
    for ts in times:
        store_row(ts)

    downsample(NOW)

    assert list(StoreSample.objects.order_by("ts_ms").values_list("ts_ms", "resolution")) == [
        (ts, 10) for ts in times
    ]


def test_raw_points_older_than_six_hours_keep_the_last_point_of_each_minute():
    start = NOW - 7 * HOUR
    for n, ts in enumerate(raw_series(start, start + 3 * MIN)):
        store_row(ts, backlog=n)

    downsample(NOW)

    kept = list(StoreSample.objects.order_by("ts_ms").values_list("ts_ms", "resolution", "backlog"))
    assert kept == [
        (start + 50 * S, 60, 5),
        (start + MIN + 50 * S, 60, 11),
        (start + 2 * MIN + 50 * S, 60, 17),
    ]


def test_minute_points_older_than_seven_days_keep_the_last_point_of_each_hour():
    start = NOW - 8 * DAY
    for ts in raw_series(start, start + 2 * HOUR, MIN):
        topic_row(ts, resolution=60, offset=ts)

    downsample(NOW)

    kept = list(TopicSample.objects.order_by("ts_ms").values_list("ts_ms", "resolution"))
    assert kept == [(start + 59 * MIN, 3600), (start + HOUR + 59 * MIN, 3600)]
    assert TopicSample.objects.order_by("ts_ms").first().max_offsets == [start + 59 * MIN]


def test_hour_points_are_kept_until_ninety_days_then_deleted():
    group_row(NOW - 89 * DAY, resolution=3600)
    group_row(NOW - 91 * DAY, resolution=3600)
    store_row(NOW - 91 * DAY, resolution=3600)

    report = downsample(NOW)

    assert list(GroupSample.objects.values_list("ts_ms", flat=True)) == [NOW - 89 * DAY]
    assert not StoreSample.objects.exists()
    assert report.expired == 2


def test_each_series_is_thinned_on_its_own():
    start = NOW - 7 * HOUR
    group_row(start + 10 * S, group="a")
    group_row(start + 20 * S, group="a")
    group_row(start + 30 * S, group="b")
    group_row(start + 40 * S, group="b", topic="audit")
    group_row(start + 50 * S, group="b")

    downsample(NOW)

    kept = set(GroupSample.objects.values_list("group", "topic", "ts_ms", "resolution"))
    assert kept == {
        ("a", "orders", start + 20 * S, 60),
        ("b", "orders", start + 50 * S, 60),
        ("b", "audit", start + 40 * S, 60),
    }


def test_old_raw_points_reach_the_hour_tier_in_one_run():
    start = NOW - 10 * DAY
    for ts in raw_series(start, start + 2 * MIN):
        store_row(ts)

    downsample(NOW)

    assert list(StoreSample.objects.values_list("ts_ms", "resolution")) == [
        (start + MIN + 50 * S, 3600)
    ]


def test_a_second_run_changes_nothing():
    start = NOW - 7 * HOUR
    for ts in raw_series(start, start + 5 * MIN):
        store_row(ts)
        topic_row(ts)
    downsample(NOW)
    before = sorted(StoreSample.objects.values_list("id", "ts_ms", "resolution"))

    report = downsample(NOW)

    assert sorted(StoreSample.objects.values_list("id", "ts_ms", "resolution")) == before
    assert sum(report.kept.values()) == 0 and report.thinned == 0


def test_state_of_topics_and_groups_no_longer_sampled_is_forgotten():
    store_row(NOW - MIN)
    topic_row(NOW - MIN, topic="orders")
    group_row(NOW - MIN, group="billing", topic="orders")
    OffsetTimeline.objects.create(topic="orders", points=[[]], updated_ms=NOW - MIN)
    OffsetTimeline.objects.create(topic="deleted", points=[[]], updated_ms=NOW - HOUR)
    CommitWindow.objects.create(group="billing", topic="orders", commits=[[]], updated_ms=0)
    CommitWindow.objects.create(group="gone", topic="orders", commits=[[]], updated_ms=0)

    downsample(NOW)

    assert list(OffsetTimeline.objects.values_list("topic", flat=True)) == ["orders"]
    assert list(CommitWindow.objects.values_list("group", flat=True)) == ["billing"]


def episode_rows(start: int) -> None:
    """Two hours of raw points from ``start``: lag 4,800 and ERR from minute 10 to 50."""
    for ts in raw_series(start, start + 2 * HOUR):
        inside = start + 10 * MIN <= ts < start + 50 * MIN
        row = group_row(ts)
        lag, status = (4800, "STALL") if inside else (0, "OK")  # as the sampler writes
        GroupSample.objects.filter(pk=row.pk).update(
            lags=[lag], lag=lag, lag_min=lag, lag_max=lag, status=status, worst_status=status
        )


def test_a_forty_minute_err_episode_survives_thinning_to_hours_as_the_buckets_max():
    start = NOW - 8 * DAY
    episode_rows(start)

    downsample(NOW)

    first_hour = GroupSample.objects.get(ts_ms__lt=start + HOUR)
    assert first_hour.resolution == 3600
    assert (first_hour.lag, first_hour.status) == (0, "OK")  # the last point of the hour
    assert (first_hour.lag_min, first_hour.lag_max, first_hour.worst_status) == (0, 4800, "STALL")


def test_the_week_chart_draws_the_episode_in_its_max_envelope_and_status(as_viewer, monkeypatch):
    from storeadapter.engine import clock as engine_clock

    monkeypatch.setattr(engine_clock, "now_ms", lambda: NOW)
    episode_rows(NOW - 3 * DAY)
    downsample(NOW)

    figure = as_viewer.get("/monitoring/charts/group/?group=billing&range=7d").json()

    traces = {trace["name"]: trace["y"] for trace in figure["data"]}
    assert max(traces["orders/0"]) == 0  # the last values miss it
    assert max(traces["Most in each point's span"]) == 4800
    assert max(traces["Status"]) == 2  # ERR


def stop_episode_rows(start: int) -> None:
    """An hour of raw points from ``start`` as the sampler writes them (queue statuses):
    STOP for five minutes from minute 20, with lag 300 and 55 s behind at its peak."""
    for ts in raw_series(start, start + HOUR):
        inside = start + 20 * MIN <= ts < start + 25 * MIN
        row = group_row(ts)
        lag, status, seconds = (300, "STOP", 55.0) if inside else (0, "OK", 0.0)
        GroupSample.objects.filter(pk=row.pk).update(
            lags=[lag],
            lag=lag,
            lag_min=lag,
            lag_max=lag,
            statuses=[status],
            status=status,
            worst_status=status,
            lag_seconds=[seconds],
        )


@pytest.mark.parametrize("age", [8 * DAY, 30 * DAY])
def test_a_five_minute_stop_episode_keeps_its_stop_on_the_hour_points(age):
    start = NOW - age
    stop_episode_rows(start)

    downsample(NOW)

    (hour,) = GroupSample.objects.all()
    assert hour.resolution == 3600
    assert hour.status == "OK"  # the last point of the hour
    assert hour.worst_status == "STOP"


def test_a_55_second_peak_of_lag_in_seconds_stays_in_the_envelope_of_the_hour_point():
    start = NOW - 8 * DAY
    stop_episode_rows(start)

    downsample(NOW)

    (hour,) = GroupSample.objects.all()
    assert hour.lag_seconds == [0.0]
    assert hour.lag_seconds_max == 55.0


def test_the_week_chart_draws_a_lag_in_seconds_peak_between_its_points(as_viewer, monkeypatch):
    from storeadapter.engine import clock as engine_clock

    monkeypatch.setattr(engine_clock, "now_ms", lambda: NOW)
    stop_episode_rows(NOW - 3 * DAY)
    downsample(NOW)

    figure = as_viewer.get("/monitoring/charts/group/?group=billing&range=7d").json()

    traces = {trace["name"]: trace["y"] for trace in figure["data"]}
    assert max(traces["Lag (s)"]) == 0
    assert max(traces["Most lag (s) in each point's span"]) == 55.0
    assert max(traces["Status"]) == 2  # STOP reads ERR
