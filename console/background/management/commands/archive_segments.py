"""Archive the store's commit-log segments to Parquet with Spark."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from console.background.archiving import ArchiveError, run_archive


class Command(BaseCommand):
    help = (
        "Write the messages of the store's sealed segments not archived yet to Parquet under "
        "--out, partitioned by topic and store date (Spark: local[*], or SPARK_MASTER); "
        "--segment archives one segment again, replacing its files; --background sends the "
        "job to a Celery worker instead (its progress shows on /tasks/)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True, help="the archive directory")
        parser.add_argument(
            "--segment", help="archive only this segment (its base offset or file name)"
        )
        parser.add_argument(
            "--include-open",
            action="store_true",
            help="archive the open (last) segment too; it is archived again on the next run",
        )
        parser.add_argument("--background", action="store_true", help="run it on a Celery worker")

    def handle(self, *args, out, segment=None, include_open=False, background=False, **options):
        if not str(out).strip():
            raise CommandError("--out needs the archive directory.")
        base = None if segment is None else segment_base(segment)
        if background:
            from console.background.tasks import ARCHIVE_TASK, archive_segments

            sent = archive_segments.delay(str(out), base, include_open)
            self.stdout.write(
                f"archive_segments: sent to a Celery worker as task {sent.id}; "
                f"/tasks/ shows {ARCHIVE_TASK} and its progress."
            )
            return
        try:
            summary = run_archive(out, base, include_open, console_progress=True)
        except ArchiveError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"archive_segments: {len(summary['segments'])} segments archived to {out} "
            f"({summary['messages']} messages, {summary['bytes']} bytes)."
        )


def segment_base(segment: str) -> int:
    try:
        base = int(str(segment).strip())
    except ValueError:
        raise CommandError(
            f"--segment must be a segment's base offset (its file name), not {segment!r}."
        ) from None
    if base < 0:
        raise CommandError("--segment must not be negative.")
    return base
