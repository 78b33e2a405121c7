"""Recovery of the event indexes, by the process that opens the store alone, after the
commit log's own recovery (recovery.py):

1. the log's end: an append of several events a crash kept in part is dropped whole
   (``cut_partial_group``, which ``recovery.recover`` calls before it cuts the other
   indexes at the tail);
2. each stream topic's index is cut where it can no longer be trusted: at the
   checkpoint's ``dispatched`` offset (the index was fsynced before the checkpoint was
   written), or lower where the index's own ``indexed_to`` says so, or after the last
   whole append before entries at its end that fail their check (never inside an
   append: ``_cut_after_whole_append``, as a lookup's ``repair_index`` cuts); a missing
   or damaged index is made again, empty, from the topic's first record still in the log;
3. the events from there to the tail are read back from the log (scanned natively, the
   events' fields read from the records' properties by the data plane) and indexed
   again, in log order, a chunk at a time (``rebuild``).

Each step gives the same result when run again, so a recovery killed in the middle is
done again by the next opener.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import dataplane
from .commitlog import CommitLog
from .dataplane import NATIVE_RUN
from .dispatch import REPLAYED, Run, dispatch_all
from .errors import CorruptRecordError
from .eventindex import (
    EventEntry,
    EventIndex,
    EventIndexDamage,
    NewEntry,
    next_chain,
)
from .eventrecords import event_group, event_of
from .record import RECORD_OVERHEAD, decode_record, trailing_length
from .results import StoredMessage
from .streamcache import StreamHead
from .topics import Topic

if TYPE_CHECKING:
    from .streams import Streams

_REBUILD_CHUNK = 4096


@dataclass
class IndexRecovery:
    """What recovery did to one stream topic's event index (in ``recovery.json``)."""

    topic: str
    cut_from: int = 0
    entries_cut: int = 0
    events_indexed: int = 0
    rebuilt: str | None = None  # why the whole index was rebuilt, if it was
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "topic": self.topic,
            "cut_from": self.cut_from,
            "entries_cut": self.entries_cut,
            "events_indexed": self.events_indexed,
            "rebuilt": self.rebuilt,
            "problems": self.problems,
        }


def recover_indexes(
    streams: Streams, topics: Iterable[Topic], dispatched: int | None, tail: int
) -> list[IndexRecovery]:
    """Bring every stream topic's index in step with the recovered log (the store is
    open by this process alone): entries from the checkpoint's ``dispatched`` offset
    on (or from the index's own ``indexed_to``, when lower) are cut and indexed again
    from the log; a missing or damaged index is made again from the topic's start."""
    reports = []
    states = [state for state in topics if state.info.streams]
    starts: dict[str, int] = {}
    boundaries: list[int] = []
    for state in states:
        info = state.info
        report = IndexRecovery(info.name)
        reports.append(report)
        path = streams.path(info.name)
        index = None
        try:
            index = EventIndex.open(path)
            if index.created_offset != info.created_offset:
                report.rebuilt = "it belonged to an older topic of the same name"
        except FileNotFoundError:
            report.rebuilt = "it was missing"
        except EventIndexDamage as error:
            report.rebuilt = f"it was damaged ({error})"
        if report.rebuilt is not None:
            if index is not None:
                index.close()
            first = max(info.created_offset, streams.log.min_offset)
            index = EventIndex.create(path, streams.slots, info.created_offset, first)
            start = first
        else:
            # Below the checkpoint (fsynced before it was written) and below what the
            # index says it covers, its entries are trusted; the rest is done again.
            # Without a checkpoint nothing of it is known durable.
            start = streams.log.min_offset
            if dispatched is not None:
                start = max(start, min(index.indexed_to, dispatched, tail))
            start = max(start, info.created_offset)
            kept, damaged = index.kept_below(start)
            if damaged:
                report.entries_cut, boundary, start = _cut_after_whole_append(
                    streams, index, info.created_offset, kept
                )
                boundaries.append(boundary)
            else:
                report.entries_cut = index.truncate_from(start)
                start = max(
                    min(start, index.indexed_to), streams.log.min_offset, info.created_offset
                )
        report.cut_from = start
        streams.adopt(info.name, index)
        starts[info.name] = start
    if states:
        scan_from = min([*boundaries, *starts.values()])
        counts = rebuild(streams, states, starts, tail, scan_from)
        for report in reports:
            report.events_indexed = counts.get(report.topic, 0)
            index = streams.opened(report.topic)
            index.note_indexed_to(tail)
    return reports


