"""The hourly task ``console.monitoring.tasks.topic_statistics``, run in this process
(``apply``): it counts the last two hours of store time into TopicMinuteStats, a rerun
replaces the same rows, and the run is recorded in TaskRun."""

from __future__ import annotations

import json

import pytest

from storeadapter.spark.jobs.stats import MINUTE_MS

START_MS = 1_800_000_000_000  # the fake clock's start, on a minute boundary
HOUR_MS = 60 * MINUTE_MS

pytestmark = pytest.mark.django_db


def test_the_task_counts_the_last_two_hours_and_records_its_run(
    spark, open_store, store_path, fake_clock, settings, redis_db
):
    from console.background.models import TaskRun
    from console.monitoring.models import TopicMinuteStats
    from console.monitoring.tasks import TOPIC_STATS_TASK, topic_statistics

    store = open_store()
    store.create_topic("orders", queues=1)
    store.append_batch("orders", [{"body": b"old", "key": "k"}])  # outside the window
    fake_clock.ms = START_MS + 3 * HOUR_MS + 5_000
    store.append_batch("orders", [{"body": b"x" * 10, "key": f"k{i % 2}"} for i in range(3)])
    fake_clock.ms += MINUTE_MS
    store.append_batch("orders", [{"body": b"yy", "key": "k"}])
    settings.TIDEMARK_STORE_DIR = store_path

    def stored():
        return list(
            TopicMinuteStats.objects.order_by("minute_ms").values_list(
                "topic", "minute_ms", "messages", "bytes", "distinct_keys"
            )
        )

    expected = [
        ("orders", START_MS + 3 * HOUR_MS, 3, 30, 2),
        ("orders", START_MS + 3 * HOUR_MS + MINUTE_MS, 1, 2, 1),
    ]
    result = topic_statistics.apply()
    assert result.successful(), result.traceback
    assert result.get() == {"rows": 2, "topics": 1, "messages": 4, "bytes": 32}
    assert stored() == expected

    run = TaskRun.objects.get(name=TOPIC_STATS_TASK)
    assert run.last_outcome == TaskRun.OK
    assert run.runs == 1
    assert run.every_s == 3600
    assert run.progress is None
    assert json.loads(run.last_message)["rows"] == 2

    # Idempotent: a rerun over the same window writes the same rows again.
    assert topic_statistics.apply().successful()
    assert stored() == expected
    assert TaskRun.objects.get(name=TOPIC_STATS_TASK).runs == 2


def test_the_task_fails_and_says_so_without_a_store(settings, tmp_path, redis_db):
    from console.background.models import TaskRun
    from console.monitoring.tasks import TOPIC_STATS_TASK, topic_statistics

    settings.TIDEMARK_STORE_DIR = tmp_path / "nothing"
    result = topic_statistics.apply()

    assert result.failed()
    run = TaskRun.objects.get(name=TOPIC_STATS_TASK)
    assert run.last_outcome == TaskRun.FAILED
    assert "There is no store" in run.last_message
