"""Append archived messages (from archive_segments) back into the store with Spark."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from storeadapter.spark.planning import parse_time


class Command(BaseCommand):
    help = (
        "Append the archived messages of a topic with since <= store_time < until back into "
        "the store (into the same topic, or --into), with their message ids as dedup ids so "
        "a replay run twice within the dedup window appends once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--archive", required=True, help="the archive directory")
        parser.add_argument("--topic", required=True, help="the archived topic to replay")
        parser.add_argument(
            "--since", help="first store time replayed: ms since the epoch or ISO 8601 (UTC)"
        )
        parser.add_argument(
            "--until", help="store time replayed up to, excluded: ms since the epoch or ISO 8601"
        )
        parser.add_argument("--into", help="append to this topic (default: --topic)")

    def handle(self, *args, archive, topic, since=None, until=None, into=None, **options):
        if not topic.strip():
            raise CommandError("--topic needs a topic name.")
        if into is not None and not into.strip():
            raise CommandError("--into needs a topic name.")
        try:
            since_ms = None if since is None else parse_time(since, "--since")
            until_ms = None if until is None else parse_time(until, "--until")
        except ValueError as error:
            raise CommandError(f"{error}.") from None
        if since_ms is not None and until_ms is not None and since_ms >= until_ms:
            raise CommandError("--since must be earlier than --until.")
        archive_dir = Path(archive)
        if not archive_dir.is_dir():
            raise CommandError(f"There is no archive at {archive_dir}.")
        store_dir = Path(settings.TIDEMARK_STORE_DIR)
        if not (store_dir / "commitlog").is_dir():
            raise CommandError(f"There is no store at {store_dir} (TIDEMARK_STORE_DIR).")
        target = (into or topic).strip()

        from storeadapter.spark import logview

        if target not in logview.load_topics(store_dir):
            raise CommandError(
                f"The store has no topic {target!r}: create it before replaying into it."
            )

        from storeadapter.spark import spark_session
        from storeadapter.spark.jobs.replay import replay

        sent = replay(
            spark_session("tidemark-replay"),
            archive_dir,
            topic.strip(),
            since_ms,
            until_ms,
            into_topic=target,
            store_path=store_dir,
        )
        self.stdout.write(f"replay_archive: {sent} archived messages of {topic} sent to {target}.")
