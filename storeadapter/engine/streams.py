"""Event streams (EQueue's EventStore) on top of the store: expected-version appends,
command-id uniqueness, reading a stream, and keeping each stream topic's event index in
step with the commit log.

The store calls in here at fixed points, and this module calls nothing of the store but
what it is handed (the commit log, a record reader):

* an append to a stream is checked under the store's write lock (``admit``): the
  writer first takes in what other processes indexed since it last looked, then the
  command id is looked up (``DuplicateCommandError``), then the version compared
  (``WrongExpectedVersionError``); the records are written as one group in one segment
  by the store, then indexed here (``indexed``) before the store publishes the tail;
* reads (``version``, ``read``) use the index as it is on disk, never the cache, and
  trust only entries below the tail the reader followed;
* recovery (``recover``) cuts each index where the log's durable, checkpointed part
  ends and indexes the records from there to the tail again; ``cut_partial_group``
  drops a group a crash left incomplete at the log's end;
* a writer that died before publishing left entries past the tail: the next one cuts
  them (``truncate_from``); a flush fsyncs every index before the checkpoint covers it
  (``to_sync``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from zlib import crc32

from .commitlog import CommitLog
from .errors import (
    CorruptRecordError,
    DuplicateCommandError,
    InvalidMessageError,
    MessageTooLargeError,
    QueueFrozenError,
    StoreError,
    StoreFormatError,
    StreamTopicError,
    WrongExpectedVersionError,
)
from .eventindex import (
    FILE_NAME,
    MAX_VERSION,
    ChainBroken,
    EventEntry,
    EventIndex,
    EventIndexDamage,
    NewEntry,
    command_hash,
    lowest_bit,
    stream_hash,
)
from .eventrecords import (
    COMMAND_PROPERTY,
    check_command_id,
    check_events,
    check_stream_id,
    check_version,
    event_group,
    event_of,
    event_properties,
)
from .record import RECORD_OVERHEAD, decode_record, encode_keys
from .results import AppendResult, Corruption, EventAppendResult, EventSlice, StoredMessage
from .scan import RECORD, scan_segment
from .streamcache import StreamCache, StreamHead
from .tags import tag_hash
from .topics import Topic

RecordReader = Callable[[int], StoredMessage | None]
#: What ``admit`` raises to refuse one append alone (nothing of it was written).
REFUSALS = (
    DuplicateCommandError,
    WrongExpectedVersionError,
    InvalidMessageError,
    StreamTopicError,
    StoreFormatError,
)
MAX_READ_EVENTS = 10_000
_WALK_TRIES = 3
_REBUILD_CHUNK = 4096
_PRELOAD_ENTRIES = 1 << 16  # newest index entries read to preload the cache


class StreamAppend:
    """An append to one stream, checked as far as it can be without the write lock."""

    __slots__ = (
        "stream_id", "hashed", "bodies", "types", "expected_version", "command_id", "keys",
    )  # fmt: skip

    def __init__(
        self,
        stream_id: str,
        bodies: list[bytes],
        types: list[bytes],
        expected_version: int | None,
        command_id: str | None,
    ) -> None:
        self.stream_id = stream_id
        self.hashed = stream_hash(stream_id)
        self.bodies = bodies
        self.types = types
        self.expected_version = expected_version
        self.command_id = command_id
        self.keys = encode_keys([stream_id])


@dataclass
class Admitted:
    """An append that passed its checks: the prepared records and what indexing needs."""

    index: EventIndex
    head: StreamHead
    chain: list[tuple[int, int]]  # the head's jump chain
    prepared: list[tuple]
    length: int  # bytes of all its records


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


class Streams:
    """The event streams of one open store: its stream topics' indexes and the cache."""

    def __init__(
        self,
        root: Path,
        slots: int,
        cache_streams: int,
        log: CommitLog,
        record_at: RecordReader,
        max_message_bytes: int,
    ) -> None:
        self._root = root
        self._slots = slots
        self._log = log
        self._record_at = record_at
        self._max_bytes = max_message_bytes
        self.cache = StreamCache(cache_streams)
        self._indexes: dict[str, EventIndex] = {}
        self._seen: dict[str, int] = {}  # entries this process has taken in, per topic
        self._lock = threading.Lock()  # opening and closing indexes

    # ------------------------------------------------------------- the files

    def path(self, name: str) -> Path:
        return self._root / name / FILE_NAME

    def create_index(self, state: Topic) -> None:
        """The new stream topic's empty index (its directory exists; the caller holds
        the write lock)."""
        info = state.info
        index = EventIndex.create(self.path(info.name), self._slots, info.created_offset, 0)
        self._adopt(info.name, index)

    def _adopt(self, name: str, index: EventIndex) -> None:
        with self._lock:
            old = self._indexes.pop(name, None)
            if old is not None:
                old.close()
            self._indexes[name] = index
            self._seen[name] = index.count
        self.cache.drop_topic(name)

    def index(self, state: Topic) -> EventIndex:
        """The open index of a stream topic (opened on first use)."""
        info = state.info
        if not info.streams:
            raise StreamTopicError(
                f"topic {info.name!r} is not a stream topic: create one with "
                "create_stream_topic to append events"
            )
        index = self._indexes.get(info.name)
        if index is not None and index.created_offset == info.created_offset and not index.closed:
            return index
        with self._lock:
            index = self._indexes.get(info.name)
            if index is None or index.created_offset != info.created_offset or index.closed:
                index = self._open(info.name, info.created_offset)
                old = self._indexes.pop(info.name, None)
                if old is not None:
                    old.close()
                self._indexes[info.name] = index
                self._seen[info.name] = index.count
                self.cache.drop_topic(info.name)
        return index

    def _open(self, name: str, created_offset: int) -> EventIndex:
        path = self.path(name)
        try:
            index = EventIndex.open(path)
        except FileNotFoundError:
            raise StoreFormatError(
                f"the event index of stream topic {name!r} ({path}) is missing; the first "
                "process to open the store rebuilds it from the commit log"
            ) from None
        except EventIndexDamage as error:
            raise StoreFormatError(
                f"the event index of stream topic {name!r} ({path}) is damaged ({error}); "
                "the first process to open the store rebuilds it from the commit log"
            ) from None
        if index.created_offset != created_offset:
            index.close()
            raise StoreFormatError(
                f"the event index {path} belongs to an older topic {name!r}; the first "
                "process to open the store rebuilds it from the commit log"
            )
        return index

    def forget(self, name: str) -> None:
        """The topic is being deleted: close its index."""
        with self._lock:
            index = self._indexes.pop(name, None)
            self._seen.pop(name, None)
            if index is not None:
                index.close()
        self.cache.drop_topic(name)

    def prune(self, topics: dict[str, Topic]) -> None:
        """Close the indexes of topics deleted (or re-created) by other processes."""
        for name, index in list(self._indexes.items()):
            state = topics.get(name)
            if state is None or state.info.created_offset != index.created_offset:
                self.forget(name)

    def stats(self, topics: dict[str, Topic]) -> dict:
        """The cache's use, and each stream topic's indexed events."""
        indexed = {}
        for name, state in sorted(topics.items()):
            if state.info.streams:
                try:
                    indexed[name] = self.index(state).read_counters()[0]
                except (StoreFormatError, OSError):
                    indexed[name] = None
        return {
            "cached_streams": len(self.cache),
            "cache_capacity": self.cache.capacity,
            "indexed_events": indexed,
        }

    def close(self) -> None:
        with self._lock:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
        self.cache.clear()

    # ---------------------------------------------------------------- writing

    def request(
        self,
        stream_id: object,
        events: object,
        expected_version: object,
        command_id: object,
        event_type: object,
    ) -> StreamAppend:
        """Check an append's arguments (InvalidMessageError with a sentence)."""
        stream_id = check_stream_id(stream_id)
        expected = check_version(expected_version, "expected_version", allow_none=True)
        command = check_command_id(command_id)
        bodies, types = check_events(events, event_type, self._max_bytes)
        return StreamAppend(stream_id, bodies, types, expected, command)

    def admit(self, state: Topic, append: StreamAppend) -> Admitted:
        """Check an append against the stream under the write lock and prepare its
        records (the store's prepared-message tuples). Raises DuplicateCommandError,
        WrongExpectedVersionError, QueueFrozenError, MessageTooLargeError."""
        index = self.index(state)
        name = state.info.name
        self._catch_up(index, name)
        tail = self._log.tail
        head = self._writer_head(index, name, append, tail)
        if append.command_id is not None:
            produced = self._produced(index, append.stream_id, append.command_id, tail)
            if produced is not None:
                first, last = produced
                shown = f"version {last}" if first == last else f"versions {first} to {last}"
                raise DuplicateCommandError(
                    f"command {append.command_id!r} was already applied to stream "
                    f"{append.stream_id!r} of {name!r} ({shown}); nothing was appended",
                    append.stream_id,
                    append.command_id,
                    last,
                    first,
                )
        expected = append.expected_version
        if expected is not None and expected != head.version:
            raise WrongExpectedVersionError(
                f"stream {append.stream_id!r} of {name!r} is at version {head.version}, "
                f"not {expected}; nothing was appended",
                append.stream_id,
                expected,
                head.version,
            )
        count = len(append.bodies)
        if head.version + count > MAX_VERSION:
            raise InvalidMessageError(
                f"stream {append.stream_id!r} would pass version {MAX_VERSION}, the most a "
                "stream can hold"
            )
        queue = head.queue if head.version and head.queue >= 0 else self._queue_for(state, append)
        if queue in state.info.frozen:
            raise QueueFrozenError(
                f"stream {append.stream_id!r} of {name!r} lives in queue {queue}, which is "
                "frozen: it takes no new events"
            )
        chain = self._chain_of(index, head)
        head.queue = queue
        first = head.version + 1
        group = (first, first + count - 1) if count > 1 else None
        keys = append.keys
        fixed = RECORD_OVERHEAD + len(state.name_bytes) + len(keys)
        prepared = []
        length = 0
        for i, (body, kind) in enumerate(zip(append.bodies, append.types, strict=True)):
            properties = event_properties(first + i, append.command_id, group)
            length += fixed + len(kind) + len(properties) + len(body)
            prepared.append(
                (queue, None, kind, keys, properties, body, None, tag_hash(kind),
                 (append.stream_id,), None)
            )  # fmt: skip
        if length > self._log.capacity():
            raise MessageTooLargeError(
                f"the {count} events take {length} bytes on disk; an append's events are "
                f"stored in one commit-log segment, which holds {self._log.capacity()}"
            )
        return Admitted(index, head, chain, prepared, length)

    def indexed(
        self, state: Topic, append: StreamAppend, admitted: Admitted, results: list[AppendResult]
    ) -> list[EventAppendResult]:
        """Index the events just written (before the store publishes them) and remember
        the stream's new head; return the events' results."""
        index = admitted.index
        head = admitted.head
        name = state.info.name
        chain = admitted.chain
        command = 0
        if append.command_id is not None:
            command = command_hash(append.stream_id, append.command_id)
        number = index.count + 1
        previous = head.entry
        version = head.version
        new = []
        last = len(results) - 1
        for i, result in enumerate(results):
            version += 1
            chain = _next_chain(chain, version, number)
            jump = chain[1][1] if len(chain) > 1 else 0
            new.append(
                NewEntry(result.commit_offset, append.hashed, command, version, previous, jump,
                         i == last, i == last and command != 0)
            )  # fmt: skip
            previous = number
            number += 1
        last_result = results[-1]
        try:
            index.put(new, last_result.commit_offset + _record_end(state, admitted, last))
        except BaseException:
            self.cache.drop(name, append.hashed)
            raise
        self._seen[name] = index.count
        self.cache.put(
            name,
            append.hashed,
            StreamHead(
                append.stream_id, version, previous, last_result.commit_offset, head.queue, chain
            ),
        )
        first = head.version + 1
        return [
            EventAppendResult(*result, append.stream_id, first + i)
            for i, result in enumerate(results)
        ]

    def _catch_up(self, index: EventIndex, name: str) -> None:
        """Forget what other processes changed since this one last looked: the streams
        they appended to, or everything after a cut."""
        if index.refresh():
            self.cache.drop_topic(name)
        elif index.count > self._seen.get(name, 0):
            for entry in index.entries(self._seen.get(name, 0) + 1, index.count):
                if entry is not None:
                    self.cache.drop(name, entry.stream_hash)
        self._seen[name] = index.count

    def _writer_head(
        self, index: EventIndex, name: str, append: StreamAppend, tail: int
    ) -> StreamHead:
        """The stream's head from the cache, else from the index (then cached)."""
        head = self.cache.get(name, append.hashed)
        if head is not None:
            if head.stream_id == append.stream_id:
                return head
            if head.stream_id is None:  # preloaded: its record says whose it is
                message = self._record_at(head.commit_offset)
                if message is None or message.keys[:1] == [append.stream_id]:
                    head.stream_id = append.stream_id
                    head.queue = message.queue if message is not None else -1
                    return head
        head = self._find_head(index, append.stream_id, append.hashed, tail)
        if head is None:
            head = StreamHead(append.stream_id, 0, 0, 0, -1, [])
        self.cache.put(name, append.hashed, head)
        return head

    def _find_head(
        self, index: EventIndex, stream_id: str, hashed: int, tail: int
    ) -> StreamHead | None:
        """The stream's newest entry below ``tail``, as a head (None: no events)."""
        found = self._newest_entry(index, stream_id, hashed, tail)
        if found is None:
            return None
        entry, message = found
        return StreamHead(
            stream_id,
            entry.version,
            entry.number,
            entry.commit_offset,
            message.queue if message is not None else -1,
        )

    def _newest_entry(
        self, index: EventIndex, stream_id: str, hashed: int, tail: int
    ) -> tuple[EventEntry, StoredMessage | None] | None:
        for _ in range(_WALK_TRIES):
            try:
                for entry in index.stream_candidates(hashed, tail):
                    message = self._record_at(entry.commit_offset)
                    # A record retention deleted cannot say whose it is: the 64-bit hash does.
                    if message is None or message.keys[:1] == [stream_id]:
                        return entry, message
                return None
            except ChainBroken as broken:
                error = broken
        raise self._damaged(index, error)

    def _produced(
        self, index: EventIndex, stream_id: str, command_id: str, tail: int
    ) -> tuple[int, int] | None:
        """(first, last) version the command produced in the stream, or None."""
        hashed = command_hash(stream_id, command_id)
        wanted = stream_hash(stream_id)
        for _ in range(_WALK_TRIES):
            try:
                for entry in index.command_candidates(hashed, tail):
                    if entry.stream_hash != wanted:
                        continue
                    message = self._record_at(entry.commit_offset)
                    if message is not None and (
                        message.keys[:1] != [stream_id]
                        or message.properties.get(COMMAND_PROPERTY) != command_id
                    ):
                        continue
                    first = entry
                    while first.previous:
                        before = index.entry(first.previous)
                        if before is None or before.command_hash != hashed:
                            break
                        first = before
                    return first.version, entry.version
                return None
            except ChainBroken as broken:
                error = broken
        raise self._damaged(index, error)

    def _chain_of(self, index: EventIndex, head: StreamHead) -> list[tuple[int, int]]:
        """The head's jump chain (read from the index unless cached)."""
        if head.chain is not None:
            return head.chain
        if not head.version:
            return []
        entry = index.entry(head.entry)
        if entry is None:
            raise self._damaged(index, ChainBroken(head.entry))
        try:
            return index.jump_chain(entry)
        except ChainBroken as error:
            raise self._damaged(index, error) from None

    @staticmethod
    def _queue_for(state: Topic, append: StreamAppend) -> int:
        """A new stream's queue: by the hash of its id among the writable queues."""
        writable = state.writable
        if not writable:
            raise QueueFrozenError(
                f"every queue of {state.info.name!r} is frozen: it takes no new streams"
            )
        return writable[crc32(append.keys) % len(writable)]

    def _damaged(self, index: EventIndex, error: ChainBroken) -> StoreFormatError:
        return StoreFormatError(
            f"the event index {index.path} is damaged (a chain breaks at {error}); close "
            "every process using the store and delete the file: the first to open the "
            "store again rebuilds it from the commit log"
        )

    # ---------------------------------------------------------------- reading

    def version(self, state: Topic, stream_id: object, tail: int) -> int:
        """The stream's newest version (0: no events) as of ``tail``."""
        stream_id = check_stream_id(stream_id)
        found = self._newest_entry(self.index(state), stream_id, stream_hash(stream_id), tail)
        return 0 if found is None else found[0].version

    def read(
        self,
        state: Topic,
        stream_id: object,
        from_version: object,
        max_count: object,
        tail: int,
        min_offset: int,
        note: Callable[[Corruption], None],
    ) -> EventSlice:
        """Events of the stream from ``from_version`` on, at most ``max_count``, as of
        ``tail``; retention's cut is said in the answer (EventSlice)."""
        stream_id = check_stream_id(stream_id)
        start = check_version(from_version, "from_version", allow_none=False)
        if start < 1:
            raise InvalidMessageError("from_version is 1 or more")
        if (
            not isinstance(max_count, int)
            or isinstance(max_count, bool)
            or not 1 <= max_count <= MAX_READ_EVENTS
        ):
            raise StoreError(f"max_count must be 1 to {MAX_READ_EVENTS}, not {max_count!r}")
        index = self.index(state)
        hashed = stream_hash(stream_id)
        for _ in range(_WALK_TRIES):
            try:
                return self._read(index, state, stream_id, hashed, start, max_count, tail,
                                  min_offset, note)  # fmt: skip
            except ChainBroken as broken:
                error = broken
        raise self._damaged(index, error)

    def _read(self, index, state, stream_id, hashed, start, max_count, tail, min_offset, note):
        found = self._newest_entry(index, stream_id, hashed, tail)
        if found is None:
            return EventSlice([], 0, 1, False)
        newest = found[0]
        first_kept = self._first_kept(index, newest, min_offset)
        begin = max(start, first_kept)
        if begin > newest.version:
            return EventSlice([], newest.version, first_kept, start < first_kept)
        end = min(newest.version, begin + max_count - 1)
        entry = index.find_version(newest, end)
        entries = []
        while entry is not None and entry.version >= begin:
            entries.append(entry)
            if entry.version == begin or not entry.previous:
                break
            entry = index.entry(entry.previous)
            if entry is None:
                raise ChainBroken(entries[-1].previous)
        events = []
        for entry in reversed(entries):
            message = self._record_at(entry.commit_offset)
            event = event_of(message) if message is not None else None
            if (
                event is None
                or event.stream_id != stream_id
                or event.version != entry.version
                or message.topic != state.info.name
            ):
                if entry.commit_offset >= min_offset:
                    note(
                        Corruption(
                            entry.commit_offset,
                            0,
                            f"version {entry.version} of stream {stream_id!r} in "
                            f"{state.info.name!r}: its record is damaged or not this event",
                        )
                    )
                continue
            events.append(event)
        return EventSlice(events, newest.version, first_kept, start < first_kept)

    def _first_kept(self, index: EventIndex, newest: EventEntry, min_offset: int) -> int:
        """The stream's oldest version whose record retention has not deleted (past the
        newest when all were): versions' records are in log order, so a binary search."""
        oldest = self._oldest_entry(index, newest)
        if oldest.commit_offset >= min_offset:
            return oldest.version
        if newest.commit_offset < min_offset:
            return newest.version + 1
        low, high = oldest.version, newest.version  # low is deleted, high is kept
        while high - low > 1:
            middle = (low + high) // 2
            entry = index.find_version(newest, middle)
            if entry is None or entry.commit_offset < min_offset:
                low = middle
            else:
                high = middle
        return high

    @staticmethod
    def _oldest_entry(index: EventIndex, newest: EventEntry) -> EventEntry:
        """Version 1's entry, or the oldest the index has (it lost older ones)."""
        entry = index.find_version(newest, 1)
        if entry is not None:
            return entry
        entry = newest
        while entry.previous:
            before = index.entry(entry.previous)
            if before is None:
                raise ChainBroken(entry.previous)
            entry = before
        return entry

    # ------------------------------------------------------- upkeep, recovery

    def truncate_from(self, topics: dict[str, Topic], offset: int) -> None:
        """Cut every stream topic's index at ``offset`` (a dead writer's entries past
        the published tail); the caller holds the write lock."""
        for state in topics.values():
            if state.info.streams:
                try:
                    index = self.index(state)
                except StoreFormatError:
                    continue  # rebuilt from the log by the next recovery
                if index.truncate_from(offset):
                    self.cache.drop_topic(state.info.name)
                self._seen[state.info.name] = index.count

    def to_sync(self, topics: dict[str, Topic], tail: int) -> list[EventIndex]:
        """Every stream topic's index, each told that the log below ``tail`` (this
        process's followed tail) is indexed: the flush fsyncs them before its checkpoint
        says so. Indexes that cannot be opened are left out (recovery rebuilds them)."""
        self.prune(topics)
        found = []
        for state in list(topics.values()):
            if not state.info.streams:
                continue
            try:
                index = self.index(state)
                index.note_indexed_to(tail)
            except (StoreFormatError, OSError):
                continue
            found.append(index)
        return found

    def recover(
        self, topics: Iterable[Topic], dispatched: int | None, tail: int
    ) -> list[IndexRecovery]:
        """Bring every stream topic's index in step with the recovered log (the store is
        open by this process alone): entries from the checkpoint's ``dispatched`` offset
        on (or from the index's own ``indexed_to``, when lower) are cut and indexed again
        from the log; a missing or damaged index is made again from the topic's start."""
        reports = []
        streams = [state for state in topics if state.info.streams]
        starts: dict[str, int] = {}
        for state in streams:
            info = state.info
            report = IndexRecovery(info.name)
            reports.append(report)
            path = self.path(info.name)
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
                first = max(info.created_offset, self._log.min_offset)
                index = EventIndex.create(path, self._slots, info.created_offset, first)
                start = first
            else:
                # Below the checkpoint (fsynced before it was written) and below what the
                # index says it covers, its entries are trusted; the rest is done again.
                # Without a checkpoint nothing of it is known durable.
                start = self._log.min_offset
                if dispatched is not None:
                    start = max(start, min(index.indexed_to, dispatched, tail))
                start = max(start, info.created_offset)
                report.entries_cut = index.truncate_from(start)
            report.cut_from = start
            self._adopt(info.name, index)
            starts[info.name] = start
        if streams:
            counts = self.rebuild(streams, starts, tail)
            for report in reports:
                report.events_indexed = counts.get(report.topic, 0)
                index = self._indexes[report.topic]
                index.note_indexed_to(tail)
        return reports

    def rebuild(self, states: list[Topic], starts: dict[str, int], tail: int) -> dict[str, int]:
        """Index the events of ``states`` whose records lie from their start offset up to
        ``tail`` (each index already cut there); return how many per topic."""
        by_bytes = {state.name_bytes: state for state in states}
        begin = min(starts.values())
        counts: dict[str, int] = {}
        pending: dict[str, list[tuple[StoredMessage, int]]] = {}
        waiting = 0
        for offset, header, segment in _records(self._log, begin, tail):
            topic_len = header[9]
            pos = offset - segment.base
            topic = bytes(segment.view[pos + 56 : pos + 56 + topic_len])
            state = by_bytes.get(topic)
            if state is None or offset < starts[state.info.name]:
                continue
            try:
                message = decode_record(segment.view, pos, segment.size, offset, "")
            except CorruptRecordError:
                continue
            pending.setdefault(state.info.name, []).append((message, offset))
            waiting += 1
            if waiting >= _REBUILD_CHUNK:
                self._index_found(by_bytes, pending, counts, tail)
                pending = {}
                waiting = 0
        self._index_found(by_bytes, pending, counts, tail)
        return counts

    def _index_found(self, by_bytes, pending, counts, tail) -> None:
        for name, found in pending.items():
            index = self._indexes[name]
            counts[name] = counts.get(name, 0) + self._index_records(index, name, found, tail)
            self._seen[name] = index.count

    def _index_records(
        self, index: EventIndex, name: str, found: list[tuple[StoredMessage, int]], tail: int
    ) -> int:
        """Append entries for events read back from the log, in log order."""
        heads: dict[int, StreamHead] = {}
        new: list[NewEntry] = []
        number = index.count + 1
        for message, offset in found:
            event = event_of(message)
            if event is None:
                continue
            hashed = stream_hash(event.stream_id)
            head = heads.get(hashed)
            if head is None or head.stream_id != event.stream_id:
                head = self.cache.get(name, hashed)
                if head is None or head.stream_id != event.stream_id:
                    head = self._find_head(index, event.stream_id, hashed, offset)
                if head is None:
                    head = StreamHead(event.stream_id, 0, 0, 0, message.queue, [])
                head = StreamHead(
                    event.stream_id, head.version, head.entry, head.commit_offset, head.queue,
                    self._chain_of(index, head) if head.version else [],
                )  # fmt: skip
                heads[hashed] = head
            if event.version <= head.version:
                continue  # a version the stream already has (never written twice)
            chain = head.chain
            if event.version != head.version + 1:
                chain = []  # versions between were lost: the chain starts again here
            chain = _next_chain(chain, event.version, number)
            jump = chain[1][1] if len(chain) > 1 else 0
            command = 0
            if event.command_id is not None:
                command = command_hash(event.stream_id, event.command_id)
            previous = head.entry if event.version == head.version + 1 else 0
            new.append(
                NewEntry(offset, hashed, command, event.version, previous, jump, True, command != 0)
            )
            heads[hashed] = StreamHead(
                event.stream_id, event.version, number, offset, message.queue, chain
            )
            number += 1
        if new:
            index.put(new, min(tail, new[-1].commit_offset + 1))
        for hashed, head in heads.items():
            if head.version:
                self.cache.put(name, hashed, head)
        return len(new)

    def preload(self, topics: dict[str, Topic]) -> int:
        """Seed the cache with the most recently written streams of every stream topic
        (the newest entries of each index, newest first); return how many."""
        seeded = 0
        for state in topics.values():
            if not state.info.streams or len(self.cache) >= self.cache.capacity:
                continue
            try:
                index = self.index(state)
                self._catch_up(index, state.info.name)
            except (StoreFormatError, OSError):
                continue
            room = self.cache.capacity - len(self.cache)
            first = max(1, index.count - min(2 * room, _PRELOAD_ENTRIES) + 1)
            for entry in reversed(list(index.entries(first, index.count))):
                if entry is None:
                    continue
                head = StreamHead(None, entry.version, entry.number, entry.commit_offset, -1)
                if self.cache.seed(state.info.name, entry.stream_hash, head):
                    seeded += 1
                elif len(self.cache) >= self.cache.capacity:
                    break
        return seeded