def repair_index(streams: Streams, state: Topic, tail: int) -> str | None:
    """Repair a stream topic's index in which a lookup met an entry failing its check
    (the caller holds the write lock): cut it after the last intact entry before the
    first failing one, and index the events again from that entry's record (a boundary
    its check vouches for) up to ``tail``. Return what was done, or None when no entry
    fails its check (damage a check cannot see: not repaired here)."""
    info = state.info
    index = streams.index(state)
    index.refresh()
    first_bad = next(
        (number for number, entry in enumerate(index.entries(1, index.count), 1) if entry is None),
        None,
    )
    if first_bad is None:
        return None
    cut, start, after = _cut_after_whole_append(streams, index, info.created_offset, first_bad - 1)
    streams.cache.drop_topic(info.name)  # heads may name entries cut
    streams.mark_seen(info.name)
    indexed = rebuild(streams, [state], {info.name: after}, tail, start).get(info.name, 0)
    index.note_indexed_to(tail)
    return (
        f"the event index {index.path} has entry {first_bad} failing its check: {cut} "
        f"entries cut (from the whole append before it on), {indexed} events indexed again "
        f"from offset {after}"
    )


def _cut_after_whole_append(
    streams: Streams, index: EventIndex, created_offset: int, number: int
) -> tuple[int, int, int]:
    """Where an index whose entries after ``number`` fail their check, or cannot be
    trusted, is cut: after the last whole append up to entry ``number`` (only an
    append's last entry is linked into the slots, so a cut inside an append would leave
    a slot at an entry that links to nothing). Cut it there; return how many entries
    were cut, the record boundary to scan the log from, and the offset from which
    events are indexed again (past the kept entry's record, which stays indexed)."""
    kept = _before_its_group(streams, index, number)
    cut = index.truncate_from(kept.commit_offset + 1 if kept is not None else created_offset)
    start = max(index.indexed_to, streams.log.min_offset, created_offset)
    after = start + 1 if kept is not None and start == kept.commit_offset else start
    return cut, start, after


def _before_its_group(streams: Streams, index: EventIndex, number: int) -> EventEntry | None:
    """Entry ``number``, or the entry before its append's first when it is not its
    append's last: only an append's last entry is linked into the slots, so the index
    is never cut inside an append (None: cut it whole)."""
    while number > 0:
        entry = index.entry(number)
        message = streams.record_at(entry.commit_offset)
        group = event_group(message) if message is not None else None
        if group is None or entry.version >= group[1]:
            return entry
        number -= entry.version - group[0] + 1
    return None


def rebuild(
    streams: Streams,
    states: list[Topic],
    starts: dict[str, int],
    tail: int,
    scan_from: int | None = None,
) -> dict[str, int]:
    """Index the events of ``states`` whose records lie from their start offset up to
    ``tail`` (each index already cut there); return how many per topic. The log is
    scanned natively, and each run of intact records gives its events
    (``Run.events``: what ``eventrecords.event_of`` finds, read from the properties the
    scan kept), so no record is decoded in Python. The scan starts at ``scan_from``
    (a record boundary) when given, else at the lowest start."""
    topics = [state.name_bytes for state in states]
    names = [state.info.name for state in states]
    froms = [starts[name] for name in names]
    begin = min(froms) if scan_from is None else scan_from
    counts: dict[str, int] = {}
    pending: dict[str, list[tuple]] = {}
    waiting = 0
    for run in _runs(streams.log, begin, tail):
        for event in run.events(topics):
            offset, topic = event[0], event[1]
            if offset >= tail:
                break
            if offset < froms[topic]:
                continue
            pending.setdefault(names[topic], []).append(event)
            waiting += 1
        if waiting >= _REBUILD_CHUNK:
            _index_found(streams, pending, counts, tail)
            pending = {}
            waiting = 0
    _index_found(streams, pending, counts, tail)
    return counts


def _index_found(streams: Streams, pending: dict, counts: dict[str, int], tail: int) -> None:
    """Hand each topic's events found to the store's dispatchers (dispatch.py), as a
    replayed run; count those indexed."""
    for name, found in pending.items():
        run = Run(REPLAYED, None, tail, [], events=(name, found))
        counts[name] = counts.get(name, 0) + dispatch_all(streams.dispatchers, run)


