"""Run the Spark topic statistics job over the console's store and keep its rows."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from console.monitoring.models import TopicMinuteStats
from storeadapter.spark.planning import parse_time

UPDATED_FIELDS = ["messages", "bytes", "distinct_keys", "size_histogram"]


class Command(BaseCommand):
    help = (
        "Count messages, bytes, distinct keys and a body-size histogram per topic per minute "
        "of store time with Spark (local[*], or SPARK_MASTER), and write them to "
        "TopicMinuteStats, replacing the rows of minutes counted before."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--since", help="first store time counted: ms since the epoch or ISO 8601 (UTC)"
        )
        parser.add_argument(
            "--until", help="store time counted up to, excluded: ms since the epoch or ISO 8601"
        )
        parser.add_argument(
            "--topic",
            action="append",
            dest="topics",
            metavar="TOPIC",
            help="count only this topic (repeat for several; default every topic)",
        )

    def handle(self, *args, since=None, until=None, topics=None, **options):
        try:
            since_ms = None if since is None else parse_time(since, "--since")
            until_ms = None if until is None else parse_time(until, "--until")
        except ValueError as error:
            raise CommandError(f"{error}.") from None
        if since_ms is not None and until_ms is not None and since_ms >= until_ms:
            raise CommandError("--since must be earlier than --until.")
        if topics is not None and not [t for t in topics if t.strip()]:
            raise CommandError("--topic needs a topic name.")
        store_dir = Path(settings.TIDEMARK_STORE_DIR)
        if not (store_dir / "commitlog").is_dir():
            raise CommandError(f"There is no store at {store_dir} (TIDEMARK_STORE_DIR).")

        from storeadapter.spark import spark_session
        from storeadapter.spark.jobs.stats import topic_statistics

        spark = spark_session(
            "tidemark-topic-stats", config={"spark.ui.showConsoleProgress": "true"}
        )
        rows = topic_statistics(spark, str(store_dir), since_ms, until_ms, topics)
        with transaction.atomic():
            TopicMinuteStats.objects.bulk_create(
                [TopicMinuteStats(**row) for row in rows],
                batch_size=1000,
                update_conflicts=True,
                unique_fields=["topic", "minute_ms"],
                update_fields=UPDATED_FIELDS,
            )
        self.stdout.write(
            f"topic_stats: {len(rows)} topic-minute rows written for "
            f"{len({row['topic'] for row in rows})} topics "
            f"({sum(row['messages'] for row in rows)} messages, "
            f"{sum(row['bytes'] for row in rows)} bytes)."
        )
