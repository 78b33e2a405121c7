"""Reading one planned range of a segment: exactly the records the plan expects, intact
messages and reported bad stretches, or an error that says why not.

This is the engine's ``scan_segment`` walk (docs/RECOVERY.md, "What a reader does with
bad bytes (commit log)") with one change: each record's header is looked at first (its frame, the
offset it names, its topic, queue, queue offset and store time), and only a record the
read wants is CRC-checked and decoded, with the engine's ``decode_record``. Bad bytes are
searched past with the engine's ``find_next_record`` and reported as a ``Corruption``;
the read goes on after them. Damage is never fatal, never silent.

**Where a range starts.** Ranges are cut at byte positions (``planning.py``). A range
that does not start a segment resyncs: it reads from the first intact record at or
after its start. The bytes it passes over belong to the record that straddles its start
(checked through that record's trailing length), or to a bad stretch; a stretch is
reported by the range it starts in, whole, so every stretch is reported once whatever
the cuts.

**Exact or loud.** A range carries what the plan expects: the segment's file, at least
``limit`` bytes of it, and ``expected`` member records. ``read_range`` raises a
``SegmentNotVisibleError`` naming the path and this host when it cannot open the file,
and a ``PlanMismatchError`` when the file is shorter than planned, belongs to another
store, or held another number of member records than planned (fewer are allowed only
where damage was reported, since a bad stretch can swallow records). It never passes a
missing file off as one retention deleted: the plan saw the file. Only a stream with
``failOnDataLoss`` false skips a file, and only when the store, as this host sees it,
says retention deleted it.

A record the filters reject is skipped by its length without a CRC check, so damage
inside a record of another topic or outside the window is not noticed (its frame still
is); an unfiltered read, like the engine's ``verify``, checks every record.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

from storeadapter.engine import filters
from storeadapter.engine.dataplane import read_members
from storeadapter.engine.errors import CorruptRecordError, StoreFormatError
from storeadapter.engine.record import (
    COMMIT_OFFSET,
    END_OF_SEGMENT_MAGIC,
    HEADER_SIZE,
    HEADER_UNPACK,
    MAGIC_AT,
    MARKER,
    MARKER_SIZE,
    QUEUE_ID,
    QUEUE_OFFSET,
    RECORD_MAGIC,
    RECORD_MAGIC_BYTES,
    RECORD_OVERHEAD,
    STORE_MS,
    TOPIC_LEN,
    check_record,
    decode_record,
    length_from_fields,
    trailing_length,
)
from storeadapter.engine.results import Corruption, StoredMessage
from storeadapter.engine.scan import RESYNC_WINDOW, find_next_record

from .errors import PlanMismatchError, SegmentNotVisibleError
from .logview import ReadOnlySegment, read_identity, read_shared_state
from .planning import LogRange, RecordFilter

log = logging.getLogger(__name__)


@dataclass
class ScanCounters:
    """What this process's scans did; ``reset()`` between measurements.

    ``decoded``: records CRC-checked and decoded (wanted by the filter); ``skipped``:
    records passed over on their header alone; ``corrupt``/``corrupt_bytes``: bad
    stretches reported; ``ranges``: ranges read; ``missing_segments``: ranges a stream
    with ``failOnDataLoss`` false skipped because retention deleted their segment, and
    ``lost_records`` the member records the plan expected in them.
    """

    decoded: int = 0
    skipped: int = 0
    corrupt: int = 0
    corrupt_bytes: int = 0
    ranges: int = 0
    missing_segments: int = 0
    lost_records: int = 0

    def reset(self) -> None:
        for item in fields(self):
            setattr(self, item.name, 0)

    def as_dict(self) -> dict[str, int]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


#: The counters of every scan in this process (a Spark executor's Python worker, or a
#: test calling the reader directly).
counters = ScanCounters()


@dataclass
class Tally:
    """What one range's walk met: member records, and whether damage touched it."""

    members: int = 0
    damaged: bool = False


def host() -> str:
    return socket.gethostname()


def read_range(
    log_range: LogRange,
    wanted: RecordFilter,
    id_prefix: str,
    skip_lost: bool = False,
) -> Iterator[StoredMessage | Corruption]:
    """The wanted messages and every bad stretch of ``log_range``, in log order; raises
    when the range cannot be read as planned (see the module docstring)."""
    counters.ranges += 1
    path = Path(log_range.store) / "commitlog" / log_range.segment
    segment = _open(path, log_range, id_prefix, skip_lost)
    if segment is None:
        return
    tally = Tally()
    try:
        yield from scan_range(segment, log_range, wanted, id_prefix, tally)
    finally:
        segment.close()
    _check_count(path, log_range, tally)