def index_events(
    streams: Streams,
    index: EventIndex,
    name: str,
    found: list[tuple],
    tail: int,
) -> int:
    """Append entries for events read back from the log, in log order: each as
    ``Run.events`` gives it."""
    heads: dict[int, StreamHead] = {}
    new: list[NewEntry] = []
    number = index.count + 1
    for offset, _topic, queue, stream_id, version, _command_id, hashed, command in found:
        head = heads.get(hashed)
        if head is None or head.stream_id != stream_id:
            head = streams.cache.get(name, hashed)
            if head is None or head.stream_id != stream_id:
                head = streams.find_head(index, stream_id, hashed, offset)
            if head is None:
                head = StreamHead(stream_id, 0, 0, 0, queue, [])
            head = StreamHead(
                stream_id, head.version, head.entry, head.commit_offset, head.queue,
                streams.chain_of(index, head) if head.version else [],
            )  # fmt: skip
            heads[hashed] = head
        if version <= head.version:
            continue  # a version the stream already has (never written twice)
        chain = head.chain
        if version != head.version + 1:
            chain = []  # versions between were lost: the chain starts again here
        chain = next_chain(chain, version, number)
        jump = chain[1][1] if len(chain) > 1 else 0
        previous = head.entry if version == head.version + 1 else 0
        new.append(NewEntry(offset, hashed, command, version, previous, jump, True, command != 0))
        heads[hashed] = StreamHead(stream_id, version, number, offset, queue, chain)
        number += 1
    if new:
        index.put(new, min(tail, new[-1].commit_offset + 1))
    for hashed, head in heads.items():
        if head.version:
            streams.cache.put(name, hashed, head)
    return len(new)


def _runs(log: CommitLog, begin: int, end: int) -> Iterator:
    """The runs of intact records (``dataplane.Run``) from ``begin`` to ``end`` (the
    last may run past it), as ``scan.scan_segment`` finds the records."""
    for position, segment in enumerate(list(log.segments)):
        if segment.end <= begin or segment.base >= end:
            continue
        sealed = position < len(log.segments) - 1
        start = max(begin, segment.base) - segment.base
        for event in dataplane.scan_runs(segment, start, sealed):
            if event.offset >= end:
                return
            if event.kind == NATIVE_RUN:
                yield event.header


def cut_partial_group(
    log: CommitLog, tail: int, durable_end: int, is_stream_topic: Callable[[bytes], bool]
) -> int:
    """Where the log must end so that no append of several events is kept in part: the
    start of the group the last record before ``tail`` belongs to, when the group's last
    event is missing (a crash tore the write), else ``tail``. Never below ``durable_end``.

    A group is written whole into one segment, its records one after another, so its
    start is found by walking back by the records' trailing lengths.
    """
    found = log.locate(tail - 1) if tail > 0 else None
    if found is None:
        return tail
    segment, last_byte = found
    end = last_byte + 1
    message = _record_ending_at(segment, end, is_stream_topic)
    event = event_of(message) if message is not None else None
    group = event_group(message) if event is not None else None
    if group is None or event.version >= group[1]:
        return tail
    start = end - message_length(segment, end)
    version = event.version
    while version > group[0]:
        before = _record_ending_at(segment, start, is_stream_topic)
        earlier = event_of(before) if before is not None else None
        if (
            earlier is None
            or earlier.stream_id != event.stream_id
            or earlier.version != version - 1
        ):
            return tail  # not the group as it was written: leave it (verify reports it)
        start -= message_length(segment, start)
        version -= 1
    cut = segment.base + start
    return cut if cut >= durable_end else tail


def message_length(segment, end: int) -> int:
    """The length of the record ending at ``end`` (its trailer repeats it)."""
    return trailing_length(segment.view, end)


def _record_ending_at(segment, end: int, is_stream_topic) -> StoredMessage | None:
    if end < RECORD_OVERHEAD:
        return None
    length = message_length(segment, end)
    start = end - length
    if length < RECORD_OVERHEAD or start < 0:
        return None
    try:
        message = decode_record(segment.view, start, segment.size, segment.base + start, "")
    except CorruptRecordError:
        return None
    return message if is_stream_topic(message.topic.encode()) else None


__all__ = ["IndexRecovery", "cut_partial_group", "recover_indexes"]
