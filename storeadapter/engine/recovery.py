"""Recovery on open: make the consume queues agree with what the commit log holds.

1. Start from the checkpoint's dispatched offset (every record below it has durable
   consume-queue entries), or from the topic's first record when a queue's files are
   missing, or from the log's start when there is no checkpoint.
2. Walk the log from there, checking each record's frame and CRC32C. Write the
   consume-queue entry of every intact record (writing an entry that is already there
   changes nothing, so recovery can be run again, or be interrupted and restarted).
3. Bad bytes followed by an intact record in the same segment (in the last segment:
   within a bounded window) are reported and skipped. Bad bytes at the end of a full
   segment are reported and the scan goes on in the next one. Bad bytes with nothing
   intact after them in the last segment are a torn or garbage tail: they are erased,
   and the tail is set where they began; zeros there are simply the tail, unless the
   checkpoint says they were once durable, in which case they are reported.
4. Consume-queue entries at a queue's end that point at or past the tail, or at a
   record that is not theirs (a writer died before publishing them), are erased.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .checkpoint import CheckpointState
from .commitlog import CommitLog
from .consumequeue import ENTRY, ENTRY_SIZE, TIME_INDEX_INTERVAL, ConsumeQueue
from .follow import trim_queue_end
from .keyindex import KeyIndex
from .names import DEDUP_KEY_PREFIX, DEDUP_PROPERTY
from .record import (
    HEADER_SIZE,
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
)
from .results import Corruption
from .scan import (
    CORRUPT,
    END_OF_SEGMENT,
    GARBAGE_TAIL,
    RECORD,
    RESYNC_WINDOW,
    TAIL,
    scan_segment,
)
from .tags import tag_hash

# Resolves (topic bytes, queue id) to the record's queue and the commit-log offset at
# which its topic was created (older records belong to a deleted namesake), or None.
QueueResolver = Callable[[bytes, int], tuple[ConsumeQueue, int] | None]


@dataclass
class RecoveryReport:
    clean_shutdown: bool
    started_at: int = 0
    tail: int = 0
    scanned_bytes: int = 0
    records: int = 0
    redispatched: int = 0
    truncated_at: int | None = None
    truncated_bytes: int = 0
    dropped_queue_entries: int = 0
    dropped_index_entries: int = 0
    indexed_keys: int = 0
    corruptions: list[Corruption] = field(default_factory=list)
    duration_ms: float = 0.0
    finished_ms: int = 0

    def as_dict(self) -> dict:
        data = asdict(self)
        data["corruptions"] = [c._asdict() for c in self.corruptions]
        return data


def choose_start(
    log: CommitLog, checkpoint: CheckpointState | None, rebuild_from: int | None
) -> int:
    """Where the scan starts: the checkpoint, or earlier when queues must be rebuilt."""
    log_end = log.segments[-1].end if log.segments else log.tail
    start = log.min_offset if checkpoint is None else checkpoint.dispatched
    if rebuild_from is not None:
        start = min(start, rebuild_from)
    return max(log.min_offset, min(start, log_end))


def recover(
    log: CommitLog,
    loaded_queues: Callable[[], list[ConsumeQueue]],
    resolve: QueueResolver,
    start: int,
    clean_shutdown: bool,
    durable_end: int = 0,
    resync_window: int = RESYNC_WINDOW,
    index: KeyIndex | None = None,
) -> RecoveryReport:
    """Scan the log from ``start`` and repair the queues (see the module docstring).

    ``durable_end`` is the checkpoint's flushed offset: zeros below it are damage,
    not the tail.
    """
    began = time.perf_counter()
    report = RecoveryReport(clean_shutdown=clean_shutdown, started_at=start)
    tail = start
    first = 0
    while first < len(log.segments) and log.segments[first].end <= start:
        first += 1
    dispatcher = _Dispatcher(resolve, report, index)
    for position in range(first, len(log.segments)):
        segment = log.segments[position]
        last = position == len(log.segments) - 1
        begin = max(start, segment.base) - segment.base
        view = segment.view
        for event in scan_segment(segment, begin, not last, durable_end, resync_window):
            if event.kind == RECORD:
                report.records += 1
                report.scanned_bytes += event.length
                dispatcher.add(view, event.offset - segment.base, event.offset, event.header)
                tail = event.offset + event.length
            elif event.kind == CORRUPT:
                report.corruptions.append(Corruption(event.offset, event.length, event.reason))
                report.scanned_bytes += event.length
                tail = event.offset + event.length
            elif event.kind == END_OF_SEGMENT:
                tail = segment.end
            elif event.kind == GARBAGE_TAIL and not last:
                report.corruptions.append(Corruption(event.offset, event.length, event.reason))
                tail = segment.end
            elif event.kind == GARBAGE_TAIL:
                report.truncated_at = event.offset
                report.truncated_bytes = _garbage_extent(segment, event.offset - segment.base)
                segment.zero_from(event.offset - segment.base)
                tail = event.offset
            elif event.kind == TAIL:
                tail = event.offset
        dispatcher.finish()
    log_end = log.segments[-1].end if log.segments else log.tail
    if durable_end > log_end and log.segments:
        # The checkpoint says bytes up to durable_end were fsynced: a segment was cut short.
        reason = f"the log ends at {log_end}, below the checkpoint's flushed offset {durable_end}"
        report.corruptions.append(Corruption(log_end, durable_end - log_end, reason))
    log.tail = max(tail, log.min_offset)
    log.last_store_ms = max(log.last_store_ms, dispatcher.last_store_ms)
    if index is not None:
        report.dropped_index_entries = index.truncate_from(log.tail)
    # Queues not loaded yet are checked the same way when first used.
    for queue in loaded_queues():
        topic, queue_id = queue.owner
        report.dropped_queue_entries += trim_queue_end(
            log, queue, topic, queue_id, log.tail, erase=True
        )
    report.tail = log.tail
    report.duration_ms = round((time.perf_counter() - began) * 1000, 3)
    report.finished_ms = time.time_ns() // 1_000_000
    return report


class _Dispatcher:
    """Collects the consume-queue entries of scanned records and writes those that differ.

    Entries are gathered per queue and compared with what is on disk a run at a time,
    so an intact queue costs one read and no write.
    """

    def __init__(
        self, resolve: QueueResolver, report: RecoveryReport, index: KeyIndex | None
    ) -> None:
        self._resolve = resolve
        self._report = report
        self._index = index
        self._index_from = (index.end_offset or 0) if index is not None else None
        self._index_items: list[tuple[str, str, int, int]] = []
        self._last_store_ms = 0
        self._queues: dict[tuple[bytes, int], tuple[ConsumeQueue, int] | None] = {}
        self._pending: dict[ConsumeQueue, list[tuple[int, bytes]]] = {}
        self._count = 0

    def add(self, view, pos: int, offset: int, header: tuple) -> None:
        length, queue_offset, queue_id = header[0], header[3], header[6]
        topic_len, tag_len = header[9], header[10]
        start = pos + HEADER_SIZE
        topic = bytes(view[start : start + topic_len])
        key = (topic, queue_id)
        target = self._queues.get(key, _UNKNOWN)
        if target is _UNKNOWN:
            target = self._queues[key] = self._resolve(topic, queue_id)
        if target is None or offset < target[1]:
            return
        queue = target[0]
        if (
            self._index_from is not None
            and offset >= self._index_from
            and (header[11] or header[12])
        ):
            self._index_items.extend(_index_items(view, pos, header, topic, offset))
        if not queue_offset % TIME_INDEX_INTERVAL:
            queue.time_index.write([(queue_offset, header[5])])
        if header[5] > self._last_store_ms:
            self._last_store_ms = header[5]
        tag = bytes(view[start + topic_len : start + topic_len + tag_len]) if tag_len else b""
        pending = self._pending.get(queue)
        if pending is None:
            pending = self._pending[queue] = []
        pending.append((queue_offset, ENTRY.pack(offset, length, tag_hash(tag))))
        self._count += 1
        if self._count >= _FLUSH_EVERY:
            self.finish()

    @property
    def last_store_ms(self) -> int:
        return self._last_store_ms

    def finish(self) -> None:
        if self._index_items:
            self._index.put_many(self._index_items)
            self._report.indexed_keys += len(self._index_items)
            self._index_items = []
        for queue, pending in self._pending.items():
            run_start = 0
            for i in range(1, len(pending) + 1):
                if i == len(pending) or pending[i][0] != pending[i - 1][0] + 1:
                    self._write_run(queue, pending[run_start:i])
                    run_start = i
        self._pending.clear()
        self._count = 0

    def _write_run(self, queue: ConsumeQueue, run: list[tuple[int, bytes]]) -> None:
        first = run[0][0]
        if first < queue.min_offset:
            run = [item for item in run if item[0] >= queue.min_offset]
            if not run:
                return
            first = run[0][0]
        wanted = b"".join(entry for _, entry in run)
        existing = queue.read(first, len(run)) if first < queue.max_offset else b""
        if existing == wanted:
            return
        queue.write(first, wanted)
        self._report.redispatched += sum(
            1
            for i in range(len(run))
            if existing[i * ENTRY_SIZE : (i + 1) * ENTRY_SIZE] != run[i][1]
        )


_UNKNOWN = object()


def _index_items(view, pos: int, header: tuple, topic: bytes, offset: int) -> list[tuple]:
    """The key-index items of a record: its keys and its dedup id."""
    topic_len, tag_len, keys_len, props_len = header[9], header[10], header[11], header[12]
    start = pos + HEADER_SIZE + topic_len + tag_len
    name = topic.decode()
    store_ms = header[5]
    items = []
    if keys_len:
        for key in str(view[start : start + keys_len], "utf-8").split(KEY_SEPARATOR):
            items.append((name, key, offset, store_ms))
    if props_len:
        start += keys_len
        for item in str(view[start : start + props_len], "utf-8").split(PROPERTY_SEPARATOR):
            property_name, _, value = item.partition(NAME_VALUE_SEPARATOR)
            if property_name == DEDUP_PROPERTY:
                items.append((name, DEDUP_KEY_PREFIX + value, offset, store_ms))
    return items


_FLUSH_EVERY = 65536


def _garbage_extent(segment, pos: int) -> int:
    """How many bytes from ``pos`` hold garbage: up to the first all-zero 64 KiB chunk."""
    chunk = 64 << 10
    end = pos
    while end < segment.size:
        piece = segment.view[end : min(segment.size, end + chunk)].tobytes().rstrip(b"\0")
        if not piece:
            break
        end += len(piece)
        if len(piece) < chunk:
            break
    return end - pos
