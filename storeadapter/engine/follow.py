"""Following the commit log as other processes append to it.

A process learns from the shared state that the published tail moved; it then walks
the headers of the records in between (written whole by another process, their
consume-queue entries already on disk) to learn each queue's new end. It also checks
queue ends against the log, which is how it ignores entries a crashed writer left
past what it published.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from . import dataplane, fileio
from .commitlog import CommitLog
from .consumequeue import TIME_INDEX_INTERVAL, ConsumeQueue
from .errors import CorruptRecordError, StoreFormatError
from .record import (
    COMMIT_OFFSET,
    END_OF_SEGMENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MARKER,
    QUEUE_ID,
    QUEUE_OFFSET,
    RECORD_MAGIC,
    STORE_MS,
    TOPIC_LEN,
    record_header,
    record_lead,
)
from .segment import is_segment_name, segment_name

Resolver = Callable[[bytes, int], tuple[ConsumeQueue, int] | None]


def follow_log(log: CommitLog, end: int, resolve: Resolver) -> list[tuple]:
    """Advance ``log.tail`` to ``end``; return, for a followed run (dispatch.py), each
    queue whose records it passed with the span of queue offsets passed: (queue, lowest,
    highest + 1). The queue dispatcher raises their ends and marks their entries for
    this process's next flush (not yet fsynced by it). Segments passed are marked here.
    """
    spans: dict = {}  # queue -> (lowest, highest) queue offset passed
    cache: dict[tuple[bytes, int], tuple[ConsumeQueue, int] | None] = {}
    pos = followed = log.tail
    # Moved first: a queue loaded now, and a shared topic's blocks found now, are judged
    # by the new tail (its published allocation end).
    log.tail = end
    try:
        _walk(log, pos, end, resolve, spans, cache)
    except BaseException:
        log.tail = followed
        raise
    return [(queue, low, high + 1) for queue, (low, high) in spans.items()]


def _walk(log: CommitLog, pos: int, end: int, resolve: Resolver, spans: dict, cache: dict) -> None:
    """``follow_log``'s walk: note each queue's span of queue offsets.

    The records' headers are read natively a segment at a time (``dataplane.follow_spans``:
    each (topic, queue)'s lowest and highest queue offset and first commit offset), and
    one by one here (``_step``) where the native walk stops (an end-of-segment marker,
    a damaged or cut record: the errors are raised here) and over a stretch holding the
    first record of a queue that starts inside it (its records before ``since`` are not
    its own).
    """
    while pos < end:
        segment, at = _located(log, pos, end)
        log.mark_unsynced(segment)
        limit = min(end, segment.end) - segment.base
        stop, store_ms, met = dataplane.follow_spans(segment, at, limit)
        if not _take_spans(log, met, store_ms, resolve, spans, cache):
            while pos < segment.base + stop:
                pos = _step(log, pos, end, resolve, spans, cache)
        pos = segment.base + stop
        if stop < limit:
            pos = _step(log, pos, end, resolve, spans, cache)


def _take_spans(
    log: CommitLog, met: list, store_ms: int | None, resolve: Resolver, spans: dict, cache: dict
) -> bool:
    """Note ``follow_spans``' spans of a stretch of records (``met``); False, noting
    nothing, when a queue's first commit offset falls after its first record there."""
    targets = []
    for topic, queue_id, low, high, first in met:
        key = (topic, queue_id)
        target = cache.get(key, _UNKNOWN)
        if target is _UNKNOWN:
            target = cache[key] = resolve(*key)
        if target is not None:
            if first < target[1]:
                return False
            targets.append((target[0], low, high))
    if store_ms is not None and store_ms > log.last_store_ms:
        log.last_store_ms = store_ms
    for queue, low, high in targets:
        # Marked whether or not the queue's end moves: loaded only now, it shows these
        # entries already, and they are not fsynced by this process yet.
        was_low, was_high = spans.get(queue, (low, high))
        spans[queue] = (min(was_low, low), max(was_high, high))
    return True


def _located(log: CommitLog, pos: int, end: int) -> tuple:
    """The segment holding ``pos`` and the position in it, opening the segments other
    processes created up to the one holding ``end`` when it is not open yet."""
    found = log.locate(pos)
    if found is None:
        log.refresh(end)
        found = log.locate(pos)
        if found is None:
            raise StoreFormatError(
                f"the commit log has no segment for offset {pos}, which another process "
                "published; the store directory is damaged"
            )
    return found


