"""Dispatch: what a run of records in the commit log puts into the store's indexes,
named once (RocketMQ's ``dispatcherList``).

A ``Run`` says what a batch of records laid in the log means for each index: the
consume-queue entries of each queue (packed, 20 bytes each), the queues' time marks,
the key-index items, the event-index entries of a stream topic's appends, and where
the run ends in the log. Whoever has such a run hands it to every dispatcher of the
store's one list (``dispatchers``, made by ``make_dispatchers``), in the list's order:

- the writer, for the records it just wrote (``WRITTEN``);
- recovery, for the intact records its scan found (``REPLAYED``: an entry is written
  only where the file holds something else), the restore of a queue's lost end, and
  the event indexes' recovery and repair (events read back from the log);
- the catch-up, for what other processes wrote and published (``FOLLOWED``: the
  entries are on disk already; the queue's end is raised and its files marked for
  this process's flush).

Undoing is named once too: ``truncate_from(offset, extent)`` removes from each index
what records at or past ``offset`` put there (a writer that died or failed before
publishing wrote them, up to ``extent``; their records are still in the log, and are
cleared after every dispatcher let go of them). It returns how many entries went,
where the index counts them. Recovery's own cuts (a queue trimmed against the log, the
key index at the tail, an event index where it stops being trusted) keep their trust
rules and are not made through the list.

One dispatcher per index, in the order they are written: the time index, the key
index, the event index, then the queue entries (per-queue files or a shared topic's
blocks), whose shared blocks' allocation end is published last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from .blockqueue import BlockQueue
from .follow import mark_written, unpublished_records
from .queuebase import ENTRY_SIZE, seal_entries
from .seam import Watched

if TYPE_CHECKING:
    from .commitlog import CommitLog
    from .keyindex import KeyIndex
    from .streams import Streams
    from .topics import Topic, TopicRegistry

# What a run's records are to this process.
WRITTEN = 0  # it just wrote them: their entries are new
REPLAYED = 1  # recovery found them in the log: entries are written where they differ
FOLLOWED = 2  # another process wrote them: entries are on disk; ends are taken in


class Run(NamedTuple):
    """A run of records in the commit log, as the indexes see it.

    ``entries``: per queue ``(queue, first, data)``: for ``WRITTEN`` and ``REPLAYED``,
    the packed entries of queue offsets ``first`` on; for ``FOLLOWED``, ``data`` is the
    end of the queue offsets passed (``first`` to ``data - 1``). ``marks``: per queue
    ``(queue, marks)``, a list of (queue offset, store ms) or, for consecutive marks
    packed as in the file, a tuple of ``TimeIndex.write_run``'s arguments. ``keys``:
    key-index items (topic, key, commit offset, store ms). ``events``: the arguments
    of ``Streams.indexed`` after its first (a stream topic's appends, ``WRITTEN``), or
    (topic name, events read back from the log) for ``Streams.replayed`` (``REPLAYED``),
    or None. ``topic``: the topic when every record is of one (the writer's), else
    None. ``end``: the commit-log offset after the run (a replayed run: the tail it is
    replayed up to). A tuple: the writer makes one per batch with ``tuple.__new__``.
    """

    mode: int
    topic: Topic | None
    end: int
    entries: list[tuple]
    marks: list[tuple] | tuple = ()
    keys: list[tuple] | tuple = ()
    events: tuple | None = None


class Dispatcher(Protocol):
    """One index kept in step with the commit log."""

    def dispatch(self, run: Run) -> int:
        """Put into the index what ``run``'s records mean for it; return how many
        entries a replayed run put in that were missing or different (else 0)."""

    def truncate_from(self, offset: int, extent: int) -> int:
        """Remove what records at or past ``offset`` (up to ``extent``, still in the log)
        put into the index; return how many entries went (0 where not counted)."""


class TimeIndexDispatch(metaclass=Watched):
    """Each queue's time index: a mark (queue offset, store time) every
    ``TIME_INDEX_INTERVAL`` entries. Its marks past an undone write go with their
    queue's entries (``ConsumeQueue.erase_unpublished``)."""

    __slots__ = ()

    def dispatch(self, run: Run) -> int:
        for queue, marks in run.marks:
            if type(marks) is tuple:
                queue.time_index.write_run(*marks)
            else:
                queue.time_index.write(marks)
        return 0

    def truncate_from(self, offset: int, extent: int) -> int:
        return 0


class KeyIndexDispatch(metaclass=Watched):
    """The key index (``keyindex.KeyIndex``): message keys and dedup ids."""

    __slots__ = ("index",)

    def __init__(self, index: KeyIndex) -> None:
        self.index = index

    def dispatch(self, run: Run) -> int:
        if run.keys:
            self.index.put_many(run.keys)
        return 0

    def truncate_from(self, offset: int, extent: int) -> int:
        return self.index.truncate_from(offset)


class EventIndexDispatch:
    """The event indexes of stream topics (``streams.Streams``)."""

    __slots__ = ("streams", "registry")

    def __init__(self, streams: Streams, registry: TopicRegistry) -> None:
        self.streams = streams
        self.registry = registry

    def dispatch(self, run: Run) -> int:
        events = run.events
        if events is None:
            return 0
        if run.mode == WRITTEN:
            self.streams.indexed(run.topic, *events)
            return 0
        # Read back from the log: (topic name, its events in log order).
        return self.streams.replayed(*events, run.end)

    def truncate_from(self, offset: int, extent: int) -> int:
        self.streams.truncate_from(self.registry.topics, offset)
        return 0


class QueueDispatch(metaclass=Watched):
    """The consume queues: per-queue files, or a shared topic's blocks (whose
    allocation end a written run publishes, and an undone write's blocks discard)."""

    __slots__ = ("registry", "log")

    def __init__(self, registry: TopicRegistry, log: CommitLog) -> None:
        self.registry = registry
        self.log = log

    def dispatch(self, run: Run) -> int:
        mode = run.mode
        dirty = self.registry.dirty
        if mode == WRITTEN:
            blocks = run.topic.blocks
            if blocks is not None:
                if run.entries:
                    BlockQueue.write_many(blocks, run.entries)
                    dirty.add(blocks)
                blocks.publish_end(run.end)
                return 0
            for queue, first, packed in run.entries:
                queue.write(first, packed)
                dirty.add(queue.flush_target)
            return 0
        if mode == REPLAYED:
            return sum(self._replay(queue, first, packed) for queue, first, packed in run.entries)
        for queue, start, end in run.entries:
            if end > start:
                mark_written(queue, start, end)
            if end > queue.max_offset:
                queue.max_offset = end
            dirty.add(queue.flush_target)
        return 0

    @staticmethod
    def _replay(queue, first: int, packed: bytes) -> int:
        """Write entries for queue offsets from ``first`` on where they differ on disk;
        return how many differed."""
        wanted = seal_entries(packed)  # as written: compared with what is there
        if first < queue.min_offset:
            wanted = wanted[(queue.min_offset - first) * ENTRY_SIZE :]
            first = queue.min_offset
            if not wanted:
                return 0
        count = len(wanted) // ENTRY_SIZE
        existing = queue.read(first, count) if first < queue.max_offset else b""
        if existing == wanted:
            # In place, but perhaps only in the page cache (a writer killed before its
            # flush): the checkpoint after recovery vouches for them, so they are fsynced.
            mark_written(queue, first, first + count)
            return 0
        queue.write(first, wanted)
        return _differing_entries(existing, wanted)

    def truncate_from(self, offset: int, extent: int) -> int:
        """Erase the entries of the records an unpublished write left from ``offset`` (the
        log's tail) up to ``extent``, before those records are cleared: the next records
        written there belong to other queues, and a checkpoint past them would vouch for
        the stale entries. Shared topics discard the blocks allocated past their
        published end instead."""
        registry = self.registry
        erased = 0
        if extent > offset:
            for name, queue_id, queue_offset, commit_offset in unpublished_records(
                self.log, extent
            ):
                topic = registry.topic_of(name)
                if (
                    topic is None
                    or topic.blocks is not None
                    or not 0 <= queue_id < len(topic.queues)
                    or commit_offset < topic.info.created_offset
                ):
                    continue
                queue = topic.queues[queue_id]
                if queue.erase_unpublished(queue_offset, commit_offset):
                    registry.dirty.add(queue.flush_target)
                    erased += 1
        for shared in registry.shared_topics():
            shared.blocks.discard_unpublished(offset)
        return erased


def make_dispatchers(
    registry: TopicRegistry, log: CommitLog, index: KeyIndex, streams: Streams
) -> list[Dispatcher]:
    """The store's one list of dispatchers, in the order they are written."""
    return [
        TimeIndexDispatch(),
        KeyIndexDispatch(index),
        EventIndexDispatch(streams, registry),
        QueueDispatch(registry, log),
    ]


def dispatch_all(dispatchers: list[Dispatcher], run: Run) -> int:
    """Hand ``run`` to every dispatcher of the list, in order; return how many entries
    they put in that were missing or different (a replayed run's count)."""
    return sum([dispatcher.dispatch(run) for dispatcher in dispatchers])


def truncate_all(dispatchers: list[Dispatcher], offset: int, extent: int) -> int:
    """Undo, in every index of the list, what records from ``offset`` on put there."""
    return sum(dispatcher.truncate_from(offset, extent) for dispatcher in dispatchers)


def _differing_entries(existing: bytes, wanted: bytes) -> int:
    """How many entries of ``wanted`` ``existing`` lacks or holds otherwise."""
    common = min(len(existing), len(wanted)) // ENTRY_SIZE * ENTRY_SIZE
    differing = (len(wanted) - common) // ENTRY_SIZE
    block = 64 * ENTRY_SIZE
    for start in range(0, common, block):
        stop = min(start + block, common)
        if existing[start:stop] != wanted[start:stop]:
            differing += sum(
                1
                for i in range(start, stop, ENTRY_SIZE)
                if existing[i : i + ENTRY_SIZE] != wanted[i : i + ENTRY_SIZE]
            )
    return differing


__all__ = [
    "FOLLOWED",
    "REPLAYED",
    "WRITTEN",
    "Dispatcher",
    "EventIndexDispatch",
    "KeyIndexDispatch",
    "QueueDispatch",
    "Run",
    "TimeIndexDispatch",
    "dispatch_all",
    "make_dispatchers",
    "truncate_all",
]
