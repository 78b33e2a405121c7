"""Run the Spark topic statistics job over the console's store and keep its rows in
``TopicMinuteStats``: one row per (topic, minute), a rerun over minutes counted before
replaces their rows. Used by ``manage.py topic_stats`` and the hourly task
``console.monitoring.tasks.topic_statistics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from django.conf import settings
from django.db import transaction

from console.monitoring.models import TopicMinuteStats
from storeadapter.access import store_exists
from storeadapter.spark_support import require_spark

UPDATED_FIELDS = ["messages", "bytes", "distinct_keys", "size_histogram"]


class NoStore(Exception):
    """TIDEMARK_STORE_DIR holds no store."""


def run_topic_statistics(
    since: object = None,
    until: object = None,
    topics: Iterable[str] | None = None,
    *,
    console_progress: bool = False,
    counted: Callable[[], None] | None = None,
) -> dict:
    """Count ``since <= store_time < until`` of ``topics`` (default every topic) with Spark
    and upsert the rows; a summary dict (``rows``, ``topics``, ``messages``, ``bytes``).

    ``console_progress`` shows Spark's progress bar; ``counted`` is called once the Spark
    job is done, before the rows are written. NoStore when there is no store; ValueError
    for a bad time.
    """
    store_dir = Path(settings.TIDEMARK_STORE_DIR)
    if not store_exists(store_dir):
        raise NoStore(f"There is no store at {store_dir} (TIDEMARK_STORE_DIR).")
    require_spark()

    from storeadapter.spark import spark_session
    from storeadapter.spark.jobs.stats import topic_statistics

    spark = spark_session(
        "tidemark-topic-stats",
        config={"spark.ui.showConsoleProgress": "true" if console_progress else "false"},
    )
    rows = topic_statistics(spark, str(store_dir), since, until, topics)
    if counted is not None:
        counted()
    with transaction.atomic():
        TopicMinuteStats.objects.bulk_create(
            [TopicMinuteStats(**row) for row in rows],
            batch_size=1000,
            update_conflicts=True,
            unique_fields=["topic", "minute_ms"],
            update_fields=UPDATED_FIELDS,
        )
    return {
        "rows": len(rows),
        "topics": len({row["topic"] for row in rows}),
        "messages": sum(row["messages"] for row in rows),
        "bytes": sum(row["bytes"] for row in rows),
    }
