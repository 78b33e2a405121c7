"""Run the Spark topic statistics job over the console's store and keep its rows."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from console.monitoring.topicstats import NoStore, run_topic_statistics
from storeadapter.spark.planning import parse_time


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
        try:
            summary = run_topic_statistics(since_ms, until_ms, topics, console_progress=True)
        except NoStore as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"topic_stats: {summary['rows']} topic-minute rows written for "
            f"{summary['topics']} topics "
            f"({summary['messages']} messages, {summary['bytes']} bytes)."
        )
