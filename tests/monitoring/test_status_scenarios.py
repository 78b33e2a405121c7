"""Burrow's rules on scripted commit histories through the engine's clock and the
sampler, and the one place Tidemark departs from them on purpose."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.metrics import ERR, OK, STALL
from console.monitoring.models import GroupSample

pytestmark = pytest.mark.django_db


def append(store, topic: str, count: int, queue: int = 0) -> None:
    store.append_batch(topic, [{"body": b"m", "queue": queue} for _ in range(count)])


def status_at(sample_at, seconds: float, group: str) -> str:
    sample_at(seconds)
    return current.group_metrics_for(group).status


def test_a_caught_up_consumer_on_a_bursty_topic_sampled_a_second_before_it_commits_is_ok(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 20)
    store.commit_offset("billing", "orders", 0, 20)  # caught up; commits only when it moves
    statuses = [status_at(sample_at, 10, "billing")]
    clock.at(59)
    append(store, "orders", 30)  # a burst, a second before the sample

    statuses.append(status_at(sample_at, 60, "billing"))

    clock.at(61)
    store.commit_offset("billing", "orders", 0, 50)
    statuses.append(status_at(sample_at, 70, "billing"))
    assert statuses == [OK, OK, OK]


def test_a_queue_the_group_never_committed_on_is_left_out_of_its_status(store, clock, sample_at):
    store.create_topic("orders", queues=2)
    clock.at(0)
    append(store, "orders", 10, queue=0)
    append(store, "orders", 10, queue=1)  # nobody of billing ever reads queue 1
    store.commit_offset("billing", "orders", 0, 10)

    statuses = [status_at(sample_at, seconds, "billing") for seconds in (10, 20, 600)]

    assert statuses == [OK, OK, OK]
    row = GroupSample.objects.latest("ts_ms")
    assert row.statuses == [OK, None]
    assert row.lags == [0, 10]  # its messages still count as lag
    assert "1 queue never committed on, left out" in row.status_reason


def test_a_stuck_consumer_committing_on_an_interval_reads_stall(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 10)
    store.commit_offset("stuck", "orders", 0, 5)
    statuses = []
    for second in range(5, 120, 5):
        clock.at(second)
        append(store, "orders", 3)
        store.commit_offset("stuck", "orders", 0, 5)  # the same offset, every 5 s
        if second % 10 == 0:
            sample_at(second)
            statuses.append(GroupSample.objects.latest("ts_ms").status)

    assert statuses[-1] == STALL
    metrics = current.group_metrics_for("stuck")
    assert metrics.status == ERR
    assert "orders/0 is STALL: commits go on but the offset stays at 5" in metrics.status_reason


def test_tidemark_differs_from_burrow_a_consumer_that_died_after_catching_up_reads_stop(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    for second in range(0, 100, 10):
        clock.at(second)
        append(store, "orders", 5)
        store.commit_offset("billing", "orders", 0, (second // 10 + 1) * 5)  # caught up
        sample_at(second + 5)
    clock.at(100)
    append(store, "orders", 5)  # nobody consumes it: billing died at 90 s

    early = status_at(sample_at, 110, "billing")
    late = status_at(sample_at, 300, "billing")

    assert (early, late) == (OK, ERR)
    reason = current.group_metrics_for("billing").status_reason
    assert "stopped after catching up" in reason and "Burrow reads OK" in reason
