"""Append archived messages (from archive_segments) back into the store with Spark."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from console.background.archiving import ArchiveError, run_replay
from storeadapter.spark.planning import parse_time


class Command(BaseCommand):
    help = (
        "Append the archived messages of a topic with since <= store_time < until back into "
        "the store (into the same topic, or --into), with their message ids as dedup ids so "
        "a replay run twice within the dedup window appends once; --background sends the "
        "job to a Celery worker instead (it shows on /tasks/)."
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
        parser.add_argument("--background", action="store_true", help="run it on a Celery worker")

    def handle(
        self, *args, archive, topic, since=None, until=None, into=None, background=False, **opts
    ):
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
        if background:
            from console.background.tasks import REPLAY_TASK, replay_archive

            sent = replay_archive.delay(topic, since_ms, until_ms, into, str(archive))
            self.stdout.write(
                f"replay_archive: sent to a Celery worker as task {sent.id}; "
                f"/tasks/ shows {REPLAY_TASK}."
            )
            return
        try:
            result = run_replay(archive, topic, since_ms, until_ms, into, console_progress=True)
        except ArchiveError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"replay_archive: {result['sent']} archived messages of {result['topic']} sent to "
            f"{result['into']}."
        )
