"""Event streams (EQueue's EventStore) on top of the store: expected-version appends,
command-id uniqueness, reading a stream, and keeping each stream topic's event index in
step with the commit log.

The store calls in here at fixed points, and this module calls nothing of the store but
what it is handed (the commit log, a record reader):

* an append to a stream is checked under the store's write lock (``admit``): the
  writer first takes in what other processes indexed since it last looked, then the
  command id is looked up (``DuplicateCommandError``), then the version compared
  (``WrongExpectedVersionError``); the records are written as one group in one segment
  by the store (the appends of one batch of streams one after another, encoded by the
  data plane from each one's ``row``), then indexed here (``indexed``) before the store
  publishes the tail;
* reads (``version``, ``read``) use the index as it is on disk, never the cache, and
  trust only entries below the tail the reader followed;
* recovery (``recover``, streamrecovery.py) cuts each index where the log's durable,
  checkpointed part ends and indexes the records from there to the tail again;
* a writer that died before publishing left entries past the tail: the next one cuts
  them (``truncate_from``); a flush fsyncs every index before the checkpoint covers it
  (``to_sync``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from zlib import crc32

from . import streamreads
from .commitlog import CommitLog
from .dataplane import stream_hashes
from .errors import (
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
    EventIndex,
    EventIndexDamage,
)
from .eventrecords import (
    STREAM_PROPERTY,
    check_command_id,
    check_events,
    check_stream_id,
    check_version,
    event_properties,
)
from .record import RECORD_OVERHEAD
from .results import Corruption, EventSlice, StoredMessage
from .storestats import StreamStats
from .streamcache import StreamCache, StreamHead
from .streamreads import ChainDamage, damaged, retrying
from .streamrecovery import index_events, recover_indexes, repair_index
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
_PRELOAD_ENTRIES = 1 << 16  # newest index entries read to preload the cache
T = TypeVar("T")


class StreamAppend:
    """An append to one stream, checked as far as it can be without the write lock."""

    __slots__ = (
        "stream_id", "hashed", "bodies", "types", "expected_version", "command_id", "id_bytes",
        "command",
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
        # Its stream id's hash, and its command id's (0: none), as the index stores them.
        self.hashed, self.command = stream_hashes(stream_id, command_id)
        self.bodies = bodies
        self.types = types
        self.expected_version = expected_version
        self.command_id = command_id
        self.id_bytes = stream_id.encode()  # a new stream's queue is chosen by its hash


class StreamBatch(list):
    """Appends to several streams of one topic, written under one hold of the write lock
    (``append_to_streams``); each is checked, and refused, on its own."""


_APPEND_FIELDS = ("stream_id", "events", "expected_version", "command_id", "event_type")


@dataclass
class Admitted:
    """An append that passed its checks, and what writing and indexing it need."""

    index: EventIndex
    head: StreamHead
    chain: list[tuple[int, int]]  # the head's jump chain
    queue: int
    first_version: int
    length: int  # bytes of all its records
    command: int  # its command id's hash (0: none)
    stream_slot: int | None  # the slots' values as read by the checks (None: not read)
    command_slot: int | None


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
        self.slots = slots
        self.log = log
        self._record_at = record_at
        self.record_at = record_at  # the record at a commit offset (None once deleted)
        self._max_bytes = max_message_bytes
        self.cache = StreamCache(cache_streams)
        self._indexes: dict[str, EventIndex] = {}
        self._seen: dict[str, int] = {}  # entries this process has taken in, per topic
        # Topics caught up with during this hold of the write lock (begin_hold).
        self._fresh: set[str] = set()
        self._lock = threading.Lock()  # opening and closing indexes
        # Told (commit offset, sentence) of damage an index finds in use (set by the store
        # to report it as a corruption).
        self.on_damage: Callable[[int, str], None] | None = None
        # Holds the store's write lock, caught up with the others (set by the store): a
        # read that meets a damaged index entry repairs the index under it.
        self.exclusive: Callable[[], AbstractContextManager[None]] | None = None
        # The store's dispatchers (dispatch.py; set by the store): events read back from
        # the log by recovery or a repair are indexed through them.
        self.dispatchers: list = []
        # Topics whose index a lookup found damaged and could not repair then: the next
        # hold of the write lock repairs it before admitting an append to the topic.
        self._damaged: set[str] = set()
        # Topics with an append admitted during this hold: their index is not repaired
        # before the hold ends (the appends laid out name its entries by number).
        self._admitted: set[str] = set()

    # ------------------------------------------------------------- the files

    def path(self, name: str) -> Path:
        return self._root / name / FILE_NAME

    def create_index(self, state: Topic) -> None:
        """The new stream topic's empty index (its directory exists; the caller holds
        the write lock)."""
        info = state.info
        index = EventIndex.create(self.path(info.name), self.slots, info.created_offset, 0)
        self.adopt(info.name, index)

    def adopt(self, name: str, index: EventIndex) -> None:
        """Use ``index`` for the topic from now on (made or checked by the caller)."""
        with self._lock:
            old = self._indexes.pop(name, None)
            if old is not None:
                old.close()
            index.on_damage = self._damage_found
            self._indexes[name] = index
            self._seen[name] = index.count
        self.cache.drop_topic(name)

    def _damage_found(self, commit_offset: int, reason: str) -> None:
        if self.on_damage is not None:
            self.on_damage(commit_offset, reason)

    def opened(self, name: str) -> EventIndex:
        """The index this process has open for the topic (after ``adopt`` or ``index``)."""
        return self._indexes[name]

    def mark_seen(self, name: str) -> None:
        """This process has taken in every entry its topic's index now counts."""
        self._seen[name] = self._indexes[name].count

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
                index.on_damage = self._damage_found
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

    def stats(self, topics: dict[str, Topic]) -> StreamStats:
        """The cache's use, and each stream topic's indexed events."""
        indexed = {}
        # The stream topics picked first, then sorted (not every topic sorted by name).
        streams = sorted(name for name, state in topics.items() if state.info.streams)
        for name in streams:
            try:
                indexed[name] = self.index(topics[name]).read_counters()[0]
            except (StoreFormatError, OSError):
                indexed[name] = None
        return StreamStats(len(self.cache), self.cache.capacity, indexed)

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
        max_bytes: int | None = None,
    ) -> StreamAppend:
        """Check an append's arguments (InvalidMessageError with a sentence); a body is at
        most ``max_bytes`` (the topic's own limit), else the store's."""
        stream_id = check_stream_id(stream_id)
        expected = check_version(expected_version, "expected_version", allow_none=True)
        command = check_command_id(command_id)
        limit = self._max_bytes if max_bytes is None else max_bytes
        bodies, types = check_events(events, event_type, limit)
        return StreamAppend(stream_id, bodies, types, expected, command)

    def begin_hold(self) -> None:
        """A writer took the write lock: catch up again before the next check."""
        self._fresh.clear()
        self._admitted.clear()

    def request_many(self, appends: object, max_bytes: int | None = None) -> StreamBatch:
        """Check the arguments of several appends: each a dict with ``stream_id``,
        ``events`` and, optionally, ``expected_version``, ``command_id`` and
        ``event_type``, or a tuple of those in that order (bodies as ``request``)."""
        if isinstance(appends, (str, bytes, Mapping)) or not isinstance(appends, Iterable):
            raise InvalidMessageError("appends are a list of dicts (or tuples), one per stream")
        batch = StreamBatch()
        for item in appends:
            if isinstance(item, Mapping):
                unknown = set(item) - set(_APPEND_FIELDS)
                if unknown or "stream_id" not in item or "events" not in item:
                    raise InvalidMessageError(
                        f"an append has 'stream_id' and 'events' and may have "
                        f"'expected_version', 'command_id' and 'event_type'; got {sorted(item)}"
                    )
                fields = [item.get(name) for name in _APPEND_FIELDS]
            elif isinstance(item, tuple) and 2 <= len(item) <= len(_APPEND_FIELDS):
                fields = [*item, *[None] * (len(_APPEND_FIELDS) - len(item))]
            else:
                raise InvalidMessageError(
                    "an append is a dict (stream_id, events, expected_version, command_id, "
                    "event_type) or a tuple of them in that order"
                )
            batch.append(self.request(*fields, max_bytes=max_bytes))
        return batch

    def admit(self, state: Topic, append: StreamAppend) -> Admitted:
        """Check an append against the stream under the write lock: the command first (a
        retried command is a duplicate whatever version it expected), then the version.
        Raises DuplicateCommandError, WrongExpectedVersionError, QueueFrozenError,
        MessageTooLargeError; nothing is written. An index found damaged is repaired
        first, unless appends to the topic were admitted already in this hold."""
        name = state.info.name
        if name in self._damaged and name not in self._admitted:
            self._repair(state, None)
        try:
            admitted = self._admit(state, append)
        except ChainDamage as error:
            if name in self._admitted:
                self._damaged.add(name)
                raise
            self._repair(state, error)
            admitted = self._admit(state, append)
        self._admitted.add(name)
        return admitted

    def _repair(self, state: Topic, error: ChainDamage | None) -> None:
        """Repair the topic's index (the caller holds the write lock) and report it;
        raise ``error`` again when there is nothing a check finds to repair."""
        name = state.info.name
        self._damaged.discard(name)
        done = repair_index(self, state, self.log.tail)
        if done is None:
            if error is not None:
                raise error
            return
        self._fresh.discard(name)
        self._damage_found(self.log.tail, done)

    def _answered(self, state: Topic, lookup: Callable[[], T]) -> T:
        """``lookup()`` outside the write lock; when it meets a damaged entry, the index
        is repaired under the write lock (or marked for the next writer, when this
        process cannot take it) and ``lookup()`` asked again."""
        try:
            return lookup()
        except ChainDamage as error:
            if self.exclusive is None:
                self._damaged.add(state.info.name)
                raise
            try:
                with self.exclusive():
                    self._repair(state, error)
            except ChainDamage:
                raise
            except StoreError:  # this process cannot write: the next writer repairs it
                self._damaged.add(state.info.name)
                raise error from None
        return lookup()

    def _admit(self, state: Topic, append: StreamAppend) -> Admitted:
        index = self.index(state)
        name = state.info.name
        if name not in self._fresh:
            self._catch_up(index, name)
        tail = self.log.tail
        head, stream_slot = self._writer_head(index, name, append, tail)
        command = append.command
        command_slot = 0
        if command:
            command_slot = index.command_slot(command)
        if command_slot:  # an empty slot: no command of that hash was ever indexed
            produced = retrying(
                index,
                lambda: streamreads.produced(
                    index, append.stream_id, append.command_id, tail, self._record_at,
                    command_slot,
                ),
            )  # fmt: skip
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
        chain = self.chain_of(index, head)
        head.queue = queue
        first = head.version + 1
        last = first + count - 1
        group = (first, last) if count > 1 else None
        fixed = RECORD_OVERHEAD + len(state.name_bytes)
        fixed += len(event_properties(append.stream_id, 0, append.command_id, group)) - 1
        length = fixed * count + sum(map(len, append.bodies)) + sum(map(len, append.types))
        digits = len(str(first))
        if digits == len(str(last)):
            length += digits * count
        else:
            length += sum(len(str(version)) for version in range(first, last + 1))
        if length > self.log.capacity():
            raise MessageTooLargeError(
                f"the {count} events take {length} bytes on disk; an append's events are "
                f"stored in one commit-log segment, which holds {self.log.capacity()}"
            )
        return Admitted(
            index, head, chain, queue, first, length, command, stream_slot, command_slot
        )

    def row(
        self, append: StreamAppend, admitted: Admitted, queue_offset: int, first_number: int
    ) -> tuple:
        """What ``dataplane.encode_events`` takes for an admitted append whose events go
        to queue offsets from ``queue_offset`` and index entries from ``first_number``
        (the data plane finds their jumps from the stream's jump chain, as ``run_jumps``
        does), and the slots' old values for its last entry to link to."""
        stream_next = admitted.stream_slot
        if stream_next is None:
            stream_next = admitted.index.stream_slot(append.hashed)
        return (
            append.stream_id, append.command_id, admitted.first_version, append.types,
            append.bodies, admitted.queue, queue_offset, append.hashed, admitted.command,
            admitted.head.entry, admitted.chain, stream_next, admitted.command_slot or 0,
        )  # fmt: skip

    def indexed(
        self,
        state: Topic,
        index: EventIndex,
        appends: list[tuple[StreamAppend, Admitted]],
        entries: bytes,
        placed: list[tuple],
        end: int,
    ) -> None:
        """Index the events just written (before the store publishes them; ``end`` is
        where the last one ends): ``entries`` packed by the data plane from the rows
        (``row``) of ``appends``, ``placed`` what it said of each (its last record's
        commit offset, its results, its new jump chain); then remember each stream's new
        head."""
        name = state.info.name
        number = index.count
        links = []
        for append, admitted in appends:
            number += len(append.bodies)
            links.append((append.hashed, admitted.command, number))
        try:
            index.put_runs(entries, links, end)
        except BaseException:
            for append, _admitted in appends:
                self.cache.drop(name, append.hashed)
            raise
        self._seen[name] = index.count
        put = self.cache.put
        for (append, admitted), (_hashed, _command, last), (_packed, start, _results, chain) in zip(
            appends, links, placed, strict=True
        ):
            put(
                name,
                append.hashed,
                StreamHead(append.stream_id, chain[0][0], last, start, admitted.queue, chain),
            )

    def _catch_up(self, index: EventIndex, name: str) -> None:
        """Forget what other processes changed since this one last looked: the streams
        they appended to, or everything after a cut. Once per hold of the write lock."""
        self._fresh.add(name)
        if index.refresh():
            self.cache.drop_topic(name)
        elif index.count > self._seen.get(name, 0):
            for entry in index.entries(self._seen.get(name, 0) + 1, index.count):
                if entry is not None:
                    self.cache.drop(name, entry.stream_hash)
        self._seen[name] = index.count

    def _writer_head(
        self, index: EventIndex, name: str, append: StreamAppend, tail: int
    ) -> tuple[StreamHead, int | None]:
        """The stream's head from the cache, else from the index (then cached); and its
        slot's value, when it was read."""
        head = self.cache.get(name, append.hashed)
        if head is not None:
            if head.stream_id == append.stream_id:
                return head, None
            if head.stream_id is None:  # preloaded: its record says whose it is
                message = self._record_at(head.commit_offset)
                if message is None or message.properties.get(STREAM_PROPERTY) == append.stream_id:
                    head.stream_id = append.stream_id
                    head.queue = message.queue if message is not None else -1
                    return head, None
        slot = index.stream_slot(append.hashed)
        # An empty slot: no stream of that hash was ever indexed.
        head = self.find_head(index, append.stream_id, append.hashed, tail, slot) if slot else None
        if head is None:  # no events yet: cached once it has some (``indexed``)
            return StreamHead(append.stream_id, 0, 0, 0, -1, []), slot
        self.cache.put(name, append.hashed, head)
        return head, slot

    def find_head(
        self, index: EventIndex, stream_id: str, hashed: int, tail: int, slot: int | None = None
    ) -> StreamHead | None:
        """The stream's newest entry below ``tail``, as a head (None: no events)."""
        found = retrying(
            index,
            lambda: streamreads.newest_entry(index, stream_id, tail, self._record_at, slot),
        )
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

    def chain_of(self, index: EventIndex, head: StreamHead) -> list[tuple[int, int]]:
        """The head's jump chain (read from the index unless cached)."""
        if head.chain is not None:
            return head.chain
        if not head.version:
            return []
        entry = index.entry(head.entry)
        if entry is None:
            raise damaged(index, ChainBroken(head.entry))
        try:
            return index.jump_chain(entry)
        except ChainBroken as error:
            raise damaged(index, error) from None

    @staticmethod
    def _queue_for(state: Topic, append: StreamAppend) -> int:
        """A new stream's queue: by the hash of its id among the writable queues."""
        writable = state.writable
        if not writable:
            raise QueueFrozenError(
                f"every queue of {state.info.name!r} is frozen: it takes no new streams"
            )
        return writable[crc32(append.id_bytes) % len(writable)]

    # ---------------------------------------------------------------- reading

    def version(self, state: Topic, stream_id: object, tail: int) -> int:
        """The stream's newest version (0: no events) as of ``tail``."""
        stream_id = check_stream_id(stream_id)
        index = self.index(state)
        found = self._answered(
            state,
            lambda: retrying(
                index, lambda: streamreads.newest_entry(index, stream_id, tail, self._record_at)
            ),
        )
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
        return self._answered(
            state,
            lambda: retrying(
                index,
                lambda: streamreads.read_events(
                    index, state.info.name, stream_id, start, max_count, tail, min_offset,
                    self._record_at, note,
                ),
            ),
        )  # fmt: skip

    # ------------------------------------------------------- upkeep, recovery

    def replayed(self, name: str, found: list[tuple], tail: int) -> int:
        """Index events of topic ``name`` read back from the log, in log order (as
        ``dataplane.Run.events`` gives them; recovery's, a repair's), below ``tail``;
        return how many were indexed (the event dispatcher's, dispatch.py)."""
        count = index_events(self, self.opened(name), name, found, tail)
        self.mark_seen(name)
        return count

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

    def recover(self, topics: Iterable[Topic], dispatched: int | None, tail: int) -> list[dict]:
        """Bring every stream topic's index in step with the log recovery just made
        (``streamrecovery.recover_indexes``); return what was done, per topic."""
        return [report.as_dict() for report in recover_indexes(self, topics, dispatched, tail)]

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


__all__ = [
    "Admitted",
    "StreamAppend",
    "Streams",
]
