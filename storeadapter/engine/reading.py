"""Reads: by queue offset, by id, by time, by key, and long-polling pulls.

``MessageStore``'s public read methods (store.py mixes this class in). Each one checks
the store is open, follows the other processes, checks its arguments and finds the
topic or queue; the work is the ``Reader``'s (reader.py), which owns what reads need.
What this class uses of the store: ``_check_open``, ``_follow``, ``_topic``, ``_queue``,
``committed_offset``, ``_reader``, ``_core``, ``_reading`` and ``_reads_begin``.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from contextlib import suppress

from .errors import (
    MessageNotFoundError,
    OffsetOutOfRangeError,
    QueueNotFoundError,
    StoreError,
)
from .message_id import parse_message_id
from .offsets import group_position
from .queuebase import ENTRY, ENTRY_SIZE
from .record import encode_tag, normalize_keys
from .results import QueueBytes, ReadResult, StoredMessage

MAX_READ_MESSAGES = 10_000
#: Most consume-queue entries one ``queue_bytes`` call reads (20 bytes each).
MAX_QUEUE_BYTES_ENTRIES = 1 << 20
#: Entries read from the queue at a time by ``queue_bytes``.
_BYTES_READ_ENTRIES = 8192
_PULL_POLL_S = 0.002


class Reading:
    """Reads: by queue offset, by id, by time, by key, and long-polling pulls."""

    def read(
        self, topic: str, queue: int, offset: int, max_messages: int = 32, tag: str | None = None
    ) -> list[StoredMessage]:
        """Messages of one queue from queue ``offset`` on, at most ``max_messages``.

        An offset below the queue's minimum starts at the minimum; one at the maximum
        returns nothing. With ``tag``, only messages with that tag are returned.

        One native call (the open store binds ``read`` to its core's
        ``read_or_long_way``); what the core declines is read by ``_read_long_way``.
        """
        return self._core.read_or_long_way(topic, queue, offset, max_messages, tag)

    def _read_long_way(
        self, topic: str, queue: int, offset: int, max_messages: int = 32, tag: str | None = None
    ) -> list[StoredMessage]:
        """``read`` in Python: for what the native core declines (a tag, arguments to
        refuse, a topic or queue it does not know yet, a shared topic's block it does not
        know, an entry or record to check the long way, a closed or forked store), saying
        what is wrong."""
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
        return self._reader.read_queue(
            consume_queue, topic, queue, offset, max_messages, tag, wanted_tag
        )

    def get(self, message_id: str) -> StoredMessage:
        """The message with this id, read in one lookup.

        Raises InvalidMessageIdError for a malformed id, MessageNotFoundError when no
        intact record starts where it points, CorruptRecordError when the record there
        fails its CRC check.
        """
        message = self._core.get(message_id)  # one native call; None: the long way
        if message is not None:
            return message
        return self._get_long_way(message_id)

    def get_many(self, message_ids: Iterable[str]) -> list[StoredMessage | None]:
        """The messages with these ids, in the order given: for callers that have several
        ids at once.

        Each id is answered as ``get`` answers it, except that an id with no message
        (``get``'s MessageNotFoundError: no intact record starts where it points, or it is
        another store's id) gives None in its place. Everything else ``get`` raises, this
        raises: InvalidMessageIdError for a malformed id, CorruptRecordError for a record
        that fails its CRC check, StoreClosedError (the first such id in the order given
        decides). Ids may be of any topics, repeated, in any order.

        One native call reads them in commit-log order (each segment's mapping taken once,
        the records in the order they lie, the next ones asked for ahead), rather than in
        the callers' order, which for random ids is a random walk over the mappings;
        what the core declines is read by ``_get_long_way``, one id at a time.
        """
        ids = message_ids if type(message_ids) is list else list(message_ids)
        self._check_open()
        if not self._reading:
            self._reads_begin()
        messages, declined = self._core.get_many(ids)
        for at in declined:
            with suppress(MessageNotFoundError):  # no message: None stays in its place
                messages[at] = self._get_long_way(ids[at])
        return messages

    def _get_long_way(self, message_id: str) -> StoredMessage:
        """``get`` in Python: for what the native core declines (an id not written as
        this store writes them, a store closed or forked, an offset outside the log, a
        record that fails a check), saying what is wrong."""
        reader = self._reader
        commit_offset = reader.canonical_offset(message_id)
        if commit_offset is not None:
            canonical_id = message_id
            self._check_open()
            self._follow()
        else:
            store_id, commit_offset = parse_message_id(message_id)
            self._check_open()
            self._follow()
            prefix = reader.id_prefix
            if store_id != reader.store_id:
                raise MessageNotFoundError(
                    f"message {message_id} belongs to store {store_id:08X}, "
                    f"not to this store ({prefix})"
                )
            canonical_id = f"{prefix}{commit_offset:016X}"
        return reader.get(message_id, canonical_id, commit_offset)

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
        return self._reader.offset_for_time(consume_queue, timestamp_ms)

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
        return self._reader.store_time(consume_queue, offset)

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
        return self._reader.query_by_key(
            topic, state.info.created_offset, key, begin_ms, end_ms, limit
        )

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

    def queue_bytes(
        self, topic: str, queue: int, start: int, max_entries: int = 65536
    ) -> QueueBytes:
        """The bytes of the records at queue offsets ``start`` on (at most ``max_entries``
        of them, never past the queue's max offset), summed per commit-log segment.

        Read from the consume queue's entries alone (each carries its record's size), so
        no record is read: 20 bytes per message. Offsets below the queue's minimum (what
        retention deleted) are skipped; a ``start`` at or past the max offset reads
        nothing. ``next_offset`` is where the next call continues (the max offset once
        caught up). Entries not written (a power loss's holes) count nothing.
        """
        self._check_open()
        self._queue(topic, queue)
        return self.queues_bytes(topic, [start], queue, max_entries)[0]

    def queues_bytes(
        self, topic: str, starts: Sequence[int], first: int = 0, max_entries: int = 65536
    ) -> list[QueueBytes]:
        """``queue_bytes`` of the queues ``first`` to ``first + len(starts) - 1``, each from
        its start, in one call: at most ``max_entries`` entries in all, queue after queue
        (a queue the budget did not reach answers its start as ``next_offset``)."""
        self._check_open()
        self._follow()
        queues = self._topic(topic).queues
        if not isinstance(first, int) or isinstance(first, bool) or first < 0:
            raise QueueNotFoundError(f"a queue id is an integer ≥ 0, not {first!r}")
        if first + len(starts) > len(queues):
            raise QueueNotFoundError(
                f"topic {topic!r} has queues 0 to {len(queues) - 1}; there is no queue "
                f"{first + len(starts) - 1}"
            )
        for start in starts:
            if not isinstance(start, int) or isinstance(start, bool) or start < 0:
                raise OffsetOutOfRangeError(f"a queue offset is an integer ≥ 0, not {start!r}")
        if (
            not isinstance(max_entries, int)
            or isinstance(max_entries, bool)
            or not 1 <= max_entries <= MAX_QUEUE_BYTES_ENTRIES
        ):
            raise StoreError(
                f"max_entries must be 1 to {MAX_QUEUE_BYTES_ENTRIES}, not {max_entries!r}"
            )
        bases: list[int] | None = None
        budget = max_entries
        answers = []
        for queue_id, start in enumerate(starts, start=first):
            consume_queue = queues[queue_id]
            low, high = consume_queue.min_offset, consume_queue.max_offset
            index = max(start, low)
            if index >= high or budget <= 0:
                answers.append(QueueBytes({}, start if budget <= 0 else index, low, high))
                continue
            if bases is None:
                with self._follow_lock:
                    bases = [segment.base for segment in self.commitlog.segments]
            end = min(high, index + budget)
            by_segment, next_offset = _sum_entries(consume_queue, index, end, bases)
            budget -= next_offset - index
            answers.append(QueueBytes(by_segment, next_offset, low, high))
        return answers

    def message_id(self, commit_offset: int) -> str:
        return self._reader.message_id(commit_offset)

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
            offset = group_position(
                self.committed_offset(group, topic, queue), consume_queue.min_offset
            )
        elif not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise OffsetOutOfRangeError(f"a queue offset is an integer ≥ 0, not {offset!r}")
        deadline = time.monotonic() + max(0.0, timeout_s)
        arrivals = self._reader.arrivals
        while True:
            messages = self.read(topic, queue, offset, max_messages)
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                return messages
            # An append in this process wakes the wait at once; one in another process is
            # seen by the next look at the shared state, every few milliseconds.
            arrivals.wait(min(remaining, _PULL_POLL_S), lambda: consume_queue.max_offset <= offset)


def _sum_entries(consume_queue, index: int, end: int, bases: list[int]) -> tuple[dict, int]:
    """Bytes of the records of entries ``index`` to ``end - 1`` per segment base (those
    below the log's first segment left out), and the index reached."""
    by_segment: dict[int, int] = {}
    # Entries of one queue are in commit-log order: the segment changes rarely, so each
    # entry is compared with the current segment's end, and bisect finds the next.
    segment_base = segment_end = -1
    held = 0
    while index < end:
        data = consume_queue.read(index, min(_BYTES_READ_ENTRIES, end - index))
        count = len(data) // ENTRY_SIZE
        if not count:  # its file was deleted meanwhile: retention took those records
            break
        for offset, size, _tag in ENTRY.iter_unpack(data[: count * ENTRY_SIZE]):
            if not size:
                continue
            if not segment_base <= offset < segment_end:
                if segment_base >= 0 and held:
                    by_segment[segment_base] = by_segment.get(segment_base, 0) + held
                held = 0
                at = bisect_right(bases, offset) - 1
                if at < 0:  # below the log's start: deleted by retention
                    segment_base, segment_end = -1, bases[0] if bases else -1
                    continue
                segment_base = bases[at]
                segment_end = bases[at + 1] if at + 1 < len(bases) else 1 << 63
            if segment_base >= 0:
                held += size
        index += count
    if segment_base >= 0 and held:
        by_segment[segment_base] = by_segment.get(segment_base, 0) + held
    return by_segment, index