def _open(
    path: Path, log_range: LogRange, id_prefix: str, skip_lost: bool
) -> ReadOnlySegment | None:
    where = (
        f"bytes {log_range.start}-{log_range.stop} of commit-log segment {path} on host {host()}"
    )
    expected = "" if log_range.expected is None else f" ({log_range.expected} records)"
    try:
        segment = ReadOnlySegment(path)
    except FileNotFoundError:
        if skip_lost and _retention_passed(log_range):
            counters.missing_segments += 1
            counters.lost_records += log_range.expected or 0
            log.warning(
                "failOnDataLoss is false: skipped %s, which retention deleted%s",
                where,
                expected,
            )
            return None
        raise SegmentNotVisibleError(
            f"cannot read {where}: the file does not exist there, but the read was planned "
            f"with it{expected}; every executor must see the store at the same path "
            "(docs/OPERATIONS.md, 'Running on a cluster')"
        ) from None
    except StoreFormatError as error:  # an empty file
        raise PlanMismatchError(f"cannot read {where}: {error}") from None
    except OSError as error:
        raise SegmentNotVisibleError(
            f"cannot read {where}: {error.strerror or error}{expected}"
        ) from None
    if segment.size < log_range.limit:
        segment.close()
        raise PlanMismatchError(
            f"cannot read {where}: the file is {segment.size} bytes there, but the read was "
            f"planned over its first {log_range.limit} bytes{expected}; a shared file "
            "system may not show this host what was written but not yet fsynced (read "
            'with .option("upto", "flushed"))'
        )
    _check_store(Path(log_range.store), id_prefix, where)
    return segment


def _check_store(root: Path, id_prefix: str, where: str) -> None:
    """The store at this path on this host is the one planned (store.json, a small file
    read once per range)."""
    try:
        found = read_identity(root)[0]
    except StoreFormatError:
        return  # store.json unreadable here: the records' own offsets still check
    if found != id_prefix:
        raise PlanMismatchError(
            f"cannot read {where}: the store there has id {found}, the read was planned "
            f"on store {id_prefix}"
        )


def _retention_passed(log_range: LogRange) -> bool:
    """Whether the store, as this host sees it, starts past the range's segment."""
    try:
        state = read_shared_state(Path(log_range.store))
    except OSError:
        return False
    return state is not None and state.min_offset >= log_range.base + log_range.size


def _check_count(path: Path, log_range: LogRange, tally: Tally) -> None:
    expected = log_range.expected
    if expected is None or tally.members == expected:
        return
    if tally.damaged and tally.members < expected:
        return  # the damage reported swallowed some
    raise PlanMismatchError(
        f"read {tally.members} records in bytes {log_range.start}-{log_range.stop} of "
        f"commit-log segment {path} on host {host()}, but the store's consume queues held "
        f"{expected} there when the read was planned"
    )


#: Whether ``scan_range`` uses the native walk (the tests compare it with the long way).
NATIVE = True
_NATIVE_BATCH = 1024
_NATIVE_SLOW = 2


def scan_range(
    segment: ReadOnlySegment,
    log_range: LogRange,
    wanted: RecordFilter,
    id_prefix: str,
    tally: Tally | None = None,
) -> Iterator[StoredMessage | Corruption]:
    tally = Tally() if tally is None else tally
    view = segment.view
    mapped = segment.map
    size = segment.size
    base = segment.base
    stop = log_range.stop
    limit = min(log_range.limit, size)
    topics = wanted.topics
    queues = wanted.queues
    since_ms = wanted.since_ms
    until_ms = wanted.until_ms
    by_offset = wanted.by_offset
    keep_damage = not wanted.messages_only and wanted.expression is None
    compiled = filters.compile_filter(wanted.expression) if wanted.expression else None
    pos = log_range.start
    if pos:
        pos, stretch, foreign = resync(segment, pos, limit)
        if stretch is not None and stretch < stop:
            counters.corrupt += 1
            counters.corrupt_bytes += pos - stretch
            if keep_damage:
                yield Corruption(base + stretch, pos - stretch, _damage_at(segment, stretch))
        tally.damaged = foreign or (stretch is not None and stretch < stop)
    members = 0
    # The native walk takes every intact record it can; the loop below reads the one it
    # stops at (bad bytes, the end marker, a record that fails its checks), then hands
    # back.
    offsets = (
        (wanted.min_queue_offset, wanted.max_queue_offset, wanted.queue_starts, wanted.queue_ends)
        if by_offset
        else None
    )
    try:
        while pos < stop and pos + MARKER_SIZE <= size:
            if NATIVE:
                batch: list[StoredMessage] = []
                pos, found, passed, why = read_members(
                    mapped, pos, stop, base, topics, queues, since_ms, until_ms, offsets,
                    id_prefix, _NATIVE_BATCH, StoredMessage, batch,
                )  # fmt: skip
                members += found
                counters.skipped += passed
                counters.decoded += len(batch)
                yield from batch if compiled is None else compiled.keep(batch)
                if why != _NATIVE_SLOW:
                    continue
            length, magic = MARKER.unpack_from(view, pos)
            if magic == RECORD_MAGIC:
                offset = base + pos
                if pos + HEADER_SIZE <= size:
                    header = HEADER_UNPACK(view, pos)
                    end = pos + length
                    if (
                        header[COMMIT_OFFSET] == offset
                        and length == length_from_fields(header)
                        and end <= size
                        and trailing_length(view, end) == length
                    ):
                        start = pos + HEADER_SIZE
                        name = bytes(view[start : start + header[TOPIC_LEN]])
                        target = topics.get(name)
                        queue_id = header[QUEUE_ID]
                        if (
                            target is None
                            or queue_id >= target[0]
                            or offset < target[1][queue_id]
                            or (queues is not None and queue_id not in queues)
                        ):
                            counters.skipped += 1
                            pos = end
                            continue
                        members += 1
                        store_ms = header[STORE_MS]
                        if (
                            (since_ms is not None and store_ms < since_ms)
                            or (until_ms is not None and store_ms >= until_ms)
                            or (
                                by_offset
                                and not _offset_kept(wanted, name, queue_id, header[QUEUE_OFFSET])
                            )
                        ):
                            counters.skipped += 1
                            pos = end
                            continue
                        try:
                            message = decode_record(view, pos, size, offset, id_prefix)
                        except CorruptRecordError as error:
                            members -= 1
                            reason = error.reason
                        else:
                            counters.decoded += 1
                            if compiled is None or filters.matches(compiled, message)[0]:
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
            tally.damaged = True
            counters.corrupt += 1
            counters.corrupt_bytes += reach - pos
            if keep_damage:
                yield Corruption(base + pos, reach - pos, reason)
            if resume is None:
                return
            pos = resume
    finally:
        tally.members = members