def _step(log: CommitLog, pos: int, end: int, resolve: Resolver, spans: dict, cache: dict) -> int:
    """One record (or end-of-segment marker) of the walk at ``pos``; where the next is."""
    segment, at = _located(log, pos, end)
    log.mark_unsynced(segment)
    length, magic = record_lead(segment.view, at, segment.base)
    if magic == END_OF_SEGMENT_MAGIC:
        return segment.end
    if magic != RECORD_MAGIC or length <= 0:
        raise StoreFormatError(
            f"no record at commit-log offset {pos}, below the published tail {end}"
        )
    header = record_header(segment.view, at, segment.base)
    start = at + HEADER_SIZE
    key = (bytes(segment.view[start : start + header[TOPIC_LEN]]), header[QUEUE_ID])
    target = cache.get(key, _UNKNOWN)
    if target is _UNKNOWN:
        target = cache[key] = resolve(*key)
    if header[STORE_MS] > log.last_store_ms:
        log.last_store_ms = header[STORE_MS]
    if target is not None and pos >= target[1]:
        queue = target[0]
        queue_offset = header[QUEUE_OFFSET]
        low, high = spans.get(queue, (queue_offset, queue_offset))
        spans[queue] = (min(low, queue_offset), max(high, queue_offset))
    return pos + length


def mark_written(queue, start: int, end: int) -> None:
    """Have this process's next flush fsync the files holding the queue's entries
    ``start`` to ``end - 1`` (and its time marks among them), written by another
    process or found in place by recovery: a checkpoint past them vouches for them."""
    queue.mark_dirty(start, end)
    last_mark = (end - 1) // TIME_INDEX_INTERVAL * TIME_INDEX_INTERVAL
    if isinstance(queue, ConsumeQueue) and last_mark >= start:
        queue.time_index.dirty = True


def mark_records_written(log: CommitLog, start: int, end: int, resolve: Resolver) -> set:
    """Mark for this process's next flush every file holding what the records in
    ``[start, end)`` (below the published tail: whole) put on disk: their segments, and
    their queues' entries and time marks. Returns the flush targets of those queues.

    A process that did not see those records written (it opened after them) walks
    their headers once, before its first checkpoint vouches for them.
    """
    spans: dict = {}
    cache: dict[tuple[bytes, int], tuple[ConsumeQueue, int] | None] = {}
    pos = max(start, log.min_offset)
    while pos < end:
        found = log.locate(pos)
        if found is None:
            break  # retention took it meanwhile, or nothing was published there
        segment, at = found
        log.mark_unsynced(segment)
        try:
            length, magic = record_lead(segment.view, at, segment.base)
            if magic != RECORD_MAGIC or length <= 0:
                pos = segment.end  # an end-of-segment marker
                continue
            header = record_header(segment.view, at, segment.base)
        except CorruptRecordError:
            break  # the file ends inside this record: nothing of it or after it to mark
        name_at = at + HEADER_SIZE
        key = (bytes(segment.view[name_at : name_at + header[TOPIC_LEN]]), header[QUEUE_ID])
        target = cache.get(key, _UNKNOWN)
        if target is _UNKNOWN:
            target = cache[key] = resolve(*key)
        if target is not None and pos >= target[1]:
            queue_offset = header[QUEUE_OFFSET]
            low, high = spans.get(target[0], (queue_offset, queue_offset))
            spans[target[0]] = (min(low, queue_offset), max(high, queue_offset))
        pos += length
    for queue, (low, high) in spans.items():
        mark_written(queue, low, high + 1)
    return {queue.flush_target for queue in spans}


def record_matches(log: CommitLog, offset: int, topic: bytes, queue_id: int, index: int) -> bool:
    """Whether the record at commit-log ``offset`` is entry ``index`` of that queue."""
    found = log.locate(offset)
    if found is None:
        return False
    segment, at = found
    if at + HEADER_SIZE + len(topic) > segment.size:
        return False
    header = HEADER.unpack_from(segment.view, at)
    start = at + HEADER_SIZE
    return (
        header[MAGIC] == RECORD_MAGIC
        and header[COMMIT_OFFSET] == offset
        and header[QUEUE_OFFSET] == index
        and header[QUEUE_ID] == queue_id
        and bytes(segment.view[start : start + header[TOPIC_LEN]]) == topic
    )


