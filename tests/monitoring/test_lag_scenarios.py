"""Lag that means what it says: scripted histories through the engine's clock and the
sampler (retention, old backlogs, steady traffic)."""

from __future__ import annotations

import random

import pytest

from console.monitoring import current
from console.monitoring.metrics import NOT_DRAINING
from console.monitoring.models import GroupSample
from storeadapter.summaries import group_queue_lags, group_summary

pytestmark = pytest.mark.django_db

HOUR_S = 3600


def append(store, topic: str, count: int, queue: int = 0, size: int = 1) -> None:
    store.append_batch(topic, [{"body": b"x" * size, "queue": queue} for _ in range(count)])


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192, "retention_hours": 1}])
def test_retention_deleting_unconsumed_messages_keeps_the_lag_and_counts_them_lost(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 100, size=200)  # several 8 KiB segments
    store.commit_offset("billing", "orders", 0, 10)
    clock.at(2 * HOUR_S)
    append(store, "orders", 5, size=200)
    store.delete_expired(clock.ms)
    low, high = store.queue_range("orders", 0)
    assert low > 10  # retention deleted messages billing had not consumed

    sample_at(2 * HOUR_S + 10)

    row = GroupSample.objects.get()
    assert row.lag == high - 10 == 95
    assert (row.lost, row.lost_per_queue) == (low - 10, [low - 10])
    assert current.group_metrics_for("billing").lost == low - 10


def test_lag_in_seconds_of_a_backlog_7190_s_old_is_7190_s_on_a_topic_no_longer_written(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 50)
    clock.at(10)
    append(store, "orders", 50)
    store.commit_offset("billing", "orders", 0, 50)  # the oldest unconsumed was stored at 10 s

    sample_at(7200)  # the first sample, two hours later, nothing written since

    assert GroupSample.objects.get().lag_seconds == [7190.0]
    assert current.group_metrics_for("billing").lag_seconds == 7190.0


def test_lag_in_seconds_counts_from_the_first_message_kept_when_retention_took_the_rest(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 10)
    store.commit_offset("billing", "orders", 0, 10)
    clock.at(100)
    append(store, "orders", 10)

    sample_at(160)

    assert GroupSample.objects.get().lag_seconds == [60.0]


def test_an_hour_of_steady_traffic_never_reads_not_draining(store, clock, sample_at):
    """100 messages a second; the consumer commits every second, one to three seconds
    behind. Between two 10-second samples consume − produce is noise around zero."""
    store.create_topic("orders", queues=1)
    rng = random.Random(18)
    appended = 0
    at_second: list[int] = []
    answers = []
    for second in range(HOUR_S + 1):
        clock.at(second)
        append(store, "orders", 100)
        appended += 100
        at_second.append(appended)
        behind = rng.randint(1, 3)
        if second >= behind:
            store.commit_offset("steady", "orders", 0, at_second[second - behind])
        if second % 10 == 0:
            sample_at(second)
            if second:
                answers.append(current.group_metrics_for("steady").drain)

    assert NOT_DRAINING not in answers
    assert len(answers) == 360


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192, "retention_hours": 1}])
def test_the_pages_live_lag_counts_from_the_committed_offset_after_retention_as_samples_do(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 100, size=200)
    store.commit_offset("billing", "orders", 0, 10)
    clock.at(2 * HOUR_S)
    append(store, "orders", 5, size=200)
    store.delete_expired(clock.ms)
    low, high = store.queue_range("orders", 0)
    assert low > 10

    sample_at(2 * HOUR_S + 10)

    sampled = GroupSample.objects.get().lag
    summary = group_summary(store, "billing")
    (row,) = group_queue_lags(store, "billing", "orders", 0, 1)
    assert summary.lag == summary.queues[0].lag == row.lag == sampled == high - 10
    assert summary.queues_behind == 1


def test_a_healthy_consumer_committing_every_60_s_never_reads_not_draining(store, clock, sample_at):
    """100 messages a second; the consumer reads everything within a second but commits
    only once a minute: its lag is a saw-tooth of 0 to 6,000 that never grows."""
    store.create_topic("orders", queues=1)
    appended = 0
    answers = []
    for second in range(HOUR_S + 1):
        clock.at(second)
        if second % 60 == 30:
            store.commit_offset("batchy", "orders", 0, appended)  # all read before this second
        append(store, "orders", 100)
        appended += 100
        if second % 10 == 5:
            sample_at(second)
            if second > 30:  # its first commit was at 30 s
                answers.append(current.group_metrics_for("batchy").drain)

    assert NOT_DRAINING not in answers
    assert len(answers) == 357


def test_a_consumer_two_percent_behind_never_reads_caught_up(store, clock, sample_at):
    """300 messages a second; the consumer commits every second but reads 2 % fewer than
    arrive: its lag grows 6 a second, and it is not keeping up."""
    store.create_topic("orders", queues=1)
    appended = 0
    answers = []
    for second in range(601):
        clock.at(second)
        append(store, "orders", 300)
        appended += 300
        store.commit_offset("slow", "orders", 0, int(appended * 0.98))
        if second % 10 == 0:
            sample_at(second)
            if second:
                answers.append(current.group_metrics_for("slow").drain)

    assert set(answers) == {NOT_DRAINING}


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192, "retention_hours": 1}])
def test_retention_deleting_unconsumed_messages_does_not_lower_the_lag_in_seconds(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 100, size=200)  # several 8 KiB segments, stored at 0 s
    store.commit_offset("billing", "orders", 0, 10)  # then billing stopped
    store.create_topic("padding", queues=1)
    clock.at(HOUR_S / 2)
    append(store, "padding", 60, size=200)  # closes the segment orders' 100th is in
    clock.at(HOUR_S * 5 / 4)
    append(store, "orders", 100, size=200)  # stored at 1 h 15 min
    clock.at(2 * HOUR_S)
    sample_at(2 * HOUR_S)
    before = GroupSample.objects.latest("ts_ms").lag_seconds[0]
    store.delete_expired(clock.ms)  # the segments up to 30 min, not those of 1 h 15
    assert store.queue_range("orders", 0)[0] == 100  # 90 unconsumed messages deleted

    sample_at(2 * HOUR_S + 10)

    assert before == 2 * HOUR_S
    assert GroupSample.objects.latest("ts_ms").lag_seconds == [2 * HOUR_S + 10]
    assert current.group_metrics_for("billing").lag_seconds == 2 * HOUR_S + 10


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192, "retention_hours": 1}])
def test_the_apis_group_detail_counts_the_messages_lost_to_retention(
    store, clock, sample_at, as_viewer
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 100, size=200)
    store.commit_offset("billing", "orders", 0, 10)
    clock.at(2 * HOUR_S)
    append(store, "orders", 5, size=200)
    store.delete_expired(clock.ms)
    low, _high = store.queue_range("orders", 0)
    sample_at(2 * HOUR_S + 10)

    body = as_viewer.get("/api/v1/groups/billing/").json()

    assert body["lost"] == low - 10
    assert body["queues"][0]["lost"] == low - 10
    assert body["metrics"]["lost"] == low - 10
