"""Plain value types the engine hands out: what was appended, what was read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

STATUS_OK = "OK"
STATUS_FLUSH_TIMEOUT = "FLUSH_TIMEOUT"
STATUS_DUPLICATE = "DUPLICATE"


class Message(NamedTuple):
    """A message to append; ``append_batch`` also takes bytes, str or a dict of these fields."""

    body: bytes | str
    key: str | Sequence[str] | None = None
    tag: str | None = None
    queue: int | None = None
    properties: Mapping[str, str] | None = None
    born_time_ms: int | None = None
    dedup_id: str | None = None


class AppendResult(NamedTuple):
    """Where an appended message landed.

    ``status`` is ``"OK"``, or ``"FLUSH_TIMEOUT"`` in sync mode when the fsync that
    covers the record did not finish within ``flush_timeout_ms``: the record is
    written but not yet known to be durable; or ``"DUPLICATE"`` when a message with the
    same ``dedup_id`` was stored within ``dedup_window_s``: nothing was written, and the
    other fields describe the message stored then.
    """

    message_id: str
    topic: str
    queue: int
    queue_offset: int
    commit_offset: int
    store_time_ms: int
    status: str


class StoredMessage(NamedTuple):
    """A message as read back from the store."""

    message_id: str
    topic: str
    queue: int
    queue_offset: int
    commit_offset: int
    born_time_ms: int
    store_time_ms: int
    tag: str | None
    keys: list[str]
    properties: dict[str, str]
    body: bytes


class ReadResult(NamedTuple):
    """Messages read from a queue and the offset to continue from."""

    messages: list[StoredMessage]
    next_offset: int
    min_offset: int
    max_offset: int


class QueueBytes(NamedTuple):
    """Bytes of a stretch of a queue's records, by the commit-log segment holding them.

    ``by_segment`` maps a segment's base offset to the bytes of the stretch's records in
    it (retention deletes whole segments, so what a deleted segment held is simply left
    out); ``next_offset`` is the queue offset to continue from.
    """

    by_segment: dict[int, int]
    next_offset: int
    min_offset: int
    max_offset: int


class Corruption(NamedTuple):
    """A bad stretch of the commit log found by a reader, recovery or ``verify``."""

    commit_offset: int
    length: int
    reason: str


class EventAppendResult(NamedTuple):
    """Where an appended event landed: ``AppendResult``'s fields, then the stream and the
    event's version in it (1, 2, 3, …)."""

    message_id: str
    topic: str
    queue: int
    queue_offset: int
    commit_offset: int
    store_time_ms: int
    status: str
    stream_id: str
    version: int


class StoredEvent(NamedTuple):
    """An event of a stream as read back; it is also an ordinary message of its topic
    (``message_id``, ``queue``, ``queue_offset``, ``commit_offset``)."""

    stream_id: str
    version: int
    command_id: str | None
    event_type: str | None
    store_time_ms: int
    message_id: str
    body: bytes
    topic: str
    queue: int
    queue_offset: int
    commit_offset: int


class EventSlice(list):
    """The events ``read_stream`` found, in version order, and what it knows about the
    rest of the stream.

    ``stream_version`` is the stream's newest version. ``first_kept_version`` is the
    oldest version retention has not deleted (1 when none was deleted; past
    ``stream_version`` when every event was). ``deleted_by_retention`` is True when the
    read was asked to start below ``first_kept_version``: it started there instead.
    """

    def __init__(
        self,
        events: list[StoredEvent],
        stream_version: int,
        first_kept_version: int,
        deleted_by_retention: bool,
    ) -> None:
        super().__init__(events)
        self.stream_version = stream_version
        self.first_kept_version = first_kept_version
        self.deleted_by_retention = deleted_by_retention
