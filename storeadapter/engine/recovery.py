"""Recovery on open: make the consume queues agree with what the commit log holds.

1. Start from the checkpoint's dispatched offset (every record below it has durable
   consume-queue entries), or from the topic's first record when a queue's files are
   missing, or from the log's start when there is no checkpoint.
2. Walk the log from there, checking each record's frame and CRC32C. Write the
   consume-queue entry of every intact record (writing an entry that is already there
   changes nothing, so recovery can be run again, or be interrupted and restarted).
   Every queue file the walk passed is fsynced before the next checkpoint, the entries
   found already in place too: a writer killed before its flush left them in the page
   cache only.
3. Bad bytes in a sealed segment are reported, and the scan goes on at the next intact
   record (or in the next segment). In the last segment the checkpoint's durable
   watermark (``commitlog_flushed``: what acknowledging fsyncs covered) divides damage
   from the torn end: bad bytes or zeros below it are reported and skipped up to the
   next intact record below it, or up to it; at or past it the first bad bytes end the
   log: the tail is set where they begin. Records past such a gap are never resynced
   onto (a power loss may keep later pages and lose earlier ones).
4. Nothing past the recovered tail is trusted afterwards: the rest of the last segment
   is cleared before anything new is written (RocketMQ's dirty-file truncation).
5. Consume-queue entries at a queue's end that point at or past the tail, or at a
   record that is not theirs (a writer died before publishing them), are erased; entries
   below the checkpoint's dispatched offset, and entries whose records the scan found
   damaged below the durable watermark, stay (the damage is reported, and the queue
   offset is never handed out again). Trusting the checkpoint this way relies on no
   stale entry pointing below it: whoever clears an unpublished write (the next writer,
   or a writer whose batch failed) erases that write's entries with its records.
"""

from __future__ import annotations

import bisect
import sys
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from itertools import compress, repeat
from operator import add, is_, itemgetter, sub
from typing import TYPE_CHECKING

from . import dataplane
from .blockqueue import BlockQueue
from .checkpoint import CheckpointState
from .commitlog import CommitLog
from .consumequeue import ENTRY, ENTRY_SIZE, TIME_INDEX_INTERVAL, ConsumeQueue
from .dataplane import NATIVE_RUN
from .dispatch import REPLAYED, Dispatcher, Run, dispatch_all
from .follow import trim_queue_end
from .keyindex import KeyIndex
from .names import DEDUP_KEY_PREFIX, DEDUP_PROPERTY
from .record import (
    COMMIT_OFFSET,
    HEADER_SIZE,
    KEY_SEPARATOR,
    KEYS_LEN,
    LENGTH,
    META_LENS,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    PROPS_LEN,
    QUEUE_ID,
    QUEUE_OFFSET,
    STORE_MS,
    TAG_LEN,
    TOPIC_LEN,
)
from .results import Corruption
from .scan import (
    CORRUPT,
    END_OF_SEGMENT,
    GARBAGE_TAIL,
    RECORD,
    RUN,
    RUN_COMMIT_OFFSET,
    RUN_QUEUE_ID,
    RUN_QUEUE_OFFSET,
    RUN_STORE_MS,
    TAIL,
    UNIFORM_RUN,
    UniformRun,
)
from .segment import Segment
from .tags import tag_hash

