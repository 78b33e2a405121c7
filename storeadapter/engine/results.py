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


class Corruption(NamedTuple):
    """A bad stretch of the commit log found by a reader, recovery or ``verify``."""

    commit_offset: int
    length: int
    reason: str