def _next_chain(chain: list[tuple[int, int]], version: int, number: int) -> list[tuple[int, int]]:
    """The jump chain of ``version`` (entry ``number``) from the chain of the version
    before it, which holds ``version - lowbit(version)`` and everything below it."""
    target = version - lowest_bit(version)
    if not target:
        return [(version, number)]
    for i, (held, _entry) in enumerate(chain):
        if held == target:
            return [(version, number), *chain[i:]]
        if held < target:
            break
    return [(version, number)]  # the target was lost (a gap): no jump


def _record_end(state: Topic, admitted: Admitted, position: int) -> int:
    """The length of the ``position``th prepared record of ``admitted``."""
    item = admitted.prepared[position]
    return (
        RECORD_OVERHEAD
        + len(state.name_bytes)
        + len(item[2])
        + len(item[3])
        + len(item[4])
        + len(item[5])
    )


def _records(log: CommitLog, begin: int, end: int) -> Iterator[tuple[int, tuple, object]]:
    """(commit offset, header, segment) of each intact record from ``begin`` to ``end``."""
    for position, segment in enumerate(list(log.segments)):
        if segment.end <= begin or segment.base >= end:
            continue
        sealed = position < len(log.segments) - 1
        start = max(begin, segment.base) - segment.base
        for event in scan_segment(segment, start, sealed):
            if event.offset >= end:
                return
            if event.kind == RECORD:
                yield event.offset, event.header, segment


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
    return int.from_bytes(segment.view[end - 4 : end], "little")


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


__all__ = [
    "Admitted",
    "IndexRecovery",
    "StreamAppend",
    "Streams",
    "cut_partial_group",
]