if TYPE_CHECKING:
    from .topics import Topic

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
    # Records whose entries the native replay found in place (``Run.replay_blocks``):
    # a shared topic's queues, read and compared without a Python call per queue.
    native_replayed: int = 0
    # Queues of shared topics an open after a crash found settled in one native pass
    # (``look_at_ends``) and left unloaded: no Python call for them.
    native_ends: int = 0
    truncated_at: int | None = None
    truncated_bytes: int = 0
    dropped_queue_entries: int = 0
    dropped_index_entries: int = 0
    indexed_keys: int = 0
    corruptions: list[Corruption] = field(default_factory=list)
    duration_ms: float = 0.0
    finished_ms: int = 0
    # Committed offsets found past their queue's end (a power loss kept the commit, not
    # the messages) and set back to it: {group, topic, queue, committed, end}.
    offsets_clamped: list[dict] = field(default_factory=list)
    # Bad bytes met in the offsets journal (offsets.JournalDamage as dicts).
    offsets_damage: list[dict] = field(default_factory=list)
    # An append of several events a crash kept only in part, dropped from the log's end.
    partial_group_cut_at: int | None = None
    partial_group_bytes: int = 0
    # What was done to each stream topic's event index (streamrecovery.IndexRecovery as dicts).
    event_indexes: list[dict] = field(default_factory=list)

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
    dispatchers: list[Dispatcher],
    start: int,
    clean_shutdown: bool,
    durable_end: int = 0,
    index: KeyIndex | None = None,
    dispatched: int = 0,
    cut_tail: Callable[[CommitLog, int, int], int] | None = None,
    dirty: set | None = None,
    shared: Iterable[Topic] = (),
    unloaded: Iterable[tuple[Topic, int]] = (),
) -> RecoveryReport:
    """Scan the log from ``start`` and repair the queues (see the module docstring).

    The intact records found go to ``dispatchers`` (the store's list, dispatch.py) as
    replayed runs; their key-index items are gathered only when ``index`` is given.

    ``durable_end`` is the checkpoint's flushed offset, the durable watermark: bad bytes
    below it are damage, not the tail. ``dispatched`` is the checkpoint's: queue entries
    of records below it were durable and consistent then. ``cut_tail(log, tail,
    durable_end)`` may move the tail found back (to drop an append of several events a
    crash kept only in part). ``dirty`` (the registry's set of flush targets) is given
    the block stores whose entries the native replay found in place: the next flush
    fsyncs their files (a writer killed before its flush left them in the page cache).
    ``shared``: the shared topics, whose records' entries are checked natively where they
    are in place (``_Gatherer._replay_blocks``). ``unloaded``: (shared topic, floor) of
    the topics whose queues an open after a crash did not load first; the queues among
    them whose ends must be looked at are loaded (``look_at_ends``) before the trim.
    """
    began = time.perf_counter()
    report = RecoveryReport(clean_shutdown=clean_shutdown, started_at=start)
    tail = start
    first = 0
    while first < len(log.segments) and log.segments[first].end <= start:
        first += 1
    dispatcher = _Gatherer(resolve, report, index, dispatchers, dirty, shared)
    for position in range(first, len(log.segments)):
        segment = log.segments[position]
        last = position == len(log.segments) - 1
        begin = max(start, segment.base) - segment.base
        events = dataplane.scan_runs(segment, begin, not last, durable_end)
        for event in events:
            if event.kind == NATIVE_RUN:
                report.records += event.header.count
                report.scanned_bytes += event.length
                dispatcher.add_native(event.header)
                tail = event.offset + event.length
            elif event.kind == UNIFORM_RUN:
                report.records += event.header.count
                report.scanned_bytes += event.length
                dispatcher.add_uniform(segment, event.header)
                tail = event.offset + event.length
            elif event.kind == RUN:
                report.records += len(event.header)
                report.scanned_bytes += event.length
                dispatcher.add_run(segment, event.header)
                tail = event.offset + event.length
            elif event.kind == RECORD:
                report.records += 1
                report.scanned_bytes += event.length
                dispatcher.add_run(segment, [event.header])
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
    if cut_tail is not None:
        cut = cut_tail(log, tail, durable_end)
        if cut < tail:
            report.partial_group_cut_at = cut
            report.partial_group_bytes = tail - cut
            tail = cut
    log_end = log.segments[-1].end if log.segments else log.tail
    if durable_end > log_end and log.segments:
        # The checkpoint says bytes up to durable_end were fsynced: a segment was cut short.
        reason = f"the log ends at {log_end}, below the checkpoint's flushed offset {durable_end}"
        report.corruptions.append(Corruption(log_end, durable_end - log_end, reason))
    log.tail = max(tail, log.min_offset)
    log.last_store_ms = max(log.last_store_ms, dispatcher.last_store_ms)
    if not clean_shutdown or report.partial_group_cut_at is not None:
        _clear_past_tail(log)  # a clean shutdown leaves nothing past the tail
    if index is not None:
        report.dropped_index_entries = index.truncate_from(log.tail)
    for topic, floor in unloaded:
        report.native_ends += look_at_ends(log, topic, floor)
    # Queues not loaded yet are checked the same way when first used.
    damage = sorted(
        (c.commit_offset, c.commit_offset + c.length)
        for c in report.corruptions
        if c.commit_offset < durable_end
    )
    for queue in loaded_queues():
        topic, queue_id = queue.owner
        report.dropped_queue_entries += trim_queue_end(
            log,
            queue,
            topic,
            queue_id,
            log.tail,
            erase=True,
            trusted_below=dispatched,
            damaged=lambda offset: _within(damage, offset),
        )
    report.tail = log.tail
    report.duration_ms = round((time.perf_counter() - began) * 1000, 3)
    report.finished_ms = time.time_ns() // 1_000_000
    return report


