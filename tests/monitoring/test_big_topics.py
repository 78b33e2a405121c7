"""A big topic (more queues than TIDEMARK_BIG_TOPIC_QUEUES) is sampled a rotating subset of
its queues at a time, in chunks, within a queue budget: every queue is read again within
queues / budget samples, totals add up each chunk's latest reading, the report says it
sampled a subset, and the rows per sample stay one per topic and per group and topic."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.metrics import WHOLE_TOPIC
from console.monitoring.models import GroupSample, QueueChunk, StoreSample, TopicSample

pytestmark = pytest.mark.django_db

QUEUES = 20_000
CHUNK = 2_000
BUDGET = 5_000  # three chunks a sample: every queue read within four samples


@pytest.fixture
def big(settings, store):
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 1_000
    settings.TIDEMARK_SAMPLE_CHUNK_QUEUES = CHUNK
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = BUDGET
    store.create_topic("wide", queues=QUEUES, layout="shared")
    # one message on every 100th queue; two more on queue 15,000
    store.append_batch("wide", [{"body": b"m", "queue": q} for q in range(0, QUEUES, 100)])
    store.append_batch("wide", [{"body": b"m", "queue": 15_000} for _ in range(2)])
    store.create_topic("small", queues=2)
    store.append_batch("small", [{"body": b"s", "queue": 0}])
    # billing consumed queues 0 to 9,900 (100 messages), never committed on the rest
    store.commit_offsets("billing", "wide", {q: 1 for q in range(0, 10_000, 100)})
    return store


def read_in(ts_ms: int) -> list[int]:
    """The first queues of the chunks the sample at ``ts_ms`` read."""
    chunks = QueueChunk.objects.filter(topic="wide", sampled_ms=ts_ms)
    return sorted(c.first_queue for c in chunks)


def test_the_rotating_subset_covers_every_queue_and_the_message_says_so(big, sample_at):
    reports = []
    read = []
    for i in range(4):
        reports.append(sample_at(10 * (i + 1)))
        read.append(read_in(reports[-1].ts_ms))

    assert [r.big_sampled for r in reports] == [6_000] * 4  # three whole chunks each
    assert read[:3] == [[0, 2_000, 4_000], [6_000, 8_000, 10_000], [12_000, 14_000, 16_000]]
    # the fourth reads the last chunk, then the stalest again (chunk 4,000 is still from 10 s)
    assert read[3] == [0, 2_000, 18_000]
    assert all(r.degraded for r in reports)
    first = reports[0].message()
    assert "sampled 6,000 of 20,000 queues of 1 big topic(s) this round" in first
    assert "rotating subset" in first
    assert "some chunks not read yet" in first
    assert "the oldest read 30 s ago" in reports[3].message()
    chunks = QueueChunk.objects.filter(topic="wide").order_by("first_queue")
    assert [c.first_queue for c in chunks] == list(range(0, QUEUES, CHUNK))
    assert sum(c.queues for c in chunks) == QUEUES
    fifth = sample_at(50)
    assert read_in(fifth.ts_ms) == [4_000, 6_000, 8_000]


def test_totals_add_up_every_chunk_once_all_are_read(big, sample_at):
    for i in range(4):
        sample_at(10 * (i + 1))

    row = TopicSample.objects.get(topic="wide", ts_ms=StoreSample.objects.latest("ts_ms").ts_ms)
    assert row.aggregated
    assert row.messages == QUEUES // 100 + 2
    assert (row.queue_count, row.sampled_queues) == (QUEUES, 6_000)
    assert row.oldest_ms is not None
    assert len(row.max_offsets) == 1  # one virtual queue, not 20,000 numbers
    lag = GroupSample.objects.get(group="billing", topic="wide", ts_ms=row.ts_ms)
    assert lag.aggregated
    assert lag.lag == (QUEUES // 100 + 2) - 100
    assert lag.queues_behind == 100
    assert len(lag.lags) == 1
    small = TopicSample.objects.get(topic="small", ts_ms=row.ts_ms)
    assert (small.aggregated, small.max_offsets, small.sampled_queues) == (False, [1, 0], 2)
    store_row = StoreSample.objects.get(ts_ms=row.ts_ms)
    assert store_row.queues == QUEUES + 2
    assert store_row.messages == QUEUES // 100 + 2 + 1


def test_a_new_message_reaches_the_total_when_its_chunk_is_read_again(big, sample_at):
    for i in range(4):
        sample_at(10 * (i + 1))
    big.append_batch("wide", [{"body": b"m", "queue": 4_001}])  # in the stalest chunk

    sample_at(50)

    row = TopicSample.objects.get(topic="wide", ts_ms=StoreSample.objects.latest("ts_ms").ts_ms)
    assert row.messages == QUEUES // 100 + 3
    assert row.last_write_ms == row.ts_ms  # its max offsets grew in this sample
    metrics = current.group_metrics_for("billing")
    assert metrics.lag == (QUEUES // 100 + 3) - 100
    [whole] = metrics.queues  # a big topic is one row, for the topic as a whole
    assert (whole.topic, whole.queue, whole.lag) == ("wide", WHOLE_TOPIC, metrics.lag)


def test_rows_per_sample_stay_one_per_topic_and_per_group_and_topic(big, sample_at):
    report = sample_at(10)

    assert report.rows == 1 + 2 + 1
    assert TopicSample.objects.count() == 2
    assert GroupSample.objects.count() == 1


def test_a_budget_covering_every_queue_is_not_degraded(big, settings, sample_at):
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = QUEUES

    report = sample_at(10)

    assert report.big_sampled == QUEUES
    assert not report.degraded
    assert "rotating" not in report.message()
