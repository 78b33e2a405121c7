"""Walking the commit log record by record, explicit about bad bytes.

A scan yields what it finds at each position. Bad bytes are never silently
skipped: the scanner reports them and looks for the next intact record (a record
names its own commit-log offset and carries a CRC32C, so a false match is not a
practical worry). What to do with the report, skip it or truncate there, is the
caller's choice: recovery truncates a garbage tail, readers and ``verify`` skip.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import lru_cache
from operator import eq, itemgetter
from typing import NamedTuple

from crc32c import crc32c

from .errors import CorruptRecordError
from .record import (
    END_OF_SEGMENT_MAGIC,
    END_OF_SEGMENT_MAGIC_BYTES,
    FIELD_AT,
    HEADER_SIZE,
    HEADER_UNPACK,
    LENGTH,
    MAGIC,
    MAGIC_AT,
    MARKER,
    MARKER_SIZE,
    RECORD_MAGIC,
    RECORD_MAGIC_BYTES,
    RECORD_OVERHEAD,
    TAG_LEN,
    TOPIC_LEN,
    TRAILER_SIZE,
    TRAILER_UNPACK,
    TRAILING_LENGTH_SIZE,
    check_record,
    field_bytes,
    fields_format,
    length_from_fields,
)
from .segment import Segment

#: How far a reader that starts inside the log (Spark's byte-range cuts) looks back for
#: the record it starts in: longer than any record a store takes.
RESYNC_WINDOW = 16 << 20
# At most this many bytes of records start in one RUN event (bounds the header list).
RUN_BYTES = 4 << 20

RECORD = "record"
RUN = "run"
UNIFORM_RUN = "uniform_run"
CORRUPT = "corrupt"
END_OF_SEGMENT = "end_of_segment"
TAIL = "tail"
GARBAGE_TAIL = "garbage_tail"


class ScanEvent(NamedTuple):
    """``kind`` is one of record, run, uniform_run, corrupt, end_of_segment, tail,
    garbage_tail.

    A RECORD's ``header`` is its header tuple; a RUN's is the list of the header tuples
    of consecutive intact records (each names its own commit-log offset); a
    UNIFORM_RUN's is a ``UniformRun``.
    """

    kind: str
    offset: int
    length: int
    reason: str = ""
    header: tuple | list | UniformRun | None = None


class UniformRun(NamedTuple):
    """Consecutive intact records of one length that share every header field but their
    offsets, times and queue id, and the same topic and tag (a batch's records)."""

    header: tuple  # the first record's header
    count: int
    # per record: commit-log offset, queue offset, store ms, queue id (``RUN_*`` items)
    fields: list[tuple[int, int, int, int]]


def scan_segment(
    segment: Segment,
    start: int,
    sealed: bool,
    durable_end: int = 0,
    runs: bool = False,
) -> Iterator[ScanEvent]:
    """Yield the records and bad stretches of ``segment`` from in-segment ``start``.

    A sealed segment (one followed by another) must end in an end-of-segment marker:
    bad bytes inside it are corruption, and the next intact record is looked for up to
    its end. In the last segment ``durable_end`` (the commit-log offset up to which
    fsyncs are known to have made the log durable) divides damage from the torn end:
    below it, bad bytes or zeros are corruption, reported, and the next intact record is
    looked for only up to ``durable_end`` (from which the scan goes on); at or past it,
    the first bad bytes end the log: zeros are the TAIL, anything else a GARBAGE_TAIL.
    Nothing past the durable end is resynced onto: records there are trusted only when
    they follow on from it without a gap. A scan ends with END_OF_SEGMENT, TAIL or
    GARBAGE_TAIL (nothing intact from there on).

    With ``runs``, consecutive intact records come as RUN events instead of one RECORD
    event each.
    """
    view = segment.view
    size = segment.size
    base = segment.base
    durable = max(0, min(size, durable_end - base))
    pos = start
    while pos + MARKER_SIZE <= size:
        if runs:
            uniform = uniform_run(segment, pos, pos + RUN_BYTES)
            if uniform is not None:
                length = uniform.count * uniform.header[LENGTH]
                yield ScanEvent(UNIFORM_RUN, base + pos, length, "", uniform)
                pos += length
                continue
            headers, end = intact_run(view, pos, size, base + pos, pos + _GENERIC_RUN_BYTES)
            if headers:
                yield ScanEvent(RUN, base + pos, end - pos, "", headers)
                pos = end
                continue
        length, magic = MARKER.unpack_from(view, pos)
        if magic == RECORD_MAGIC:
            try:
                header = check_record(view, pos, size, base + pos)
            except CorruptRecordError as error:
                reason = error.reason
            else:
                length = header[LENGTH]
                yield ScanEvent(RECORD, base + pos, length, "", header)
                pos += length
                continue
        elif magic == END_OF_SEGMENT_MAGIC and length == size - pos:
            yield ScanEvent(END_OF_SEGMENT, base + pos, length)
            return
        elif length == 0 and magic == 0:
            if not sealed and pos >= durable:
                yield ScanEvent(TAIL, base + pos, 0)
                return
            reason = "zeroed bytes where a record should start"
        else:
            reason = f"no record starts here (magic 0x{magic:08x})"
        if not sealed and pos >= durable:
            yield ScanEvent(GARBAGE_TAIL, base + pos, size - pos, reason)
            return
        limit = size if sealed else durable
        resume = find_next_record(segment, pos + 1, limit)
        if resume is None:
            if sealed:
                yield ScanEvent(GARBAGE_TAIL, base + pos, size - pos, reason)
                return
            resume = durable  # damage up to the durable end; the scan goes on from there
        yield ScanEvent(CORRUPT, base + pos, resume - pos, reason)
        pos = resume
    yield ScanEvent(TAIL, base + pos, 0)


def intact_run(
    view: memoryview, pos: int, size: int, offset: int, stop: int
) -> tuple[list[tuple], int]:
    """The headers of the intact records from ``pos`` on, and where they end.

    ``offset`` is the commit-log offset of ``pos``. The walk stops at the first record
    ``check_record`` would refuse (or at the first position that is no record), at
    ``size``, or at the first record starting at or past ``stop``. This is recovery's hot
    loop: it makes ``check_record``'s checks inline.
    """
    headers: list[tuple] = []
    append = headers.append
    previous = same = 0
    stop = min(stop, size - HEADER_SIZE + 1)
    while pos < stop:
        header = HEADER_UNPACK(view, pos)
        length, magic, at, _, _, _, _, body, _, topic, tag, keys, props = header
        end = pos + length
        if (
            magic != RECORD_MAGIC
            or at != offset
            or end > size
            or length != RECORD_OVERHEAD + body + topic + tag + keys + props
        ):
            break
        crc, trailing = TRAILER_UNPACK(view, end - TRAILER_SIZE)
        if trailing != length or crc32c(view[pos : end - TRAILER_SIZE]) != crc:
            break
        if length == previous:
            same += 1
            if same == _MIN_UNIFORM // 2 and len(headers) > same:
                # a batch of alike records may start here: leave it to uniform_run
                del headers[-same:]
                return headers, pos - same * length
        else:
            previous = length
            same = 0
        append(header)
        offset += length
        pos = end
    return headers, pos


def uniform_run(segment: Segment, pos: int, stop: int) -> UniformRun | None:
    """The run of intact records like the one at ``pos`` (see ``UniformRun``), when
    there are at least ``_MIN_UNIFORM`` of them and none starts at or past ``stop``.

    Every record is checked as ``check_record`` does, with C-level passes over the run
    instead of Python code per record: each byte the records share (length, magic, field
    lengths, topic, tag, trailing length) is compared across the run in one strided
    slice, a CRC over each record's bytes and its stored CRC must give the CRC32C
    residue, and the offsets are compared with the expected sequence.
    """
    view = segment.view
    size = segment.size
    if pos + HEADER_SIZE > size:
        return None
    first = HEADER_UNPACK(view, pos)
    length, magic = first[LENGTH], first[MAGIC]
    fixed = first[TOPIC_LEN] + first[TAG_LEN]
    if (
        magic != RECORD_MAGIC
        or length != length_from_fields(first)
        or pos + length * _MIN_UNIFORM > size
    ):
        return None
    most = (min(stop, size) - pos) // length
    if most < _MIN_UNIFORM:
        return None
    data = segment.map
    shared = _shared_bytes(length, fixed)
    # A few records first: where alike runs are short, a long look would be wasted.
    for window in (min(most, 2 * _MIN_UNIFORM), most):
        count = window
        end = pos + count * length
        for at in shared:
            column = data[pos + at : end : length]
            byte = data[pos + at]
            if column.count(byte) != count:
                count -= len(column.lstrip(bytes((byte,))))
                if count < _MIN_UNIFORM:
                    return None
                end = pos + count * length
        if count < window:
            break
    if length <= _COPY_UP_TO:  # copies of small records cost less than views of them
        # each record but its trailing length: the CRC residue check's input
        pieces = map(
            _FIRST,
            struct.iter_unpack(
                f"<{length - TRAILING_LENGTH_SIZE}s{TRAILING_LENGTH_SIZE}x", view[pos:end]
            ),
        )
    else:
        starts = range(pos, end, length)
        stops = range(pos + length - TRAILING_LENGTH_SIZE, end, length)
        pieces = map(view.__getitem__, map(slice, starts, stops))
    crcs = list(map(crc32c, pieces))
    if crcs.count(_RESIDUE) != count:
        count = next(i for i, crc in enumerate(crcs) if crc != _RESIDUE)
        end = pos + count * length
    fields = list(struct.iter_unpack(_fields_format(length), view[pos:end]))
    offset = segment.base + pos
    if not all(map(eq, map(_FIRST, fields), range(offset, offset + count * length, length))):
        count = next(i for i, item in enumerate(fields) if item[0] != offset + i * length)
        del fields[count:]
    if count < _MIN_UNIFORM:
        return None
    return UniformRun(first, count, fields)


_MIN_UNIFORM = 16
_COPY_UP_TO = 256
_GENERIC_RUN_BYTES = 64 << 10
_RESIDUE = crc32c(b"\0" + crc32c(b"\0").to_bytes(4, "little"))
_FIRST = itemgetter(0)


@lru_cache(maxsize=256)
def _shared_bytes(length: int, fixed: int) -> tuple[int, ...]:
    """Where alike records hold the same bytes: length, magic, field lengths, topic, tag,
    trailing length (everything but offsets, times, queue id, flags, CRC and contents)."""
    return (
        *field_bytes("length"),
        *field_bytes("magic"),
        *field_bytes("body_len"),
        *range(FIELD_AT["topic_len"], HEADER_SIZE + fixed),
        *range(length - TRAILING_LENGTH_SIZE, length),
    )


# What a uniform run keeps of each record (``UniformRun.fields``), and their items.
_RUN_FIELDS = ("commit_offset", "queue_offset", "store_ms", "queue_id")
RUN_COMMIT_OFFSET, RUN_QUEUE_OFFSET, RUN_STORE_MS, RUN_QUEUE_ID = range(len(_RUN_FIELDS))


@lru_cache(maxsize=256)
def _fields_format(length: int) -> str:
    return fields_format(_RUN_FIELDS, length)


def find_next_record(segment: Segment, start: int, limit: int) -> int | None:
    """In-segment position of the first intact record or end marker in [start, limit)."""
    data = segment.map
    view = segment.view
    size = segment.size
    search = start + MAGIC_AT
    while True:
        hit = data.find(RECORD_MAGIC_BYTES, search, limit + MAGIC_AT)
        if hit < 0:
            break
        candidate = hit - MAGIC_AT
        try:
            check_record(view, candidate, size, segment.base + candidate)
            return candidate
        except CorruptRecordError:
            search = hit + 1
    search = start + MAGIC_AT
    while True:
        hit = data.find(END_OF_SEGMENT_MAGIC_BYTES, search, limit + MAGIC_AT)
        if hit < 0:
            return None
        candidate = hit - MAGIC_AT
        if MARKER.unpack_from(view, candidate)[0] == size - candidate:
            return candidate
        search = hit + 1
