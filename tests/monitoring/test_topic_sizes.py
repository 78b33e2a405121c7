"""Each topic's size (bytes of the records it holds) as the sampler counts it from the
consume-queue entries: every record counted once, only new entries read each sample,
lowered by retention, counted again for a topic created anew."""

from __future__ import annotations

import pytest

from console.monitoring.models import TopicBytes, TopicSample

pytestmark = pytest.mark.django_db

HOUR_S = 3600
BODY = b"p" * 300


@pytest.fixture
def store_options() -> dict:
    return {"segment_bytes": 4096, "retention_hours": 72}


@pytest.fixture(autouse=True)
def count_every_sample(settings):
    """Samples here are 10 s apart: every one counts (the default is once a minute)."""
    settings.TIDEMARK_SIZE_EVERY_S = 1


def append(store, topic: str, count: int, queues: int = 3) -> list:
    return [store.append(topic, BODY, queue=i % queues) for i in range(count)]


def record_size(results: list) -> int:
    """The size of each (identical) record: the distance between two in one segment."""
    gaps = {b.commit_offset - a.commit_offset for a, b in zip(results, results[1:], strict=False)}
    return min(gaps)


def size_at(ts_ms: int, topic: str) -> int | None:
    return TopicSample.objects.get(ts_ms=ts_ms, topic=topic).size_bytes


def held(store, topic: str) -> int:
    return sum(high - low for low, high in store.queue_ranges(topic))


def test_the_size_is_the_bytes_of_every_record_held(store, sample_at):
    store.create_topic("orders", queues=3)
    results = append(store, "orders", 10)

    report = sample_at(10)

    assert size_at(report.ts_ms, "orders") == 10 * record_size(results)


def test_a_topic_without_messages_has_size_zero(store, sample_at):
    store.create_topic("quiet", queues=2)

    report = sample_at(10)

    assert size_at(report.ts_ms, "quiet") == 0


def test_a_sample_reads_only_the_entries_appended_since_the_last(store, sample_at):
    store.create_topic("orders", queues=3)
    results = append(store, "orders", 9)
    sample_at(10)
    results += append(store, "orders", 4)

    from console.monitoring import sampler

    read = []
    real = sampler.SizeTally.count

    def counting(self, *args, **kwargs):
        before = self.entries_read
        real(self, *args, **kwargs)
        read.append(self.entries_read - before)

    sampler.SizeTally.count = counting
    try:
        report = sample_at(20)
    finally:
        sampler.SizeTally.count = real

    assert read == [4]
    assert size_at(report.ts_ms, "orders") == 13 * record_size(results)
    assert TopicBytes.objects.get(topic="orders").state["counted"] == [5, 4, 4]


def test_retention_lowers_the_size_by_what_it_deleted(store, clock, sample_at):
    store.create_topic("orders", queues=3)
    clock.at(0)
    results = append(store, "orders", 30)
    first = sample_at(10)
    clock.at(80 * HOUR_S)
    results += append(store, "orders", 30)
    store.delete_expired()
    assert held(store, "orders") < 60

    report = sample_at(80 * HOUR_S + 10)

    assert size_at(first.ts_ms, "orders") == 30 * record_size(results)
    assert size_at(report.ts_ms, "orders") == held(store, "orders") * record_size(results)


def test_retention_lowers_the_size_with_nothing_appended_since(store, clock, sample_at):
    store.create_topic("orders", queues=3)
    clock.at(0)
    results = append(store, "orders", 30)
    clock.at(80 * HOUR_S)
    store.create_topic("other", queues=1)
    append(store, "other", 12, queues=1)
    sample_at(80 * HOUR_S)
    before = held(store, "orders")

    store.delete_expired(now_ms=clock.at(160 * HOUR_S))
    report = sample_at(160 * HOUR_S + 10)

    assert held(store, "orders") < before
    assert size_at(report.ts_ms, "orders") == held(store, "orders") * record_size(results)


def test_a_topic_deleted_and_created_again_counts_only_the_new_records(store, clock, sample_at):
    store.create_topic("orders", queues=3)
    append(store, "orders", 20)
    sample_at(10)
    store.delete_topic("orders")
    clock.at(15)
    store.create_topic("orders", queues=2)
    results = append(store, "orders", 3, queues=2)

    report = sample_at(20)

    assert size_at(report.ts_ms, "orders") == 3 * record_size(results)


def test_a_queue_added_is_counted_from_its_start(store, sample_at):
    store.create_topic("orders", queues=2)
    results = append(store, "orders", 4, queues=2)
    sample_at(10)
    store.add_queues("orders", 1)
    results += [store.append("orders", BODY, queue=2) for _ in range(3)]

    report = sample_at(20)

    assert size_at(report.ts_ms, "orders") == 7 * record_size(results)


def test_a_store_larger_than_the_budget_is_counted_over_several_samples(store, settings, sample_at):
    settings.TIDEMARK_SIZE_ENTRY_BUDGET = 100  # one queue read a sample (64 at least)
    store.create_topic("orders", queues=3)
    results = append(store, "orders", 12)

    sizes = [size_at(sample_at(10 * i).ts_ms, "orders") for i in (1, 2, 3)]

    assert sizes == [None, None, 12 * record_size(results)]


def test_the_topics_counted_longest_ago_are_counted_first(store, settings, sample_at):
    settings.TIDEMARK_SIZE_ENTRY_BUDGET = 64  # one queue read a sample
    for name in ("a", "b", "c"):
        store.create_topic(name, queues=1)
        store.append(name, BODY)
    sample_at(10)  # counts a
    sample_at(20)  # b
    sample_at(30)  # c
    for name in ("a", "b", "c"):
        store.append(name, BODY)

    counted = []
    for seconds in (40, 50, 60):
        store.append("a", BODY)  # a always has news, yet waits its turn
        ts_ms = sample_at(seconds).ts_ms
        counted.append(
            sorted(
                name
                for name in ("a", "b", "c")
                if TopicBytes.objects.get(topic=name).state["counted_ms"] == ts_ms
            )
        )

    assert counted == [["a"], ["b"], ["c"]]


def test_appends_are_counted_once_a_minute_by_default(store, settings, sample_at):
    settings.TIDEMARK_SIZE_EVERY_S = 60
    store.create_topic("orders", queues=1)
    results = append(store, "orders", 2, queues=1)
    sample_at(0)
    results += append(store, "orders", 3, queues=1)

    between = sample_at(30)
    counted = sample_at(60)

    assert size_at(between.ts_ms, "orders") == 2 * record_size(results)
    assert size_at(counted.ts_ms, "orders") == 5 * record_size(results)


def test_a_big_topic_is_counted_chunk_by_chunk(store, settings, sample_at):
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 10
    settings.TIDEMARK_SAMPLE_CHUNK_QUEUES = 20
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = 20
    store.create_topic("wide", queues=40)
    results = [store.append("wide", BODY, queue=q) for q in range(0, 40, 3)]

    first = sample_at(10)
    second = sample_at(20)

    assert size_at(first.ts_ms, "wide") is None  # one chunk of two read so far
    assert size_at(second.ts_ms, "wide") == len(results) * record_size(results)
    assert TopicBytes.objects.filter(topic="wide").count() == 2
