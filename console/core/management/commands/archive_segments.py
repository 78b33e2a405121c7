"""Archive the store's commit-log segments to Parquet with Spark."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Write the messages of the store's sealed segments not archived yet to Parquet under "
        "--out, partitioned by topic and store date (Spark: local[*], or SPARK_MASTER); "
        "--segment archives one segment again, replacing its files."
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

    def handle(self, *args, out, segment=None, include_open=False, **options):
        if not str(out).strip():
            raise CommandError("--out needs the archive directory.")
        base = None
        if segment is not None:
            try:
                base = int(str(segment).strip())
            except ValueError:
                raise CommandError(
                    f"--segment must be a segment's base offset (its file name), not {segment!r}."
                ) from None
            if base < 0:
                raise CommandError("--segment must not be negative.")
        store_dir = Path(settings.TIDEMARK_STORE_DIR)
        if not (store_dir / "commitlog").is_dir():
            raise CommandError(f"There is no store at {store_dir} (TIDEMARK_STORE_DIR).")
        out_dir = Path(out)
        if out_dir.exists() and not out_dir.is_dir():
            raise CommandError(f"--out {out_dir} is a file, not a directory.")

        from storeadapter.spark import spark_session
        from storeadapter.spark.jobs.archive import archive_segment, archive_store

        spark = spark_session("tidemark-archive")
        if base is not None:
            try:
                summaries = [archive_segment(spark, store_dir, base, out_dir)]
            except ValueError as error:
                raise CommandError(f"{error}.") from None
        else:
            summaries = archive_store(spark, store_dir, out_dir, sealed_only=not include_open)[
                "segments"
            ]
        messages = sum(s["messages"] for s in summaries)
        size = sum(s["bytes"] for s in summaries)
        self.stdout.write(
            f"archive_segments: {len(summaries)} segments archived to {out_dir} "
            f"({messages} messages, {size} bytes)."
        )
