"""Reading one planned range of a segment: intact messages and reported bad stretches.

This is the engine's ``scan_segment`` walk (docs/FORMAT.md, "What a reader does with
bad bytes") with one change: each record's header is looked at first (its frame, the
offset it names, its topic, queue and store time), and only a record the read wants
is CRC-checked and decoded, with the engine's ``decode_record``. Bad bytes are
searched past with the engine's ``find_next_record`` and reported as a
``Corruption``; the read goes on after them. Never fatal, never silent.

Two differences from ``scan_segment`` follow from reading up to a snapshot's end
rather than to whatever the segment holds. Zeros where a record should start below
the end are damage (the end was published, so a record was there), not the tail.
And a bad stretch is reported only up to the range's ``stop``: whatever starts at or
past it is the next range's to read and report, so every stretch is reported once.

A record the header filter rejects is skipped by its length without a CRC check, so
damage inside a record of another topic or outside the time window is not noticed
(its frame still is); an unfiltered read, like the engine's ``verify``, checks every
record.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

from storeadapter.engine.errors import CorruptRecordError
from storeadapter.engine.record import (
    END_OF_SEGMENT_MAGIC,
    HEADER_SIZE,
    HEADER_UNPACK,
    MARKER,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    TRAILER_UNPACK,
    check_record,
    decode_record,
)
from storeadapter.engine.results import Corruption, StoredMessage
from storeadapter.engine.scan import find_next_record

from .logview import ReadOnlySegment
from .planning import LogRange, RecordFilter


@dataclass
class ScanCounters:
    """What this process's scans did; ``reset()`` between measurements.

    ``decoded``: records CRC-checked and decoded (wanted by the filter); ``skipped``:
    records passed over on their header alone; ``corrupt``/``corrupt_bytes``: bad
    stretches reported; ``ranges``: ranges read; ``missing_segments``: ranges whose
    segment retention deleted before they were read.
    """

    decoded: int = 0
    skipped: int = 0
    corrupt: int = 0
    corrupt_bytes: int = 0
    ranges: int = 0
    missing_segments: int = 0

    def reset(self) -> None:
        for item in fields(self):
            setattr(self, item.name, 0)

    def as_dict(self) -> dict[str, int]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


#: The counters of every scan in this process (a Spark executor's Python worker, or a
#: test calling the reader directly).
counters = ScanCounters()


def read_range(
    log_range: LogRange, wanted: RecordFilter, id_prefix: str
) -> Iterator[StoredMessage | Corruption]:
    """The wanted messages and every bad stretch of ``log_range``, in log order."""
    counters.ranges += 1
    path = os.path.join(log_range.store, "commitlog", log_range.segment)
    try:
        segment = ReadOnlySegment(Path(path), log_range.size)
    except FileNotFoundError:
        counters.missing_segments += 1
        return
    try:
        yield from scan_range(segment, log_range, wanted, id_prefix)
    finally:
        segment.close()


def scan_range(
    segment: ReadOnlySegment, log_range: LogRange, wanted: RecordFilter, id_prefix: str
) -> Iterator[StoredMessage | Corruption]:
    view = segment.view
    size = segment.size
    base = segment.base
    stop = log_range.stop
    limit = log_range.limit
    topics = wanted.topics
    since_ms = wanted.since_ms
    until_ms = wanted.until_ms
    pos = log_range.start
    while pos < stop and pos + 8 <= size:
        length, magic = MARKER.unpack_from(view, pos)
        if magic == RECORD_MAGIC:
            offset = base + pos
            if pos + HEADER_SIZE <= size:
                header = HEADER_UNPACK(view, pos)
                end = pos + length
                if (
                    header[2] == offset
                    and length == RECORD_OVERHEAD + header[7] + sum(header[9:13])
                    and end <= size
                    and TRAILER_UNPACK(view, end - 8)[1] == length
                ):
                    start = pos + HEADER_SIZE
                    target = topics.get(bytes(view[start : start + header[9]]))
                    queue_id = header[6]
                    store_ms = header[5]
                    if (
                        target is None
                        or queue_id >= target[0]
                        or offset < target[1][queue_id]
                        or (since_ms is not None and store_ms < since_ms)
                        or (until_ms is not None and store_ms >= until_ms)
                    ):
                        counters.skipped += 1
                        pos = end
                        continue
                    try:
                        message = decode_record(view, pos, size, offset, id_prefix)
                    except CorruptRecordError as error:
                        reason = error.reason
                    else:
                        counters.decoded += 1
                        yield message
                        pos = end
                        continue
                else:
                    reason = _reason(view, pos, size, offset)
            else:
                reason = "header runs past the end of the segment"
        elif magic == END_OF_SEGMENT_MAGIC and length == size - pos:
            return  # the segment ends here
        elif length == 0 and magic == 0:
            reason = "zeroed bytes where a record should start"
        else:
            reason = f"no record starts here (magic 0x{magic:08x})"
        resume = find_next_record(segment, pos + 1, limit)
        reach = limit if resume is None else resume
        stretch_end = min(reach, stop)
        counters.corrupt += 1
        counters.corrupt_bytes += stretch_end - pos
        yield Corruption(base + pos, stretch_end - pos, reason)
        if resume is None:
            return
        pos = resume


def _reason(view, pos: int, size: int, offset: int) -> str:
    try:
        check_record(view, pos, size, offset)
    except CorruptRecordError as error:
        return error.reason
    return "record frame does not hold together"  # pragma: no cover - check_record agrees


__all__ = ["ScanCounters", "counters", "read_range", "scan_range"]
