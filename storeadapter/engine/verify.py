"""``verify``: check every record of a store's commit log, reporting each bad stretch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .commitlog import CommitLog
from .results import Corruption
from .scan import CORRUPT, GARBAGE_TAIL, RECORD, TAIL, scan_segment

ProgressCallback = Callable[[int, int], None]


@dataclass
class VerifyReport:
    segments: int = 0
    records: int = 0
    record_bytes: int = 0
    tail: int = 0
    corruptions: list[Corruption] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.corruptions


def verify_commitlog(
    directory: Path,
    segment_bytes: int,
    durable_end: int = 0,
    progress: ProgressCallback | None = None,
) -> VerifyReport:
    """Scan every segment under ``directory``; never modifies a file.

    ``durable_end`` (the checkpoint's flushed offset) tells zeros that are damage
    from zeros that are the unwritten end of the log.

    ``progress(done_bytes, total_bytes)`` is called after each segment and every
    64 MiB within one.
    """
    log = CommitLog(directory, segment_bytes)
    log.open(repair=False)
    report = VerifyReport(segments=len(log.segments))
    total = sum(s.size for s in log.segments)
    done = 0
    step = 64 << 20
    try:
        for position, segment in enumerate(log.segments):
            last = position == len(log.segments) - 1
            next_report = segment.base + step
            for event in scan_segment(segment, 0, not last, durable_end):
                if event.kind == RECORD:
                    report.records += 1
                    report.record_bytes += event.length
                    if progress is not None and event.offset >= next_report:
                        progress(done + event.offset - segment.base, total)
                        next_report = event.offset + step
                elif event.kind in (CORRUPT, GARBAGE_TAIL):
                    report.corruptions.append(Corruption(event.offset, event.length, event.reason))
                elif event.kind == TAIL:
                    report.tail = event.offset
            if not last:
                report.tail = segment.end
            done += segment.size
            if progress is not None:
                progress(done, total)
    finally:
        log.close()
    return report
