"""Reads: by queue offset, by id, by time, by key, and long-polling pulls.

A part of ``MessageStore`` (store.py), which mixes it in; it uses the store's state.
"""

from __future__ import annotations

import time

from . import _native, dataplane
from .consumequeue import ENTRY, ENTRY_SIZE, ConsumeQueue
from .errors import (
    CorruptRecordError,
    MessageNotFoundError,
    OffsetOutOfRangeError,
    StoreError,
)
from .message_id import format_message_id, parse_message_id
from .record import (
    COMMIT_OFFSET_END,
    END_OF_SEGMENT_MAGIC,
    MARKER,
    MARKER_SIZE,
    RECORD_MAGIC,
    decode_record,
    encode_tag,
    frame_intact,
    normalize_keys,
    record_commit_offset,
    record_magic,
    record_store_time,
    topic_name,
)
from .results import (
    Corruption,
    ReadResult,
    StoredMessage,
)
from .segment import Segment
from .tags import tag_hash

MAX_READ_MESSAGES = 10_000
_TAG_SCAN_CHUNK = 1024
_PULL_POLL_S = 0.002
# A damaged consume-queue entry's record is looked for among at most this many records.
_FIND_RECORDS = 4096
_canonical_offset = _native.canonical_offset
_decode_at = _native.decode_at


