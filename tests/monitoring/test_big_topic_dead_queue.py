"""A dead queue on a big topic: the topic is sampled as one virtual queue per group, yet
one queue stuck for an hour among 16 that drain reads its oldest unconsumed message's age
(not an average over the topic) and the status Burrow gives that queue, with the count of
stuck queues in the status text."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.metrics import ERR
from console.monitoring.models import GroupSample, StoreSample

pytestmark = pytest.mark.django_db

QUEUES = 16
STUCK = 5
HOUR_S = 3600


@pytest.fixture
def wide(settings, store):
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 8
    settings.TIDEMARK_SAMPLE_CHUNK_QUEUES = 4
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = QUEUES
    store.create_topic("wide", queues=QUEUES)
    return store


def traffic_minute(store) -> None:
    """A message on every queue; the consumer commits every queue but the stuck one."""
    store.append_batch("wide", [{"body": b"m", "queue": q} for q in range(QUEUES)])
    store.commit_offsets(
        "billing",
        "wide",
        {q: store.queue_range("wide", q)[1] for q in range(QUEUES) if q != STUCK},
    )


def latest_row() -> GroupSample:
    return GroupSample.objects.get(group="billing", ts_ms=StoreSample.objects.latest("ts_ms").ts_ms)


def test_one_of_16_queues_stuck_for_an_hour_reads_its_age_and_err_with_the_stuck_count(
    wide, clock, sample_at
):
    clock.at(0)
    wide.append_batch("wide", [{"body": b"m", "queue": q} for q in range(QUEUES)])
    wide.commit_offsets("billing", "wide", dict.fromkeys(range(QUEUES), 0))
    for minute in range(1, 61):
        clock.at(minute * 60 - 5)
        traffic_minute(wide)
        sample_at(minute * 60)

    row = latest_row()
    assert row.aggregated
    assert row.lag == 61  # the stuck queue's messages only
    assert row.lag_seconds_max == pytest.approx(HOUR_S, abs=1)
    assert row.status in ("STOP", "STALL")
    assert "1 of 16 queues stuck" in row.status_reason
    metrics = current.group_metrics_for("billing")
    assert metrics.status == ERR
    assert metrics.lag_seconds == pytest.approx(HOUR_S, abs=1)
    assert "1 of 16 queues stuck" in metrics.status_reason


def test_a_stuck_queue_whose_consumer_still_commits_its_offset_reads_stall(wide, clock, sample_at):
    clock.at(0)
    wide.append_batch("wide", [{"body": b"m", "queue": q} for q in range(QUEUES)])
    wide.commit_offsets("billing", "wide", dict.fromkeys(range(QUEUES), 0))
    for minute in range(1, 11):
        clock.at(minute * 60 - 5)
        traffic_minute(wide)
        wide.commit_offset("billing", "wide", STUCK, 0)  # the same offset again
        sample_at(minute * 60)

    row = latest_row()
    assert row.status == "STALL"
    assert "1 of 16 queues stuck" in row.status_reason
    assert "1 committing the same offset (STALL)" in row.status_reason


def test_queues_that_all_lag_but_move_are_not_stuck(wide, clock, sample_at):
    clock.at(0)
    for minute in range(1, 11):
        clock.at(minute * 60 - 5)
        wide.append_batch("wide", [{"body": b"m", "queue": q} for q in range(QUEUES)] * 3)
        # each queue consumed one message behind the last: lag 1 per queue and moving
        wide.commit_offsets(
            "billing", "wide", {q: wide.queue_range("wide", q)[1] - 1 for q in range(QUEUES)}
        )
        sample_at(minute * 60)

    row = latest_row()
    assert row.lag == QUEUES
    assert "stuck" not in row.status_reason
    assert row.lag_seconds_max == pytest.approx(5, abs=1)  # the newest message, 5 s old


def test_the_store_is_read_once_per_new_offset_of_a_lagging_queue_and_never_without_lag(
    wide, clock, sample_at, monkeypatch
):
    reads: list[tuple[int, int]] = []
    real = type(wide).store_time_at

    def counting(self, topic, queue, offset):
        reads.append((queue, offset))
        return real(self, topic, queue, offset)

    monkeypatch.setattr(type(wide), "store_time_at", counting)
    clock.at(0)
    wide.append_batch("wide", [{"body": b"m", "queue": q} for q in range(QUEUES)])
    wide.commit_offsets("billing", "wide", dict.fromkeys(range(QUEUES), 1))
    wide.commit_offset("billing", "wide", STUCK, 0)

    sample_at(10)
    assert reads == [(STUCK, 0)]  # the one lagging queue; none for the 15 caught up
    sample_at(20)
    sample_at(30)
    assert reads == [(STUCK, 0)]  # its offset did not move: its time is known