def unpublished_records(log: CommitLog, extent: int) -> list[tuple[bytes, int, int, int]]:
    """(topic, queue id, queue offset, commit offset) of each record a write that was
    never published left from the tail up to ``extent`` (the end its writer marked): in
    the writable segment, then in the segment files it rolled into, as far as whole
    headers can be walked. Its consume-queue entries point at these records."""
    found: list[tuple[bytes, int, int, int]] = []
    segment = log.writable_segment()
    start = log.tail - segment.base
    found.extend(
        _headers(segment.view, start, min(segment.size, extent - segment.base), segment.base)
    )
    rolled = sorted(
        int(path.name)
        for path in log.directory.iterdir()
        if is_segment_name(path.name) and segment.end <= int(path.name) < extent
    )
    for base in rolled:
        try:
            fd = fileio.open_file(log.directory / segment_name(base))
        except FileNotFoundError:
            continue
        try:
            data = fileio.pread(fd, min(log.segment_bytes, extent - base), 0)
        finally:
            os.close(fd)
        found.extend(_headers(memoryview(data), 0, len(data), base))
    return found


def _headers(view, pos: int, stop: int, base: int) -> Iterator[tuple[bytes, int, int, int]]:
    while pos + HEADER_SIZE <= stop:
        length, magic = MARKER.unpack_from(view, pos)
        if magic != RECORD_MAGIC or length <= HEADER_SIZE:
            return
        header = HEADER.unpack_from(view, pos)
        if header[COMMIT_OFFSET] != base + pos or pos + HEADER_SIZE + header[TOPIC_LEN] > stop:
            return
        start = pos + HEADER_SIZE
        name = bytes(view[start : start + header[TOPIC_LEN]])
        yield name, header[QUEUE_ID], header[QUEUE_OFFSET], base + pos
        pos += length


def _first_past(queue: ConsumeQueue, keep: int, floor: int) -> int:
    """Where the run of written entries just below ``keep`` whose records start at or
    past ``floor`` begins (``keep`` when the last one's does not): found in O(log n)
    reads, not one a dropped entry. Within a queue, entries' records rise with their
    queue offsets, so such entries, another writer's since this process's tail or a
    dead writer's, make one run at the end; each would be dropped by the walk
    (``trim_queue_end``) anyway. An unwritten entry ends the run: the walk decides it."""

    def past(offset: int) -> bool:
        entry = queue.entry(offset)
        return entry is not None and entry[0] >= floor

    if keep <= queue.min_offset or not past(keep - 1):
        return keep
    low, high = queue.min_offset, keep - 1
    while low < high:
        middle = (low + high) // 2
        if past(middle):
            high = middle
        else:
            low = middle + 1
    return high


def trim_queue_end(
    log: CommitLog,
    queue: ConsumeQueue,
    topic: bytes,
    queue_id: int,
    tail: int,
    erase: bool,
    trusted_below: int = 0,
    damaged: Callable[[int], bool] | None = None,
) -> int:
    """Drop the queue's last entries that point at or past ``tail`` or at a record of
    another queue (left by a writer that died before publishing); return how many.

    Kept as they are: entries whose records lie below ``trusted_below`` (a checkpoint
    found them and their records consistent and durable: no dead writer's entry points
    there), and entries whose records ``damaged`` says were found damaged below the
    durable watermark (acknowledged: the damage is reported when read, and the queue
    offset must not be handed out again). With ``erase`` the dropped entries are erased
    on disk (only when no other process is writing); otherwise only this process's idea
    of the queue's end moves back.
    """
    keep = queue.max_offset
    if not erase:
        keep = _first_past(queue, keep, max(tail, trusted_below))
    while keep > queue.min_offset:
        entry = queue.entry(keep - 1)
        if entry is not None and entry[0] < log.min_offset:
            break  # its record went with retention: still a real entry of the queue
        if entry is not None and entry[1]:
            if entry[0] + entry[1] <= trusted_below:
                break
            if damaged is not None and damaged(entry[0]):
                break
        if (
            entry is not None
            and entry[0] + entry[1] <= tail
            and record_matches(log, entry[0], topic, queue_id, keep - 1)
        ):
            break
        keep -= 1
    dropped = queue.max_offset - keep
    if dropped:
        if erase:
            queue.truncate(keep)
        else:
            queue.max_offset = keep
    return dropped


_UNKNOWN = object()
