"""The topic statistics job: per topic per minute counts equal a plain Python count over
the engine's own reads; the time and topic filters; ``manage.py topic_stats`` upserts."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from storeadapter.spark.jobs.stats import BUCKET_NAMES, MINUTE_MS, size_bucket, topic_statistics
from tests.engine.storetools import small_config
from tests.spark.sparktools import engine_rows

START_MS = 1_800_000_000_000  # the fake clock's start, on a minute boundary
#: Body sizes covering every histogram bucket, both sides of each limit.
SIZES = (0, 1, 64, 65, 256, 257, 1024, 1025, 4096, 4097, 16384, 16385, 20000)


@pytest.fixture
def stats_store(open_store, fake_clock):
    """Topics ``a`` (2 queues) and ``b`` (1 queue) over four minutes: bodies of every size
    bucket, keys repeated within and across minutes, some messages without keys."""
    store = open_store(config=small_config(segment_bytes=64 << 10, max_message_bytes=32 << 10))
    store.create_topic("a", queues=2)
    store.create_topic("b", queues=1)
    for minute in range(4):
        for second in (0, 17, 59):
            fake_clock.ms = START_MS + minute * MINUTE_MS + second * 1000
            store.append_batch(
                "a",
                [
                    {"body": b"x" * size, "key": [f"k{i % 3}", f"m{minute}"] if i % 4 else None}
                    for i, size in enumerate(SIZES[minute + second % 3 :])
                ],
            )
            store.append_batch(
                "b",
                [
                    {"body": b"y" * (10 * i + second), "key": f"user{i % 2}"}
                    for i in range(minute + 2)
                ],
            )
    return store


def plain_count(rows: list[dict]) -> list[dict]:
    """The statistics, counted in plain Python over engine rows."""
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["topic"], row["store_time"] // MINUTE_MS * MINUTE_MS].append(row)
    return [
        {
            "topic": topic,
            "minute_ms": minute,
            "messages": len(found),
            "bytes": sum(len(r["body"]) for r in found),
            "distinct_keys": len({key for r in found for key in r["keys"]}),
            "size_histogram": {
                **dict.fromkeys(BUCKET_NAMES, 0),
                **Counter(size_bucket(len(r["body"])) for r in found),
            },
        }
        for (topic, minute), found in sorted(groups.items())
    ]


def test_size_buckets():
    assert [size_bucket(n) for n in (0, 64, 65, 1024, 16384, 16385)] == [
        "le_64",
        "le_64",
        "le_256",
        "le_1k",
        "le_16k",
        "gt_16k",
    ]


def test_statistics_equal_a_plain_count(spark, stats_store, store_path):
    everything = engine_rows(stats_store)
    expected = plain_count(everything)
    assert [(r["topic"], r["minute_ms"]) for r in expected] == [
        (topic, START_MS + m * MINUTE_MS) for topic in "ab" for m in range(4)
    ]
    assert all(r["distinct_keys"] > 0 for r in expected)
    assert any(r["size_histogram"]["gt_16k"] for r in expected)

    assert topic_statistics(spark, store_path) == expected


def test_time_and_topic_filters(spark, stats_store, store_path):
    everything = engine_rows(stats_store)
    since, until = START_MS + MINUTE_MS + 17_000, START_MS + 3 * MINUTE_MS
    window = [r for r in everything if since <= r["store_time"] < until]

    assert topic_statistics(spark, store_path, since=since, until=until) == plain_count(window)
    assert topic_statistics(
        spark,
        store_path,
        since=dt.datetime.fromtimestamp(since / 1000, dt.UTC).isoformat(),
        until=str(until),
        topics=["b"],
    ) == plain_count([r for r in window if r["topic"] == "b"])
    assert topic_statistics(spark, store_path, until=START_MS) == []
    with pytest.raises(ValueError, match="since"):
        topic_statistics(spark, store_path, since="yesterday")


@pytest.mark.django_db
def test_command_writes_and_upserts(spark, stats_store, store_path, settings, fake_clock):
    from console.monitoring.models import TopicMinuteStats

    settings.TIDEMARK_STORE_DIR = store_path
    expected = plain_count(engine_rows(stats_store))

    def stored():
        return [
            {
                "topic": s.topic,
                "minute_ms": s.minute_ms,
                "messages": s.messages,
                "bytes": s.bytes,
                "distinct_keys": s.distinct_keys,
                "size_histogram": s.size_histogram,
            }
            for s in TopicMinuteStats.objects.order_by("topic", "minute_ms")
        ]

    call_command("topic_stats", "--topic", "a", "--until", str(START_MS + 2 * MINUTE_MS))
    assert stored() == [r for r in expected if r["topic"] == "a"][:2]

    # More messages in a minute counted already: the rerun replaces that minute's row.
    fake_clock.ms = START_MS + 90_000
    stats_store.append_batch("a", [{"body": b"z" * 300, "key": "late"}])
    expected = plain_count(engine_rows(stats_store))
    out = StringIO()
    call_command("topic_stats", stdout=out)
    assert stored() == expected
    total = sum(r["messages"] for r in expected)
    assert out.getvalue().startswith(
        f"topic_stats: 8 topic-minute rows written for 2 topics ({total} messages"
    )
    assert TopicMinuteStats.objects.count() == 8

    call_command("topic_stats", "--since", str(START_MS))
    assert stored() == expected


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--since", "soon"], "--since must be ms since the epoch or an ISO 8601 time"),
        (["--since", "2000", "--until", "1000"], "--since must be earlier than --until"),
        (["--topic", " "], "--topic needs a topic name"),
    ],
)
def test_command_refuses_bad_arguments(settings, store_path, arguments, message):
    settings.TIDEMARK_STORE_DIR = store_path
    with pytest.raises(CommandError, match=message):
        call_command("topic_stats", *arguments)


@pytest.mark.django_db
def test_command_refuses_a_missing_store(settings, tmp_path):
    settings.TIDEMARK_STORE_DIR = tmp_path / "nowhere"
    with pytest.raises(CommandError, match="There is no store at"):
        call_command("topic_stats")
