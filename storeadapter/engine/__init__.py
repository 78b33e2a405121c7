"""Tidemark's store engine: commit log, consume queues, offsets. Never imports Django.

from storeadapter.engine import MessageStore, StoreConfig
with MessageStore.open("var/store", StoreConfig(flush_mode="sync")) as store:
    store.create_topic("orders", queues=4)
    result = store.append("orders", b"hello", key="order-1")
    store.get(result.message_id).body
"""

from .config import StoreConfig
from .consumer import Consumer, redrive_dlq
from .errors import (
    ConfigError,
    CorruptRecordError,
    DiskFullError,
    DuplicateCommandError,
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidNameError,
    MessageNotFoundError,
    MessageTooLargeError,
    OffsetConflictError,
    OffsetOutOfRangeError,
    QueueFrozenError,
    QueueInUseError,
    QueueNotFoundError,
    StoreClosedError,
    StoreError,
    StoreFailedError,
    StoreFormatError,
    StoreIOError,
    StreamTopicError,
    TopicExistsError,
    TopicNotFoundError,
    WrongExpectedVersionError,
)
from .membership import MemberInfo, group_members
from .metadata import TopicInfo
from .names import dlq_topic, retry_topic
from .offsets import OffsetChange, group_position
from .results import (
    STATUS_DUPLICATE,
    STATUS_FLUSH_TIMEOUT,
    STATUS_OK,
    AppendResult,
    Corruption,
    EventAppendResult,
    EventSlice,
    Message,
    QueueBytes,
    ReadResult,
    StoredEvent,
    StoredMessage,
)
from .store import MessageStore

__all__ = [
    "Consumer",
    "MemberInfo",
    "group_members",
    "group_position",
    "redrive_dlq",
    "STATUS_DUPLICATE",
    "STATUS_FLUSH_TIMEOUT",
    "STATUS_OK",
    "AppendResult",
    "ConfigError",
    "Corruption",
    "CorruptRecordError",
    "DiskFullError",
    "DuplicateCommandError",
    "EventAppendResult",
    "EventSlice",
    "InvalidMessageError",
    "InvalidMessageIdError",
    "InvalidNameError",
    "Message",
    "MessageNotFoundError",
    "MessageStore",
    "MessageTooLargeError",
    "OffsetChange",
    "OffsetConflictError",
    "OffsetOutOfRangeError",
    "QueueFrozenError",
    "QueueInUseError",
    "QueueNotFoundError",
    "QueueBytes",
    "ReadResult",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreFailedError",
    "StoreIOError",
    "StoreFormatError",
    "StoredEvent",
    "StoredMessage",
    "StreamTopicError",
    "TopicExistsError",
    "TopicInfo",
    "TopicNotFoundError",
    "WrongExpectedVersionError",
    "dlq_topic",
    "retry_topic",
]
