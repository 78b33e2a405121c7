"""take_sample writes what the store says: one row per topic, per group and topic, and for
the store, with lag in seconds and statuses worked out from the samples before."""

from __future__ import annotations

import pytest

from console.monitoring.metrics import OK, STOP
from console.monitoring.models import GroupSample, StoreSample, TopicSample
from console.monitoring.sampler import take_sample

pytestmark = pytest.mark.django_db


def fill(store, topic: str, per_queue: list[int]) -> None:
    for queue, count in enumerate(per_queue):
        if count:
            store.append_batch(topic, [{"body": b"m", "queue": queue} for _ in range(count)])


def test_a_sample_writes_each_topics_max_offsets_and_size(store, sample_at):
    store.create_topic("orders", queues=3)
    fill(store, "orders", [2, 5, 0])

    sample_at(0)

    row = TopicSample.objects.get(topic="orders")
    assert row.max_offsets == [2, 5, 0]
    assert row.messages == 7
    assert row.resolution == 10


def test_a_sample_writes_each_groups_committed_offsets_lags_and_commit_times(
    store, clock, sample_at
):
    store.create_topic("orders", queues=3)
    fill(store, "orders", [4, 6, 3])
    clock.at(1)
    store.commit_offset("billing", "orders", 0, 4)
    clock.at(2)
    store.commit_offset("billing", "orders", 1, 1)

    sample_at(10)

    row = GroupSample.objects.get(group="billing", topic="orders")
    assert row.committed == [4, 1, None]
    assert row.lags == [0, 5, 3]
    assert row.lag == 8
    assert row.last_commits == [clock.at(1), clock.at(2), None]


def test_a_sample_writes_the_store_totals_and_disk_use(store, sample_at):
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=1)
    fill(store, "orders", [3, 3])
    fill(store, "audit", [2])
    store.commit_offset("billing", "orders", 0, 1)

    sample_at(0)

    row = StoreSample.objects.get()
    stats = store.stats(topics=False)
    assert (row.topics, row.queues, row.groups) == (2, 3, 1)
    assert row.messages == 8
    assert row.backlog == 2 + 3
    assert row.disk_bytes == stats.disk_bytes
    # The ratio is the filesystem's, which the suite's other processes write to meanwhile.
    assert row.disk_ratio == pytest.approx(stats.disk_ratio, abs=0.01)


def test_counters_add_what_was_appended_and_consumed_between_samples(store, sample_at):
    store.create_topic("orders", queues=2)
    fill(store, "orders", [3, 3])
    store.commit_offset("billing", "orders", 0, 1)
    store.commit_offset("billing", "orders", 1, 1)
    sample_at(0)
    first = StoreSample.objects.get()

    fill(store, "orders", [4, 1])
    store.commit_offset("billing", "orders", 0, 5)
    store.commit_offset("billing", "orders", 1, 2)
    sample_at(10)

    second = StoreSample.objects.latest("ts_ms")
    assert second.appended - first.appended == 5
    assert second.consumed - first.consumed == 5
    topic = TopicSample.objects.filter(topic="orders").order_by("ts_ms")
    assert topic[1].appended - topic[0].appended == 5


def test_a_reset_backwards_counts_nothing_consumed(store, sample_at):
    store.create_topic("orders", queues=1)
    fill(store, "orders", [10])
    store.commit_offset("billing", "orders", 0, 8)
    sample_at(0)
    store.commit_offset("billing", "orders", 0, 2)

    sample_at(10)

    rows = GroupSample.objects.order_by("ts_ms")
    assert rows[1].consumed == rows[0].consumed


def test_a_sample_not_newer_than_the_last_one_is_refused(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    sample_at(10)

    again = take_sample(clock.at(10))
    older = take_sample(clock.at(5))

    assert not again.written and not older.written
    assert StoreSample.objects.count() == 1
    assert TopicSample.objects.count() == 1


def test_lag_seconds_is_the_age_of_the_oldest_unconsumed_message(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    fill(store, "orders", [10])
    store.commit_offset("billing", "orders", 0, 10)
    sample_at(0)  # max offset 10 at 0 s
    fill(store, "orders", [10])
    sample_at(10)  # 20 at 10 s
    fill(store, "orders", [10])

    sample_at(20)  # 30 at 20 s; billing still at 10, which the queue reached at 0 s

    row = GroupSample.objects.latest("ts_ms")
    assert row.lags == [20]
    assert row.lag_seconds == [20.0]


def test_lag_seconds_of_a_queue_without_lag_is_zero(store, sample_at):
    store.create_topic("orders", queues=1)
    fill(store, "orders", [10])
    store.commit_offset("billing", "orders", 0, 10)

    sample_at(0)

    assert GroupSample.objects.get().lag_seconds == [0.0]


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192}])
def test_expiry_comes_from_the_engines_forecast(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    store.append_batch("orders", [b"x" * 200 for _ in range(100)])  # several 8 KiB segments
    store.commit_offset("billing", "orders", 0, 0)

    sample_at(60)

    forecast = store.expiry_forecast(clock.ms)
    expected = min(r["expires_at_ms"] for r in forecast if r["group"] == "billing")
    assert GroupSample.objects.get().expires_at_ms == expected


def test_a_queue_whose_consumer_stopped_is_stop_and_a_moving_one_ok(store, clock, sample_at):
    store.create_topic("orders", queues=2)
    fill(store, "orders", [100, 100])
    clock.at(0)
    store.commit_offset("billing", "orders", 0, 10)
    store.commit_offset("billing", "orders", 1, 10)
    for step in range(1, 6):
        clock.at(step * 10 - 5)
        if step == 2:
            store.commit_offset("billing", "orders", 0, 12)  # queue 0's last commit
        store.commit_offset("billing", "orders", 1, 10 + step * 10)  # queue 1 moves on
        sample_at(step * 10)

    row = GroupSample.objects.latest("ts_ms")
    assert row.statuses == [STOP, OK]
    assert row.status == STOP
