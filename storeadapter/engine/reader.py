"""The reader: a part of ``MessageStore`` that turns consume-queue entries and commit-log
offsets into checked messages.

It owns what reads need and nothing else: the commit log it reads (shared with the
writer, which moves its tail), the store's id (for message ids), the log of damage reads
found (``CorruptionLog``) and the wake-ups of pulls waiting in this process
(``Arrivals``). It neither follows other processes nor checks that the store is open:
``MessageStore``'s read methods do that first, then ask it.
"""

from __future__ import annotations

import threading
from collections import deque

from . import dataplane
from .commitlog import CommitLog
from .consumequeue import ENTRY, ENTRY_SIZE, ConsumeQueue
from .errors import CorruptRecordError, MessageNotFoundError
from .keyindex import KeyIndex
from .message_id import format_message_id
from .names import DEDUP_KEY_PREFIX, DEDUP_PROPERTY
from .queuebase import CHECKED_ENTRY, entry_checked, entry_not_written, entry_tag
from .record import (
    COMMIT_OFFSET_END,
    END_OF_SEGMENT_MAGIC,
    MARKER_SIZE,
    RECORD_MAGIC,
    decode_record,
    frame_intact,
    record_commit_offset,
    record_lead,
    record_magic,
    record_store_time,
    topic_name,
)
from .results import Corruption, ReadResult, StoredMessage
from .segment import Segment
from .tags import tag_hash

_TAG_SCAN_CHUNK = 1024
# A damaged consume-queue entry's record is looked for among at most this many records.
_FIND_RECORDS = 4096
_canonical_offset = dataplane.canonical_offset
_decode_at = dataplane.decode_record


class CorruptionLog:
    """Damage this process found since it opened the store (recovery's, and reads'):
    the last ``keep``, each commit-log offset once."""

    def __init__(self, keep: int = 1000) -> None:
        self._recent: deque[Corruption] = deque(maxlen=keep)
        self._offsets: set[int] = set()

    def note(self, corruption: Corruption) -> None:
        if corruption.commit_offset not in self._offsets:
            self._offsets.add(corruption.commit_offset)
            self._recent.append(corruption)

    def recent(self) -> list[Corruption]:
        return list(self._recent)


class Arrivals:
    """Pulls waiting in this process for an append, and the appends that wake them."""

    def __init__(self, asks: dataplane.Asks | None = None) -> None:
        self._condition = threading.Condition()
        self.waiting = 0  # read without the lock by writers: a wake-up is then cheap to skip
        # The native append's asks (``dataplane.Asks``): told how many wait, before the
        # waiter looks for an append (so an append published after that look wakes it).
        self._asks = asks

    def wait(self, timeout_s: float, still_nothing) -> None:
        """Wait up to ``timeout_s`` for ``wake``, if ``still_nothing()`` holds under the
        lock (an append that published just before is not waited for)."""
        with self._condition:
            self.waiting += 1
            if self._asks is not None:
                self._asks.pulls(self.waiting)
            try:
                if still_nothing():
                    self._condition.wait(timeout_s)
            finally:
                self.waiting -= 1
                if self._asks is not None:
                    self._asks.pulls(self.waiting)

    def wake(self) -> None:
        with self._condition:
            self._condition.notify_all()