def _offset_kept(wanted: RecordFilter, name: bytes, queue_id: int, queue_offset: int) -> bool:
    if wanted.min_queue_offset is not None and queue_offset < wanted.min_queue_offset:
        return False
    if wanted.max_queue_offset is not None and queue_offset >= wanted.max_queue_offset:
        return False
    first = wanted.queue_starts.get((name, queue_id))
    if first is not None and queue_offset < first:
        return False
    end = wanted.queue_ends.get((name, queue_id))
    return end is None or queue_offset < end


def resync(segment: ReadOnlySegment, start: int, limit: int) -> tuple[int, int | None, bool]:
    """Where a range starting at ``start`` begins reading: the first intact record (or
    end marker) at or after it, else ``limit``. Then what the bytes passed over are:
    where a bad stretch among them begins when it begins at or after ``start`` (the
    range reports it), and whether a bad stretch that begins before ``start`` runs into
    them (the range before reports that one). Neither, when they are the tail of one
    intact record that starts before ``start``."""
    found = find_next_record(segment, start, limit)
    resume = limit if found is None else found
    if resume == start or _straddled(segment, start, resume):
        return resume, None, False
    before = _last_record_before(segment, start)
    if before is None:
        return resume, None, True
    record_end = before + MARKER.unpack_from(segment.view, before)[0]
    if record_end >= resume:
        return resume, None, False
    if record_end >= start:
        return resume, record_end, False
    return resume, None, True


def _straddled(segment: ReadOnlySegment, start: int, resume: int) -> bool:
    """Whether the bytes before ``resume`` are one intact record that starts before
    ``start`` (found through its trailing length)."""
    if resume < RECORD_OVERHEAD:
        return False
    length = trailing_length(segment.view, resume)
    first = resume - length
    if not 0 <= first < start or length < RECORD_OVERHEAD:
        return False
    try:
        check_record(segment.view, first, segment.size, segment.base + first)
    except CorruptRecordError:
        return False
    return True


def _last_record_before(segment: ReadOnlySegment, start: int) -> int | None:
    """The last intact record starting before ``start``, searched backwards as far as a
    record can be long (``RESYNC_WINDOW``); None when there is none."""
    data = segment.map
    floor = max(0, start - RESYNC_WINDOW)
    # the magic of a record starting at start - 1 ends here
    search_end = start - 1 + MAGIC_AT + len(RECORD_MAGIC_BYTES)
    while True:
        hit = data.rfind(RECORD_MAGIC_BYTES, floor + MAGIC_AT, min(search_end, segment.size))
        if hit < 0:
            return None
        candidate = hit - MAGIC_AT
        if candidate < start:
            try:
                check_record(segment.view, candidate, segment.size, segment.base + candidate)
                return candidate
            except CorruptRecordError:
                pass
        search_end = hit + len(RECORD_MAGIC_BYTES) - 1


def _damage_at(segment: ReadOnlySegment, pos: int) -> str:
    """Why no intact record starts at ``pos`` (as the walk would say)."""
    if pos + MARKER_SIZE > segment.size:
        return "header runs past the end of the segment"
    length, magic = MARKER.unpack_from(segment.view, pos)
    if magic == RECORD_MAGIC:
        return _reason(segment.view, pos, segment.size, segment.base + pos)
    if length == 0 and magic == 0:
        return "zeroed bytes where a record should start"
    return f"no record starts here (magic 0x{magic:08x})"


def _reason(view, pos: int, size: int, offset: int) -> str:
    try:
        check_record(view, pos, size, offset)
    except CorruptRecordError as error:
        return error.reason
    return "record frame does not hold together"  # pragma: no cover - check_record agrees


__all__ = ["ScanCounters", "Tally", "counters", "read_range", "resync", "scan_range"]
