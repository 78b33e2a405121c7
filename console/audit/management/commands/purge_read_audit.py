"""``manage.py purge_read_audit [--all]``: delete audited reads past their bounds, or all."""

from django.core.management.base import BaseCommand

from console.audit.reads import purge


class Command(BaseCommand):
    help = (
        "Delete the audit log's read rows (read.*, write.*) older than "
        "TIDEMARK_AUDIT_READS_KEEP_DAYS or past TIDEMARK_AUDIT_READS_MAX_ROWS; with --all, "
        "every one of them. Other audit rows are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="delete every read row")

    def handle(self, *args, **options):
        deleted = purge(everything=options["all"])
        self.stdout.write(f"deleted {deleted} read row(s) of the audit log")
