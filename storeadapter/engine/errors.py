"""Typed errors raised by the store engine.

Every error carries a sentence a person can act on; callers map them to
HTTP statuses or exit codes by class.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error the engine raises on purpose."""


class ConfigError(StoreError):
    """A configuration value is out of range or inconsistent."""


class StoreClosedError(StoreError):
    """The store was closed; open it again to use it."""


class StoreFailedError(StoreError):
    """A write or fsync failed; the store refuses writes until it is reopened."""


class DiskFullError(StoreError):
    """The disk is full (ENOSPC), or its use is past ``disk_reject_ratio``: the write was
    refused; the sentence says whether the store still takes writes."""


class StoreIOError(StoreError):
    """A file of the store could not be written (EIO and the like); the sentence says what
    was left as it was."""


class StoreFormatError(StoreError):
    """A file in the store directory is not in a format this version understands."""


class InvalidNameError(StoreError):
    """A topic or group name breaks the naming rules."""


class TopicExistsError(StoreError):
    """A topic of that name already exists."""


class TopicNotFoundError(StoreError):
    """No topic of that name exists."""


class QueueNotFoundError(StoreError):
    """The topic has no queue with that id."""


class QueueFrozenError(StoreError):
    """The queue (or every queue of the topic) is frozen: it takes no new messages."""


class QueueInUseError(StoreError):
    """A queue cannot be removed yet: it is not frozen, or groups have not consumed it."""


class InvalidMessageError(StoreError):
    """A message field (key, tag, property, body type) is not acceptable."""


class MessageTooLargeError(InvalidMessageError):
    """A message body is larger than ``max_message_bytes`` or a segment."""


class InvalidMessageIdError(StoreError):
    """A message id is not in the store's id format."""


class MessageNotFoundError(StoreError):
    """A well-formed message id points at no intact record."""


class OffsetOutOfRangeError(StoreError):
    """A queue offset is negative or beyond the queue's end."""


class OffsetConflictError(StoreError):
    """A conditional offset commit found another value: ``current`` is what is there."""

    def __init__(self, message: str, current: int | None) -> None:
        super().__init__(message)
        self.current = current


class CorruptRecordError(StoreError):
    """A record failed its frame or CRC check.

    ``offset`` is the commit-log offset where the bad bytes start.
    """

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"corrupt record at commit-log offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class StreamTopicError(StoreError):
    """The topic is of the other kind: events go to stream topics (``create_stream_topic``)
    through ``append_event``, ordinary messages to the other topics."""


class WrongExpectedVersionError(StoreError):
    """The stream is not at the version the append expected; ``current_version`` is where
    it is (0: no events). Read the stream again and retry, or give up."""

    def __init__(
        self, message: str, stream_id: str = "", expected_version: int = 0, current_version: int = 0
    ) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.expected_version = expected_version
        self.current_version = current_version


class DuplicateCommandError(StoreError):
    """The command id was already used in the stream: nothing was appended.
    ``version`` is the stream version the command produced (its last event's),
    ``first_version`` its first event's."""

    def __init__(
        self,
        message: str,
        stream_id: str = "",
        command_id: str = "",
        version: int = 0,
        first_version: int = 0,
    ) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.command_id = command_id
        self.version = version
        self.first_version = first_version