def _within(stretches: list[tuple[int, int]], offset: int) -> bool:
    """Whether ``offset`` lies in one of the sorted ``[start, end)`` stretches."""
    at = bisect.bisect_right(stretches, (offset, float("inf"))) - 1
    return at >= 0 and stretches[at][0] <= offset < stretches[at][1]


def _clear_past_tail(log: CommitLog) -> None:
    """Zero the last segment from the tail to its end: whatever is there (a dead
    writer's remains, records a power loss kept after a lost page) must never be taken
    for records once new ones are written before it."""
    last = log.active
    if last is not None and last.base <= log.tail < last.end:
        last.zero_from(log.tail - last.base)


class _Target:
    """A queue records resolve to, and the entries gathered for it since the last flush."""

    __slots__ = ("queue", "created", "pieces")

    def __init__(self, queue: ConsumeQueue, created: int) -> None:
        self.queue = queue
        self.created = created
        # (first queue offset, the queue offsets when they do not follow on, entries)
        self.pieces: list[tuple[int, list[int] | None, bytes]] = []


class _Gatherer:
    """Gathers what scanned records mean for the indexes (consume-queue entries, time
    marks, key-index items) and hands it to the dispatchers as one replayed run
    (dispatch.py) every ``_FLUSH_EVERY`` entries and at the end of each segment.

    Records come in runs (see ``scan.intact_run``); a run's records are grouped by queue
    and their entries packed with one call per group. The queue dispatcher compares
    entries with what is on disk a run of queue offsets at a time, so an intact queue
    costs one read and no write.
    """

    def __init__(
        self,
        resolve: QueueResolver,
        report: RecoveryReport,
        index: KeyIndex | None,
        dispatchers: list[Dispatcher],
        dirty: set | None = None,
        shared: Iterable[Topic] = (),
    ) -> None:
        self._resolve = resolve
        self._dirty = dirty
        self._shared = [topic for topic in shared if topic.blocks is not None]
        self._report = report
        self._dispatchers = dispatchers
        self._index_from = (index.end_offset or 0) if index is not None else None
        self._index_items: list[tuple[str, str, int, int]] = []
        self._marks: list[tuple] = []
        self._last_store_ms = 0
        self._targets: dict[tuple[bytes, int], _Target | None] = {}
        self._by_topic: dict[bytes, dict[int, _Target | None]] = {}
        self._pending: dict[ConsumeQueue, _Target] = {}
        self._count = 0

    @property
    def last_store_ms(self) -> int:
        return self._last_store_ms

    def _target(self, topic: bytes, queue_id: int) -> _Target | None:
        key = (topic, queue_id)
        if key not in self._targets:
            target = self._resolve(topic, queue_id)
            self._targets[key] = None if target is None else _Target(*target)
        return self._targets[key]

    def add_native(self, run: dataplane.Run) -> None:
        """Dispatch a run of intact records found by the native scan: it groups them by
        queue and packs each queue's entries and time marks."""
        left = None  # every queue of the run goes the long way
        if self._shared and NATIVE_REPLAY:
            taken = self._replay_blocks(run)
            if taken:
                left = [i for i in range(run.group_count) if i not in taken]
        targets = [self._target(topic, queue_id) for topic, queue_id in run.queues(left)]
        sinces = [None if target is None else target.created for target in targets]
        groups, index_items = run.pack(
            sinces,
            TIME_INDEX_INTERVAL,
            self._index_from,
            DEDUP_PROPERTY,
            DEDUP_KEY_PREFIX,
            left,
        )
        if index_items:
            self._index_items.extend(index_items)
        for target, packed in zip(targets, groups, strict=True):
            if packed is None:
                continue
            first, offsets, entries, marks, store_ms = packed
            if marks:  # a tuple: consecutive marks, packed as in the file
                self._marks.append((target.queue, marks))
            if store_ms > self._last_store_ms:
                self._last_store_ms = store_ms
            if not target.pieces:
                self._pending[target.queue] = target
            target.pieces.append((first, offsets, entries))
            self._count += len(entries) // ENTRY_SIZE
        if self._count >= _FLUSH_EVERY:
            self.finish()

    def _replay_blocks(self, run: dataplane.Run) -> set[int]:
        """The groups of ``run`` (positions in its ``queues()``) of shared topics whose
        entries are all in place in their block files, checked natively, no Python call
        per queue (``Run.replay_blocks``); the rest go the long way (``pack``, then the
        queue dispatcher, which writes). A queue with entries gathered for the long way
        already stays on it (its writes keep their order), as do the queues of a topic
        being rebuilt."""
        taken: set[int] = set()
        for topic in self._shared:
            blocks = topic.blocks
            if blocks.rebuilding:
                continue
            pending = [
                queue.queue_id
                for queue in self._pending
                if type(queue) is BlockQueue and queue.blocks is blocks
            ]
            files = blocks.files
            info = topic.info
            found, records, newest, touched = run.replay_blocks(
                topic.name_bytes,
                len(topic.queues),
                info.created_offset,
                info.queue_since,
                pending,
                blocks.index,
                [(first, block_file.fd) for first, block_file in files.items()],
                blocks.entries_per_block,
                blocks.blocks_per_file,
                blocks.block_bytes,
            )
            if not found:
                continue
            taken.update(found)
            self._report.native_replayed += records
            if newest > self._last_store_ms:
                self._last_store_ms = newest
            for first in touched:  # found in place, perhaps only in the page cache
                blocks.dirty.add(files[first])
            if touched and self._dirty is not None:
                self._dirty.add(blocks)
        return taken

    def add_run(self, segment: Segment, headers: list[tuple]) -> None:
        """Dispatch a run of intact records of ``segment`` (their header tuples)."""
        data = segment.map
        starts = list(map(sub, map(_COMMIT_OFFSET, headers), repeat(segment.base - HEADER_SIZE)))
        topics = map(
            data.__getitem__, map(slice, starts, map(add, starts, map(_TOPIC_LEN, headers)))
        )
        keys = list(zip(topics, map(_QUEUE_ID, headers), strict=True))
        found = list(map(self._targets.get, keys, repeat(_UNKNOWN)))
        if _UNKNOWN in found:
            found = [self._target(*key) for key in keys]
        for target, group in _split(headers, found):
            if target is not None:
                self._add_headers(segment, target, group)
        if self._count >= _FLUSH_EVERY:
            self.finish()

    def add_uniform(self, segment: Segment, run: UniformRun) -> None:
        """Dispatch a run of records that share their lengths, topic and tag."""
        header = run.header
        length, topic_len, tag_len = header[LENGTH], header[TOPIC_LEN], header[TAG_LEN]
        start = header[COMMIT_OFFSET] - segment.base + HEADER_SIZE
        topic = segment.map[start : start + topic_len]
        tag = tag_hash(segment.map[start + topic_len : start + topic_len + tag_len])
        fields = run.fields
        queue_ids = list(map(_FIELD_QUEUE_ID, fields))
        by_queue = self._by_topic.get(topic)
        if by_queue is None:
            by_queue = self._by_topic[topic] = {}
        for queue_id in set(queue_ids).difference(by_queue):
            by_queue[queue_id] = self._target(topic, queue_id)
        template = ENTRY.pack(0, length, tag)
        for queue_id, group in _split(fields, queue_ids):
            target = by_queue[queue_id]
            if target is None:
                continue
            if group[0][RUN_COMMIT_OFFSET] < target.created:  # of a deleted namesake
                group = [item for item in group if item[RUN_COMMIT_OFFSET] >= target.created]
                if not group:
                    continue
            if header[KEYS_LEN] or header[PROPS_LEN]:
                self._index_records(
                    segment,
                    header,
                    topic,
                    ((item[RUN_COMMIT_OFFSET], item[RUN_STORE_MS]) for item in group),
                )
            packed = bytearray(template * len(group))
            _interleave(packed, 0, 8, array("Q", map(_FIELD_OFFSET, group)))
            self._keep(target, list(map(_FIELD_QUEUE_OFFSET, group)), group, RUN_STORE_MS, packed)
        if self._count >= _FLUSH_EVERY:
            self.finish()

    def _add_headers(self, segment: Segment, target: _Target, headers: list[tuple]) -> None:
        """Pack the entries of records of one queue, in log order."""
        if headers[0][COMMIT_OFFSET] < target.created:  # of a deleted namesake
            headers = [h for h in headers if h[COMMIT_OFFSET] >= target.created]
            if not headers:
                return
        if any(map(_KEYS_LEN, headers)) or any(map(_PROPS_LEN, headers)):
            pos = headers[0][COMMIT_OFFSET] - segment.base + HEADER_SIZE
            topic = segment.map[pos : pos + headers[0][TOPIC_LEN]]
            for h in headers:
                if h[KEYS_LEN] or h[PROPS_LEN]:
                    self._index_records(segment, h, topic, ((h[COMMIT_OFFSET], h[STORE_MS]),))
        if any(map(_TAG_LEN, headers)):
            data = segment.map
            base = segment.base - HEADER_SIZE
            tags = []
            for h in headers:
                if h[TAG_LEN]:
                    pos = h[COMMIT_OFFSET] - base + h[TOPIC_LEN]
                    tags.append(tag_hash(data[pos : pos + h[TAG_LEN]]))
                else:
                    tags.append(0)
        else:
            tags = bytes(8 * len(headers))
        packed = bytearray(len(headers) * ENTRY_SIZE)
        _interleave(packed, 0, 8, array("Q", map(_COMMIT_OFFSET, headers)))
        _interleave(packed, 8, 4, array("I", map(_LENGTH, headers)))
        _interleave(packed, 12, 8, array("Q", tags))
        self._keep(target, list(map(_QUEUE_OFFSET, headers)), headers, STORE_MS, packed)

    def _index_records(
        self, segment: Segment, header: tuple, topic: bytes, records: Iterable[tuple[int, int]]
    ) -> None:
        """Gather the key-index items of records laid out as ``header`` says.

        ``records`` gives each one's commit-log offset and store time.
        """
        if self._index_from is None:
            return
        name = topic.decode()
        for offset, store_ms in records:
            if offset >= self._index_from:
                self._index_items.extend(
                    _index_items(
                        segment.view, offset - segment.base, header, name, offset, store_ms
                    )
                )

    def _keep(
        self,
        target: _Target,
        offsets: list[int],
        records: list[tuple],
        store_at: int,
        packed: bytes,
    ) -> None:
        """Hold a queue's packed entries for the next flush; write its time marks now.

        ``offsets`` are the records' queue offsets; item ``store_at`` of each of
        ``records`` is its store time.
        """
        count = len(offsets)
        first = offsets[0]
        follows = offsets == list(range(first, first + count))
        if follows:
            interval = TIME_INDEX_INTERVAL
            marks = [
                (qo, records[qo - first][store_at])
                for qo in range(-(-first // interval) * interval, first + count, interval)
            ]
        else:
            marks = [
                (qo, record[store_at])
                for qo, record in zip(offsets, records, strict=True)
                if not qo % TIME_INDEX_INTERVAL
            ]
        if marks:
            self._marks.append((target.queue, marks))
        store_ms = max(map(itemgetter(store_at), records))
        if store_ms > self._last_store_ms:
            self._last_store_ms = store_ms
        if not target.pieces:
            self._pending[target.queue] = target
        target.pieces.append((first, None if follows else offsets, packed))
        self._count += count

    def finish(self) -> None:
        """Hand what was gathered to the dispatchers, as one replayed run."""
        keys = self._index_items
        if keys:
            keys.sort(key=_COMMIT_OFFSET)  # gathered queue by queue
            self._report.indexed_keys += len(keys)
            self._index_items = []
        entries = []
        for target in self._pending.values():
            queue = target.queue
            run_first = run_end = -1
            run: list[bytes] = []
            for first, offsets, packed in target.pieces:
                if offsets is None:
                    if first != run_end:
                        if run:
                            entries.append((queue, run_first, b"".join(run)))
                        run_first, run = first, []
                    run.append(packed)
                    run_end = first + len(packed) // ENTRY_SIZE
                    continue
                for i, queue_offset in enumerate(offsets):
                    if queue_offset != run_end:
                        if run:
                            entries.append((queue, run_first, b"".join(run)))
                        run_first, run = queue_offset, []
                    run.append(packed[i * ENTRY_SIZE : (i + 1) * ENTRY_SIZE])
                    run_end = queue_offset + 1
            if run:
                entries.append((queue, run_first, b"".join(run)))
            target.pieces = []
        self._pending.clear()
        self._count = 0
        marks, self._marks = self._marks, []
        if entries or marks or keys:
            run = Run(REPLAYED, None, 0, entries, marks, keys)
            self._report.redispatched += dispatch_all(self._dispatchers, run)


def _split(items: list, found: list) -> list[tuple]:
    """Group ``items`` by the key found for each (in log order within a group)."""
    distinct = set(found)
    cycle = len(distinct)
    if cycle == 1:
        return [(found[0], items)]
    if found[cycle:] == found[:-cycle]:  # keys taken in turn, as a batch spreads over queues
        return [(found[i], items[i::cycle]) for i in range(cycle)]
    if cycle <= 16:
        return [
            (target, list(compress(items, map(is_, found, repeat(target))))) for target in distinct
        ]
    groups: dict = {}
    for target, item in zip(found, items, strict=True):
        groups.setdefault(target, []).append(item)
    return list(groups.items())


def _interleave(packed: bytearray, at: int, size: int, values: array) -> None:
    """Store ``values`` little-endian at ``at`` in each ENTRY_SIZE-byte entry of ``packed``."""
    assert values.itemsize == size
    if _BIG_ENDIAN:
        values.byteswap()
    raw = values.tobytes()
    for i in range(size):
        packed[at + i :: ENTRY_SIZE] = raw[i::size]


_BIG_ENDIAN = sys.byteorder == "big"
_UNKNOWN = object()


_LENGTH = itemgetter(LENGTH)
_COMMIT_OFFSET = itemgetter(COMMIT_OFFSET)
_QUEUE_OFFSET = itemgetter(QUEUE_OFFSET)
_STORE_MS = itemgetter(STORE_MS)
_QUEUE_ID = itemgetter(QUEUE_ID)
_TOPIC_LEN = itemgetter(TOPIC_LEN)
_TAG_LEN = itemgetter(TAG_LEN)
_FIELD_OFFSET = itemgetter(RUN_COMMIT_OFFSET)
_FIELD_QUEUE_OFFSET = itemgetter(RUN_QUEUE_OFFSET)
_FIELD_QUEUE_ID = itemgetter(RUN_QUEUE_ID)
_KEYS_LEN = itemgetter(KEYS_LEN)
_PROPS_LEN = itemgetter(PROPS_LEN)


def _index_items(
    view, pos: int, header: tuple, name: str, offset: int, store_ms: int
) -> list[tuple]:
    """The key-index items of the record at ``pos``: its keys and its dedup id.

    Only ``header``'s field lengths are used (they may be another record's that shares them).
    """
    topic_len, tag_len, keys_len, props_len = header[META_LENS]
    start = pos + HEADER_SIZE + topic_len + tag_len
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
#: Whether recovery checks a shared topic's entries natively where they are in place
#: (``_Gatherer._replay_blocks``); False: every record the long way (the differential
#: tests hold the two equal).
NATIVE_REPLAY = True
#: Whether an open after a crash looks at a shared topic's queue ends in one native pass
#: (``look_at_ends``) instead of loading every queue first; False: every queue loaded,
#: trimmed and moved in Python (the differential tests hold the two equal).
NATIVE_ENDS = True


def ends_natively(topic: Topic) -> bool:
    """Whether an open after a crash leaves ``topic``'s queues to ``look_at_ends``
    rather than loading them all first: a shared topic not being rebuilt (a rebuilt one's
    queues start at 0 while it is, not at their first block)."""
    return NATIVE_ENDS and topic.blocks is not None and not topic.blocks.rebuilding


def look_at_ends(log: CommitLog, topic: Topic, floor: int) -> int:
    """Load, for recovery's trim, the queues of the shared ``topic`` whose ends an open
    after a crash must look at: those the native pass (``BlockIndex.unsettled_queues``)
    does not find settled, i.e. whose last entry is unwritten, points past the log's
    tail or at a record that is not its own, whose entries do not lie below ``floor`` and
    then at or past it, whose blocks the open's drop of unused block files would judge
    otherwise loaded than not, or whose blocks read otherwise than expected (see
    native/src/python/open_ends.rs). Every other queue is left unloaded: its first use
    loads it and checks it (``MessageStore._on_queue_load``) to the ends the open would
    have given it. Returns how many were settled."""
    blocks = topic.blocks
    queues = topic.queues
    unsettled, settled = blocks.index.unsettled_queues(
        len(queues),
        [queue.queue_id for queue in topic.made_queues() if queue.loaded],
        topic.name_bytes,
        [(first, block_file.fd) for first, block_file in blocks.files.items()],
        blocks.entries_per_block,
        blocks.blocks_per_file,
        blocks.block_bytes,
        [(segment.base, segment.fd, segment.size) for segment in log.segments],
        log.min_offset,
        log.tail,
        floor,
    )
    for queue_id in unsettled:
        queues[queue_id].min_offset  # noqa: B018 - loading is the point
    return settled


def maybe_past_ends(topic: Topic, queues: list[int], positions: list[int]) -> list[int]:
    """For the clamp of group positions after a crash: of ``positions`` (a committed
    position of each of ``queues``, queues of the shared ``topic`` the open left
    unloaded), the indexes of those that may be past their queue's end, read natively
    from each queue's last block (``BlockIndex.maybe_past_ends``); every other position
    is at or below its queue's end. Only those queues are loaded, to decide in Python."""
    blocks = topic.blocks
    return blocks.index.maybe_past_ends(
        queues,
        positions,
        [(first, block_file.fd) for first, block_file in blocks.files.items()],
        blocks.entries_per_block,
        blocks.blocks_per_file,
        blocks.block_bytes,
    )


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