class Reading:
    """Reads: by queue offset, by id, by time, by key, and long-polling pulls."""

    def read(
        self, topic: str, queue: int, offset: int, max_messages: int = 32, tag: str | None = None
    ) -> list[StoredMessage]:
        """Messages of one queue from queue ``offset`` on, at most ``max_messages``.

        An offset below the queue's minimum starts at the minimum; one at the maximum
        returns nothing. With ``tag``, only messages with that tag are returned.
        """
        return self.read_result(topic, queue, offset, max_messages, tag).messages

    def read_result(
        self, topic: str, queue: int, offset: int, max_messages: int = 32, tag: str | None = None
    ) -> ReadResult:
        """Like ``read``, also saying which offset to read from next."""
        self._check_open()
        self._follow()
        consume_queue = self._queue(topic, queue)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise OffsetOutOfRangeError(f"a queue offset is an integer ≥ 0, not {offset!r}")
        if not isinstance(max_messages, int) or not 1 <= max_messages <= MAX_READ_MESSAGES:
            raise StoreError(f"max_messages must be 1 to {MAX_READ_MESSAGES}, not {max_messages!r}")
        wanted_tag = encode_tag(tag) if tag is not None else None
        wanted_hash = tag_hash(wanted_tag) if tag is not None else None
        prefix = self._id_prefix
        topic_data = topic.encode()
        topic = topic_name(topic_data)
        log = self.commitlog
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
                commit_offset, size, hashed = ENTRY.unpack_from(packed, index * ENTRY_SIZE)
                if not size or (wanted_hash is not None and hashed != wanted_hash):
                    index += 1
                    continue
                if stop == dataplane.READ_OUTSIDE or segment is None:
                    found = log.locate(commit_offset)
                    if found is not None:
                        segment = found[0]
                        continue
                    segment = None
                index += 1
                message = self._read_entry(
                    consume_queue, segment, commit_offset, size, topic, queue, first + index - 1
                )
                if message is None or (tag is not None and message.tag != tag):
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
                self._id_prefix,
                size,
            )
            if (message.topic, message.queue, message.queue_offset) != (
                topic,
                queue,
                queue_offset,
            ):
                raise CorruptRecordError(commit_offset, "the record of another entry")
        except CorruptRecordError as error:
            self._note_corruption(Corruption(commit_offset, size, error.reason))
            return self._find_record(consume_queue, topic, queue, queue_offset)
        return message

    def _find_record(
        self, consume_queue: ConsumeQueue, topic: str, queue: int, queue_offset: int
    ) -> StoredMessage | None:
        """The intact record of a damaged consume-queue entry, looked for in the log
        between the records of the entries before and after it (None if not found)."""
        log = self.commitlog
        before = consume_queue.entry(queue_offset - 1) if queue_offset else None
        after = consume_queue.entry(queue_offset + 1)
        position = max(log.min_offset, before[0] + before[1] if before else 0)
        end = min(log.tail, after[0] if after else log.tail)
        for _ in range(_FIND_RECORDS):
            found = log.locate(position) if position < end else None
            if found is None:
                return None
            segment, pos = found
            length, magic = MARKER.unpack_from(segment.view, pos)
            if magic == END_OF_SEGMENT_MAGIC:
                position = segment.end
                continue
            try:
                message = decode_record(segment.view, pos, segment.size, position, self._id_prefix)
            except CorruptRecordError:
                return None  # the walk cannot get past bad bytes
            if (message.topic, message.queue, message.queue_offset) == (topic, queue, queue_offset):
                return message
            position += length
        return None

    def _record_at(self, commit_offset: int) -> StoredMessage | None:
        """The intact record starting at ``commit_offset``, or None."""
        if not self.commitlog.min_offset <= commit_offset < self.commitlog.tail:
            return None
        found = self.commitlog.locate(commit_offset)
        if found is None:
            return None
        segment, pos = found
        message = dataplane.decode_at(segment, pos, commit_offset, self.message_id(commit_offset))
        if message is not None:
            return message
        try:
            return decode_record(segment.view, pos, segment.size, commit_offset, self._id_prefix)
        except CorruptRecordError:
            return None

    def get(self, message_id: str) -> StoredMessage:
        """The message with this id, read in one lookup.

        Raises InvalidMessageIdError for a malformed id, MessageNotFoundError when no
        intact record starts where it points, CorruptRecordError when the record there
        fails its CRC check.
        """
        prefix = self._id_prefix
        commit_offset = _canonical_offset(message_id, prefix)
        if commit_offset is not None:
            # This store's id as message_id() writes it: parse_message_id would agree.
            canonical_id = message_id
            self._check_open()
            self._follow()
        else:
            store_id, commit_offset = parse_message_id(message_id)
            self._check_open()
            self._follow()
            if store_id != self.identity.store_id:
                raise MessageNotFoundError(
                    f"message {message_id} belongs to store {store_id:08X}, "
                    f"not to this store ({prefix})"
                )
            canonical_id = f"{prefix}{commit_offset:016X}"
        if not self.commitlog.min_offset <= commit_offset < self.commitlog.tail:
            raise MessageNotFoundError(
                f"message {message_id} is outside the commit log "
                f"({self.commitlog.min_offset} to {self.commitlog.tail}): "
                "deleted by retention, or never written"
            )
        found = self.commitlog.locate(commit_offset)
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
            return decode_record(segment.view, pos, segment.size, commit_offset, self._id_prefix)
        except CorruptRecordError as error:
            says_here = (
                pos + COMMIT_OFFSET_END <= segment.size
                and record_commit_offset(segment.map, pos) == commit_offset
            )
            if not says_here and not frame_intact(segment.view, pos, segment.size):
                raise MessageNotFoundError(
                    f"no message starts at commit-log offset {commit_offset} (id {message_id})"
                ) from None
            self._note_corruption(Corruption(commit_offset, 0, error.reason))
            raise

    def offset_for_time(self, topic: str, queue: int, timestamp_ms: int) -> int:
        """The first queue offset whose store time is ≥ ``timestamp_ms``.

        Kafka's offsetsForTimes: before the first message, the queue's min offset; after
        the last, its max offset (where the next message will go).
        """
        self._check_open()
        self._follow()
        consume_queue = self._queue(topic, queue)
        if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool):
            raise StoreError(f"a timestamp is an integer of milliseconds, not {timestamp_ms!r}")
        low, high = consume_queue.time_index.bracket(
            timestamp_ms, consume_queue.min_offset, consume_queue.max_offset
        )
        # The answer is in [low, high]: binary search on the records' store times.
        while low < high:
            middle = (low + high) // 2
            store_ms = self._store_time(consume_queue, middle)
            if store_ms is None or store_ms < timestamp_ms:
                low = middle + 1
            else:
                high = middle
        return low

    def store_time_at(self, topic: str, queue: int, offset: int) -> int | None:
        """The store time (ms) of the message at a queue offset; None outside the queue's
        readable range. Reads the record's header only, not its body."""
        self._check_open()
        self._follow()
        consume_queue = self._queue(topic, queue)
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise StoreError(f"a queue offset is a whole number, not {offset!r}")
        if not consume_queue.min_offset <= offset < consume_queue.max_offset:
            return None
        return self._store_time(consume_queue, offset)

    def _store_time(self, consume_queue: ConsumeQueue, index: int) -> int | None:
        entry = consume_queue.entry(index)
        if entry is None:
            return None
        found = self.commitlog.locate(entry[0])
        if found is None:
            return None
        segment, pos = found
        return record_store_time(segment.map, pos)

    def query_by_key(
        self,
        topic: str,
        key: str,
        begin_ms: int | None = None,
        end_ms: int | None = None,
        limit: int = 64,
    ) -> list[StoredMessage]:
        """Messages of ``topic`` carrying ``key``, newest first, at most ``limit``.

        ``begin_ms``/``end_ms`` bound the store time (inclusive). Found through the key
        index; hash collisions are ruled out by checking each record's keys.
        """
        self._check_open()
        self._follow()
        state = self._topic(topic)
        normalize_keys(key)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_READ_MESSAGES:
            raise StoreError(f"limit must be 1 to {MAX_READ_MESSAGES}, not {limit!r}")
        for bound in (begin_ms, end_ms):
            if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
                raise StoreError(f"a time bound is an integer of milliseconds, not {bound!r}")
        wanted = limit
        while True:
            offsets = self._index.query(topic, key, begin_ms, end_ms, wanted)
            found = []
            for offset in offsets:
                if offset < state.info.created_offset:
                    continue
                message = self._record_at(offset)
                if message is not None and message.topic == topic and key in message.keys:
                    found.append(message)
                    if len(found) == limit:
                        return found
            if len(offsets) < wanted:
                return found
            wanted *= 4

    def queue_range(self, topic: str, queue: int) -> tuple[int, int]:
        """(min offset, max offset) of a queue: readable offsets are min ≤ o < max."""
        self._check_open()
        self._follow()
        consume_queue = self._queue(topic, queue)
        return consume_queue.min_offset, consume_queue.max_offset

    def queue_ranges(
        self, topic: str, first: int = 0, count: int | None = None
    ) -> list[tuple[int, int]]:
        """``queue_range`` of the queues ``first`` to ``first + count - 1`` of ``topic``
        (default: every queue), by queue id, in one call."""
        self._check_open()
        self._follow()
        queues = self._topic(topic).queues
        stop = len(queues) if count is None else min(len(queues), first + max(0, count))
        return [
            (queue.min_offset, queue.max_offset)
            for queue in (queues[i] for i in range(max(0, first), stop))
        ]

    def message_id(self, commit_offset: int) -> str:
        return format_message_id(self.identity.store_id, commit_offset)

    def pull(
        self,
        group: str,
        topic: str,
        queue: int,
        max_messages: int = 32,
        timeout_s: float = 0.0,
        offset: int | None = None,
    ) -> list[StoredMessage]:
        """Messages from ``offset`` (default: the group's committed offset, else the
        queue's first); waits up to ``timeout_s`` for some when there are none yet.

        Pulling does not commit: the consumer commits what it has processed.
        """
        consume_queue = self._queue(topic, queue)
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool):
            raise StoreError(f"timeout_s is a number of seconds, not {timeout_s!r}")
        if offset is None:
            committed = self.committed_offset(group, topic, queue)
            offset = consume_queue.min_offset if committed is None else committed
        elif not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise OffsetOutOfRangeError(f"a queue offset is an integer ≥ 0, not {offset!r}")
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            messages = self.read(topic, queue, offset, max_messages)
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                return messages
            # An append in this process wakes the wait at once; one in another process is
            # seen by the next look at the shared state, every few milliseconds.
            with self._appended:
                self._pull_waiters += 1
                try:
                    if consume_queue.max_offset <= offset:
                        self._appended.wait(min(remaining, _PULL_POLL_S))
                finally:
                    self._pull_waiters -= 1