class Reader:
    """Checked reads of one store's log (see the module docstring)."""

    def __init__(
        self,
        log: CommitLog,
        store_id: int,
        id_prefix: str,
        index: KeyIndex,
        asks: dataplane.Asks | None = None,
    ) -> None:
        self.log = log
        self.store_id = store_id
        self.id_prefix = id_prefix
        self.index = index
        self.corruptions = CorruptionLog()
        self.arrivals = Arrivals(asks)

    def message_id(self, commit_offset: int) -> str:
        return format_message_id(self.store_id, commit_offset)

    # ------------------------------------------------------------ by queue offset

    def read_queue(
        self,
        consume_queue: ConsumeQueue,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int,
        tag: str | None,
        wanted_tag: bytes | None,
    ) -> ReadResult:
        """Messages of ``consume_queue`` (queue ``queue`` of ``topic``) from ``offset``
        on, at most ``max_messages``, only those tagged ``tag`` (``wanted_tag`` its
        bytes) when it is given."""
        wanted_hash = tag_hash(wanted_tag) if tag is not None else None
        wanted_entry_tag = entry_tag(wanted_hash) if wanted_hash is not None else None
        prefix = self.id_prefix
        topic_data = topic.encode()
        topic = topic_name(topic_data)
        log = self.log
        segment = log.active
        position = max(offset, consume_queue.min_offset)
        messages: list[StoredMessage] = []
        while len(messages) < max_messages and position < consume_queue.max_offset:
            count = max_messages - len(messages) if wanted_hash is None else _TAG_SCAN_CHUNK
            packed = consume_queue.read(position, count)
            if not packed:
                break
            first = position
            total = len(packed) // ENTRY_SIZE
            index = 0
            # The native walk checks and decodes every entry whose record it accepts at
            # once, in the segment given; it stops at an entry whose record lies in
            # another segment, or that must go the long way (_read_entry, which says what
            # is wrong with it).
            while index < total and len(messages) < max_messages:
                if segment is not None:
                    index, stop = dataplane.read_entries(
                        segment,
                        packed,
                        index,
                        topic_data,
                        topic,
                        queue,
                        first,
                        prefix,
                        wanted_hash,
                        wanted_tag,
                        max_messages - len(messages),
                        messages,
                    )
                    if stop == dataplane.READ_END or stop == dataplane.READ_FULL:
                        break
                else:
                    stop = dataplane.READ_OUTSIDE
                at = index * ENTRY_SIZE
                if entry_not_written(packed, at):
                    index += 1
                    continue
                commit_offset, size, entry_tag_hash, _check = CHECKED_ENTRY.unpack_from(packed, at)
                checked = entry_checked(packed, at)
                # Only a checked entry's tag hash may skip it; any other is verified first.
                if checked and wanted_hash is not None and entry_tag_hash != wanted_entry_tag:
                    index += 1
                    continue
                if (
                    stop == dataplane.READ_OUTSIDE
                    or segment is None
                    or not segment.base <= commit_offset < segment.end
                ):
                    found = log.locate(commit_offset)
                    if found is not None and found[0] is not segment:
                        segment = found[0]
                        continue
                    segment = None if found is None else segment
                index += 1
                message = self._read_entry(
                    consume_queue, segment, commit_offset, size, topic, queue, first + index - 1
                )
                if message is None:
                    continue
                if not checked:
                    self._judge_unchecked(packed, at, message, topic, queue, first + index - 1)
                if tag is not None and message.tag != tag:
                    continue
                messages.append(message)
            position = first + index
        return ReadResult(messages, position, consume_queue.min_offset, consume_queue.max_offset)

    def _read_entry(
        self,
        consume_queue: ConsumeQueue,
        segment: Segment | None,
        commit_offset: int,
        size: int,
        topic: str,
        queue: int,
        queue_offset: int,
    ) -> StoredMessage | None:
        """The message of a consume-queue entry, fully checked; a damaged one is noted
        and its record looked for in the log (None if not found)."""
        try:
            if segment is None:
                raise CorruptRecordError(commit_offset, "outside the commit log")
            message = decode_record(
                segment.view,
                commit_offset - segment.base,
                segment.size,
                commit_offset,
                self.id_prefix,
                size,
            )
            if (message.topic, message.queue, message.queue_offset) != (
                topic,
                queue,
                queue_offset,
            ):
                raise CorruptRecordError(commit_offset, "the record of another entry")
        except CorruptRecordError as error:
            self.corruptions.note(Corruption(commit_offset, size, error.reason))
            return self._find_record(consume_queue, topic, queue, queue_offset)
        return message

    def entry_record(
        self, commit_offset: int, size: int, topic: str, queue: int, queue_offset: int
    ) -> StoredMessage | None:
        """The intact record an entry names, if it is that entry's (else None; nothing
        is reported)."""
        found = self.log.locate(commit_offset) if commit_offset < self.log.tail else None
        if found is None:
            return None
        segment, pos = found
        try:
            message = decode_record(
                segment.view, pos, segment.size, commit_offset, self.id_prefix, size
            )
        except CorruptRecordError:
            return None
        if (message.topic, message.queue, message.queue_offset) != (topic, queue, queue_offset):
            return None
        return message

    def _judge_unchecked(
        self, packed: bytes, at: int, message: StoredMessage, topic: str, queue: int, index: int
    ) -> None:
        """An entry that failed its check, whose message was found: silent if it is an
        entry written before entries had checks (its last 8 bytes the record's 64-bit tag
        hash), else reported as damage."""
        commit_offset, size, old_tag_hash = ENTRY.unpack_from(packed, at)
        tag = message.tag.encode() if message.tag is not None else b""
        if commit_offset == message.commit_offset and old_tag_hash == tag_hash(tag):
            return
        self.corruptions.note(
            Corruption(
                commit_offset,
                size,
                f"consume-queue entry {index} of {topic}/{queue} fails its check (its "
                "record was verified and served)",
            )
        )

    def _find_record(
        self, consume_queue: ConsumeQueue, topic: str, queue: int, queue_offset: int
    ) -> StoredMessage | None:
        """The intact record of a damaged consume-queue entry, looked for in the log
        between the records of the entries before and after it (None if not found)."""
        log = self.log
        before = consume_queue.entry(queue_offset - 1) if queue_offset else None
        after = consume_queue.entry(queue_offset + 1)
        position = max(log.min_offset, before[0] + before[1] if before else 0)
        end = min(log.tail, after[0] if after else log.tail)
        for _ in range(_FIND_RECORDS):
            found = log.locate(position) if position < end else None
            if found is None:
                return None
            segment, pos = found
            try:
                length, magic = record_lead(segment.view, pos, segment.base)
                if magic == END_OF_SEGMENT_MAGIC:
                    position = segment.end
                    continue
                message = decode_record(segment.view, pos, segment.size, position, self.id_prefix)
            except CorruptRecordError:
                return None  # the walk cannot get past bad bytes
            if (message.topic, message.queue, message.queue_offset) == (topic, queue, queue_offset):
                return message
            position += length
        return None

    def records_with_key(
        self, topic: str, key: str, first: int, last: int, low_ms: int, high_ms: int
    ) -> list[int]:
        """The commit offsets of the intact records of ``topic`` from ``first`` to
        ``last`` (inclusive), stored from ``low_ms`` to ``high_ms``, indexed under
        ``key`` (one of their keys, or their dedup key), walking the log (at most
        ``_FIND_RECORDS`` records): what a key-index lookup reads where entries fail
        their check."""
        log = self.log
        dedup_id = key[len(DEDUP_KEY_PREFIX) :] if key.startswith(DEDUP_KEY_PREFIX) else None
        position = max(log.min_offset, first)
        found = []
        for _ in range(_FIND_RECORDS):
            located = log.locate(position) if position <= last and position < log.tail else None
            if located is None:
                break
            segment, pos = located
            try:
                length, magic = record_lead(segment.view, pos, segment.base)
                if magic == END_OF_SEGMENT_MAGIC:
                    position = segment.end
                    continue
                message = decode_record(segment.view, pos, segment.size, position, self.id_prefix)
            except CorruptRecordError:
                break  # the walk cannot get past bad bytes
            if (message.topic == topic and low_ms <= message.store_time_ms <= high_ms) and (
                key in message.keys
                or (dedup_id is not None and message.properties.get(DEDUP_PROPERTY) == dedup_id)
            ):
                found.append(position)
            position += length
        return found

    # ------------------------------------------------------------ by log offset

    def record_at(self, commit_offset: int) -> StoredMessage | None:
        """The intact record starting at ``commit_offset``, or None."""
        log = self.log
        if not log.min_offset <= commit_offset < log.tail:
            return None
        found = log.locate(commit_offset)
        if found is None:
            return None
        segment, pos = found
        message = dataplane.decode_at(segment, pos, commit_offset, self.message_id(commit_offset))
        if message is not None:
            return message
        try:
            return decode_record(segment.view, pos, segment.size, commit_offset, self.id_prefix)
        except CorruptRecordError:
            return None

    def canonical_offset(self, message_id: str) -> int | None:
        """The commit offset of ``message_id`` when it is this store's id as
        ``message_id()`` writes it (``parse_message_id`` would agree), else None."""
        return _canonical_offset(message_id, self.id_prefix)

    def get(self, message_id: str, canonical_id: str, commit_offset: int) -> StoredMessage:
        """The message ``message_id`` (this store's, at ``commit_offset``; written as
        ``canonical_id``): see ``MessageStore.get``."""
        log = self.log
        if not log.min_offset <= commit_offset < log.tail:
            raise MessageNotFoundError(
                f"message {message_id} is outside the commit log "
                f"({log.min_offset} to {log.tail}): "
                "deleted by retention, or never written"
            )
        found = log.locate(commit_offset)
        if found is None:
            raise MessageNotFoundError(f"message {message_id} is in no segment")
        segment, pos = found
        message = _decode_at(segment.map, pos, commit_offset, canonical_id, 0, StoredMessage)
        if message is not None:
            return message
        if pos + MARKER_SIZE > segment.size or record_magic(segment.map, pos) != RECORD_MAGIC:
            raise MessageNotFoundError(
                f"no message starts at commit-log offset {commit_offset} (id {message_id})"
            )
        try:
            return decode_record(segment.view, pos, segment.size, commit_offset, self.id_prefix)
        except CorruptRecordError as error:
            says_here = (
                pos + COMMIT_OFFSET_END <= segment.size
                and record_commit_offset(segment.map, pos, segment.base) == commit_offset
            )
            if not says_here and not frame_intact(segment.view, pos, segment.size):
                raise MessageNotFoundError(
                    f"no message starts at commit-log offset {commit_offset} (id {message_id})"
                ) from None
            self.corruptions.note(Corruption(commit_offset, 0, error.reason))
            raise

    # ------------------------------------------------------------ store times

    def store_time(self, consume_queue: ConsumeQueue, index: int) -> int | None:
        """The store time of entry ``index``'s record, read from its header alone."""
        entry = consume_queue.entry(index)
        if entry is None:
            return None
        found = self.log.locate(entry[0])
        if found is None:
            return None
        segment, pos = found
        return record_store_time(segment.map, pos, segment.base)

    def offset_for_time(self, consume_queue: ConsumeQueue, timestamp_ms: int) -> int:
        """The first queue offset whose store time is ≥ ``timestamp_ms``."""
        low, high = consume_queue.time_index.bracket(
            timestamp_ms, consume_queue.min_offset, consume_queue.max_offset
        )
        # The answer is in [low, high]: binary search on the records' store times.
        while low < high:
            middle = (low + high) // 2
            store_ms = self.store_time(consume_queue, middle)
            if store_ms is None or store_ms < timestamp_ms:
                low = middle + 1
            else:
                high = middle
        return low

    def last_store_time(self, queue: ConsumeQueue) -> int | None:
        """The store time of the queue's last message, read once per change of the queue.

        Reading it costs a consume-queue read (often a file open: the handle cache holds
        far fewer files than a big store has queues) and a log read, too much to do for
        every queue on every stats() call. It is kept on the queue with what it was read
        from (min and max offsets, change count): a write, a truncation, retention or
        another process's appends change those, and the next call reads it again. An
        answer of None for a queue that has entries is not kept.
        """
        key = (queue.min_offset, queue.max_offset, queue.changes)
        cached = queue.last_store_cache
        if cached is not None and cached[:3] == key:
            return cached[3]
        value = self._read_last_store_time(queue)
        if value is not None or key[0] >= key[1]:  # else unreadable for now: ask again
            queue.last_store_cache = (*key, value)
        return value

    def _read_last_store_time(self, queue: ConsumeQueue) -> int | None:
        index = queue.max_offset - 1
        while index >= queue.min_offset:
            entry = queue.entry(index)
            if entry is not None:
                found = self.log.locate(entry[0])
                if found is None:
                    return None
                segment, pos = found
                return record_store_time(segment.map, pos, segment.base)
            index -= 1
        return None

    # ------------------------------------------------------------ by key

    def query_by_key(
        self,
        topic: str,
        created_offset: int,
        key: str,
        begin_ms: int | None,
        end_ms: int | None,
        limit: int,
    ) -> list[StoredMessage]:
        """Messages of ``topic`` (created at ``created_offset``) carrying ``key``, newest
        first, at most ``limit``; hash collisions are ruled out by each record's keys."""
        wanted = limit
        while True:
            offsets = self.index.query(topic, key, begin_ms, end_ms, wanted)
            found = []
            for offset in offsets:
                if offset < created_offset:
                    continue
                message = self.record_at(offset)
                if message is not None and message.topic == topic and key in message.keys:
                    found.append(message)
                    if len(found) == limit:
                        return found
            if len(offsets) < wanted:
                return found
            wanted *= 4


__all__ = ["Arrivals", "CorruptionLog", "Reader"]
