"""Looking streams up in a stream topic's event index, checked against the commit log:
a stream's newest event, what a command produced, a range of versions, and where
retention cut a stream.

Each answer trusts only entries whose records start below the tail the caller followed,
and checks each candidate's record (its ``STREAM_ID`` and ``COMMAND_ID`` properties): a
64-bit hash collision is ruled out while the record is there; once retention deleted
it, the hash alone decides. A chain that breaks under a walk (another process cut
the index meanwhile) is walked again (``retrying``); one that stays broken is damage
(``ChainDamage``), which the caller repairs and then asks again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .errors import StoreFormatError
from .eventindex import ChainBroken, EventEntry, EventIndex, command_hash, stream_hash
from .eventrecords import COMMAND_PROPERTY, STREAM_PROPERTY, event_of
from .results import Corruption, EventSlice, StoredEvent, StoredMessage

RecordReader = Callable[[int], StoredMessage | None]
_WALK_TRIES = 3
T = TypeVar("T")


def retrying(index: EventIndex, walk: Callable[[], T]) -> T:
    """``walk()``, again while a chain breaks under it, at most a few times."""
    for _ in range(_WALK_TRIES):
        try:
            return walk()
        except ChainBroken as broken:
            error = broken
    raise damaged(index, error)


class ChainDamage(StoreFormatError):
    """A chain of the index stays broken: a lookup cannot be answered from it until the
    index is repaired (``streamrecovery.repair_index``)."""


def damaged(index: EventIndex, error: ChainBroken) -> ChainDamage:
    return ChainDamage(
        f"the event index {index.path} is damaged (a chain breaks at {error}); the next "
        "process to write to the store indexes its events again, or close every process "
        "using the store and delete the file: the first to open the store again rebuilds "
        "it from the commit log"
    )


def newest_entry(
    index: EventIndex, stream_id: str, tail: int, record_at: RecordReader, slot: int | None = None
) -> tuple[EventEntry, StoredMessage | None] | None:
    """The stream's newest entry below ``tail`` and its record (None once deleted), or
    None when the stream has no events (``slot``: its slot's value, just read). Raises
    ChainBroken."""
    for entry in index.stream_candidates(stream_hash(stream_id), tail, slot):
        message = record_at(entry.commit_offset)
        if message is None or message.properties.get(STREAM_PROPERTY) == stream_id:
            return entry, message
    return None


def produced(
    index: EventIndex,
    stream_id: str,
    command_id: str,
    tail: int,
    record_at: RecordReader,
    slot: int | None = None,
) -> tuple[int, int] | None:
    """(first, last) version the command produced in the stream, or None. Only the last
    event of an append is linked in its command's chain; the others are found before
    it by their version links. Raises ChainBroken."""
    hashed = command_hash(stream_id, command_id)
    wanted = stream_hash(stream_id)
    for entry in index.command_candidates(hashed, tail, slot):
        if entry.stream_hash != wanted:
            continue
        message = record_at(entry.commit_offset)
        if message is not None and (
            message.properties.get(STREAM_PROPERTY) != stream_id
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


def read_events(
    index: EventIndex,
    topic: str,
    stream_id: str,
    start: int,
    max_count: int,
    tail: int,
    min_offset: int,
    record_at: RecordReader,
    note: Callable[[Corruption], None],
) -> EventSlice:
    """Versions ``start``.. of the stream, at most ``max_count``, from the oldest one
    retention kept (``min_offset`` is the log's first offset). A record that is damaged
    or not the event its entry says is left out and noted. Raises ChainBroken."""
    found = newest_entry(index, stream_id, tail, record_at)
    if found is None:
        return EventSlice([], 0, 1, False)
    newest = found[0]
    read = index.block_reader()
    # Retention deleted nothing of the topic while the log starts below it.
    kept = 1 if min_offset <= index.created_offset else first_kept(index, newest, min_offset, read)
    begin = max(start, kept)
    if begin > newest.version:
        return EventSlice([], newest.version, kept, start < kept)
    entry = index.find_version(newest, min(newest.version, begin + max_count - 1), read)
    entries = []
    while entry is not None and entry.version >= begin:
        entries.append(entry)
        if entry.version == begin or not entry.previous:
            break
        entry = read(entry.previous)
        if entry is None:
            raise ChainBroken(entries[-1].previous)
    events = []
    for entry in reversed(entries):
        event = _event_at(entry, topic, stream_id, record_at)
        if event is not None:
            events.append(event)
        elif entry.commit_offset >= min_offset:
            note(
                Corruption(
                    entry.commit_offset,
                    0,
                    f"version {entry.version} of stream {stream_id!r} in {topic!r}: its "
                    "record is damaged or not this event",
                )
            )
    return EventSlice(events, newest.version, kept, start < kept)


def _event_at(
    entry: EventEntry, topic: str, stream_id: str, record_at: RecordReader
) -> StoredEvent | None:
    message = record_at(entry.commit_offset)
    event = event_of(message) if message is not None else None
    if (
        event is None
        or event.stream_id != stream_id
        or event.version != entry.version
        or message.topic != topic
    ):
        return None
    return event


def first_kept(
    index: EventIndex,
    newest: EventEntry,
    min_offset: int,
    read: Callable[[int], EventEntry | None],
) -> int:
    """The stream's oldest version whose record retention has not deleted (past the
    newest when all were): versions' records are in log order, so a binary search."""
    oldest = oldest_entry(index, newest, read)
    if oldest.commit_offset >= min_offset:
        return oldest.version
    if newest.commit_offset < min_offset:
        return newest.version + 1
    low, high = oldest.version, newest.version  # low is deleted, high is kept
    while high - low > 1:
        middle = (low + high) // 2
        entry = index.find_version(newest, middle, read)
        if entry is None or entry.commit_offset < min_offset:
            low = middle
        else:
            high = middle
    return high


def oldest_entry(
    index: EventIndex, newest: EventEntry, read: Callable[[int], EventEntry | None]
) -> EventEntry:
    """Version 1's entry, or the oldest the index has (it lost older ones)."""
    entry = index.find_version(newest, 1, read)
    if entry is not None:
        return entry
    entry = newest
    while entry.previous:
        before = read(entry.previous)
        if before is None:
            raise ChainBroken(entry.previous)
        entry = before
    return entry


__all__ = ["damaged", "newest_entry", "produced", "read_events", "retrying"]
