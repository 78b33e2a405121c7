"""The store's storage as the API answers it (``/api/v1/storage/``): one read model for
the figures of ``MessageStore.stats``, the disk use against its thresholds and the
segments."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from console.storage.visibility import visible_retention
from storeadapter.disk_use import DiskUse, disk_use
from storeadapter.engine import MessageStore
from storeadapter.summaries import SegmentRow, segment_rows


@dataclass(frozen=True)
class StorageReport:
    """Segments, disk use and thresholds, retention, last recovery; ``last_retention``
    shows only the queues and groups the user may view."""

    path: str
    store_id: str
    flush_mode: str
    segment_bytes: int
    segment_count: int
    disk_bytes: int
    retention_hours: float
    last_flush_ms: int | None
    commit_log: dict[str, int]
    last_recovery: dict[str, Any] | None
    last_retention: dict[str, Any] | None
    corruptions: list[dict[str, Any]]
    failed: str | None
    disk_ratio: float
    disk_thresholds: DiskUse
    segments: list[SegmentRow]


def storage_report(store: MessageStore, user: Any) -> StorageReport:
    """The store's storage now, as ``user`` may see it."""
    stats = store.stats(topics=False)
    disk = disk_use(store)
    return StorageReport(
        path=stats.path,
        store_id=stats.store_id,
        flush_mode=stats.flush_mode,
        segment_bytes=stats.segment_bytes,
        segment_count=stats.segment_count,
        disk_bytes=stats.disk_bytes,
        retention_hours=stats.retention_hours,
        last_flush_ms=stats.last_flush_ms,
        # The API's shapes: plain dicts, as stat --json prints them.
        commit_log=asdict(stats.commit_log),
        last_recovery=stats.last_recovery.as_dict(),
        last_retention=visible_retention(user, stats.last_retention),
        corruptions=[c._asdict() for c in stats.corruptions],
        failed=stats.failed,
        disk_ratio=round(disk.ratio, 4),
        disk_thresholds=disk,
        segments=segment_rows(store, stats),
    )
