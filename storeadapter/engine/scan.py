"""Walking the commit log record by record, explicit about bad bytes.

A scan yields what it finds at each position. Bad bytes are never silently
skipped: the scanner reports them and looks for the next intact record (a record
names its own commit-log offset and carries a CRC32C, so a false match is not a
practical worry). What to do with the report, skip it or truncate there, is the
caller's choice: recovery truncates a garbage tail, readers and ``verify`` skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from .errors import CorruptRecordError
from .record import (
    END_OF_SEGMENT_MAGIC,
    END_OF_SEGMENT_MAGIC_BYTES,
    MARKER,
    MARKER_SIZE,
    RECORD_MAGIC,
    RECORD_MAGIC_BYTES,
    check_record,
)
from .segment import Segment

RESYNC_WINDOW = 16 << 20

RECORD = "record"
CORRUPT = "corrupt"
END_OF_SEGMENT = "end_of_segment"
TAIL = "tail"
GARBAGE_TAIL = "garbage_tail"


class ScanEvent(NamedTuple):
    """``kind`` is one of record, corrupt, end_of_segment, tail, garbage_tail."""

    kind: str
    offset: int
    length: int
    reason: str = ""
    header: tuple | None = None


def scan_segment(
    segment: Segment,
    start: int,
    sealed: bool,
    durable_end: int = 0,
    resync_window: int = RESYNC_WINDOW,
) -> Iterator[ScanEvent]:
    """Yield the records and bad stretches of ``segment`` from in-segment ``start``.

    A sealed segment (one followed by another) must end in an end-of-segment marker:
    zeros inside it are corruption. In the last segment, zeros are the tail, unless
    they lie below ``durable_end`` (a commit-log offset known to have been fsynced),
    where they are corruption. After bad bytes in the last segment, the next intact
    record is looked for within ``resync_window`` bytes (or up to ``durable_end``).
    A scan ends with END_OF_SEGMENT, TAIL or GARBAGE_TAIL (nothing intact from there on).
    """
    view = segment.view
    size = segment.size
    base = segment.base
    pos = start
    while pos + MARKER_SIZE <= size:
        length, magic = MARKER.unpack_from(view, pos)
        if magic == RECORD_MAGIC:
            try:
                header = check_record(view, pos, size, base + pos)
            except CorruptRecordError as error:
                reason = error.reason
            else:
                length = header[0]
                yield ScanEvent(RECORD, base + pos, length, "", header)
                pos += length
                continue
        elif magic == END_OF_SEGMENT_MAGIC and length == size - pos:
            yield ScanEvent(END_OF_SEGMENT, base + pos, length)
            return
        elif length == 0 and magic == 0:
            if not sealed and base + pos >= durable_end:
                yield ScanEvent(TAIL, base + pos, 0)
                return
            reason = "zeroed bytes where a record should start"
        else:
            reason = f"no record starts here (magic 0x{magic:08x})"
        limit = size if sealed else min(size, max(durable_end - base, pos) + resync_window)
        resume = find_next_record(segment, pos + 1, limit)
        if resume is None:
            if length == 0 and magic == 0 and not sealed:
                lost_end = min(size, durable_end - base)
                if lost_end > pos:  # durable bytes were zeroed: damage, reported
                    yield ScanEvent(CORRUPT, base + pos, lost_end - pos, reason)
                    pos = lost_end
                yield ScanEvent(TAIL, base + pos, 0)
            else:
                yield ScanEvent(GARBAGE_TAIL, base + pos, size - pos, reason)
            return
        yield ScanEvent(CORRUPT, base + pos, resume - pos, reason)
        pos = resume
    yield ScanEvent(TAIL, base + pos, 0)


def find_next_record(segment: Segment, start: int, limit: int) -> int | None:
    """In-segment position of the first intact record or end marker in [start, limit)."""
    data = segment.map
    view = segment.view
    size = segment.size
    search = start + 4
    while True:
        hit = data.find(RECORD_MAGIC_BYTES, search, limit + 4)
        if hit < 0:
            break
        candidate = hit - 4
        try:
            check_record(view, candidate, size, segment.base + candidate)
            return candidate
        except CorruptRecordError:
            search = hit + 1
    search = start + 4
    while True:
        hit = data.find(END_OF_SEGMENT_MAGIC_BYTES, search, limit + 4)
        if hit < 0:
            return None
        candidate = hit - 4
        if MARKER.unpack_from(view, candidate)[0] == size - candidate:
            return candidate
        search = hit + 1
