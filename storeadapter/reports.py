"""The store's recovery and retention reports as log lines, for operators' log pipelines
(the console's LOGGING sends the ``storeadapter`` loggers to stderr)."""

from __future__ import annotations

import logging
from typing import Any

from storeadapter.engine import MessageStore

recovery_log = logging.getLogger("storeadapter.recovery")
retention_log = logging.getLogger("storeadapter.retention")


def log_recovery(store: MessageStore, opened_since_ms: int) -> None:
    """Log how this process's opening found the store, if it was the one that recovered it
    (the first process to open it); a crash's recovery is a warning, damage an error."""
    report = store.last_recovery
    if report.finished_ms < opened_since_ms:
        return  # another process recovered it; this one joined
    corruptions = len(report.corruptions)
    text = (
        f"store {store.path} opened after "
        f"{'a clean shutdown' if report.clean_shutdown else 'a crash'}: scanned "
        f"{report.scanned_bytes:,} bytes ({report.records:,} records) in "
        f"{report.duration_ms:.0f} ms, re-dispatched {report.redispatched:,}, truncated "
        f"{report.truncated_bytes:,} bytes, {corruptions} corrupt stretch(es), "
        f"{len(report.offsets_clamped)} committed offset(s) set back"
    )
    if corruptions or report.offsets_damage:
        recovery_log.error(text)
    elif not report.clean_shutdown or report.truncated_bytes:
        recovery_log.warning(text)
    else:
        recovery_log.info(text)


def log_retention(report: dict[str, Any], summary: str) -> None:
    """Log a retention run: a warning when it dropped messages a group had not consumed."""
    lost = any(
        count
        for queue in report.get("queues") or []
        for count in (queue.get("unconsumed_by_group") or {}).values()
    )
    (retention_log.warning if lost else retention_log.info)(summary)
