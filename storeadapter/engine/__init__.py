"""Tidemark's store engine: commit log, consume queues, offsets. Never imports Django.

from storeadapter.engine import MessageStore, StoreConfig
with MessageStore.open("var/store", StoreConfig(flush_mode="sync")) as store:
    store.create_topic("orders", queues=4)
    result = store.append("orders", b"hello", key="order-1")
    store.get(result.message_id).body
    store.get_many([first_id, second_id])  # several by id in one call, None where none

``get_many`` is not in DESIGN.md's list of the engine's API (that list is the shared
contract): it is this engine's own, documented in README.md ("Store engine") and
reading.py. Each id is answered as ``get`` answers it, but None for an id without a
message (``get``'s MessageNotFoundError); the records are read in commit-log order.
"""

# Public as modules: the clock and the file seam (tests replace their functions), and the
# engine's command line (the console's `tidemark` builds on its parser), imported when
# first asked for (__getattr__): it loads every store check, which no other user needs.
from . import clock, fileio, filters
from .admin import MAX_QUEUES_PER_TOPIC, MAX_SHARED_QUEUES
from .config import StoreConfig
from .consumer import Consumer
from .deadletters import (
    LAST_ERROR,
    ORIGIN_MESSAGE_ID,
    ORIGIN_QUEUE,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_TOPIC,
    RETRY_AT_MS,
    RETRY_COUNT,
    RETRY_PROPERTIES,
    redrive_dlq,
)
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
from .eventrecords import MAX_COMMAND_ID_LENGTH, MAX_STREAM_ID_LENGTH, STREAM_PROPERTY
from .exitcodes import EXIT_CORRUPT, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORE_ERROR, EXIT_USAGE
from .membership import MemberInfo, group_members
from .message_id import parse_message_id
from .metadata import TopicInfo, is_store
from .names import (
    DLQ_PREFIX,
    MAX_NAME_LENGTH,
    RETRY_PREFIX,
    check_new_topic_name,
    dlq_topic,
    retry_topic,
)
from .offsets import OffsetChange, group_position
from .reading import MAX_QUEUE_BYTES_ENTRIES
from .recovery import RecoveryReport
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
from .storestats import (
    CommitLogStats,
    IndexFileProblem,
    QueueStats,
    SegmentStats,
    StoreStats,
    StreamStats,
    TopicStats,
)
from .topicsettings import (
    SETTINGS_BY_NAME,
    TOPIC_SETTINGS,
    InvalidSettingError,
    TopicSetting,
)

__all__ = [
    "DLQ_PREFIX",
    "EXIT_CORRUPT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STORE_ERROR",
    "EXIT_USAGE",
    "LAST_ERROR",
    "MAX_COMMAND_ID_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_QUEUE_BYTES_ENTRIES",
    "MAX_QUEUES_PER_TOPIC",
    "MAX_SHARED_QUEUES",
    "MAX_STREAM_ID_LENGTH",
    "ORIGIN_MESSAGE_ID",
    "ORIGIN_QUEUE",
    "ORIGIN_QUEUE_OFFSET",
    "ORIGIN_TOPIC",
    "RETRY_AT_MS",
    "RETRY_COUNT",
    "RETRY_PREFIX",
    "RETRY_PROPERTIES",
    "STREAM_PROPERTY",
    "check_new_topic_name",
    "cli",
    "clock",
    "fileio",
    "filters",
    "is_store",
    "parse_message_id",
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
    "InvalidSettingError",
    "SETTINGS_BY_NAME",
    "TOPIC_SETTINGS",
    "TopicSetting",
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
    "QueueStats",
    "ReadResult",
    "TopicStats",
    "StreamStats",
    "StoreStats",
    "SegmentStats",
    "RecoveryReport",
    "IndexFileProblem",
    "CommitLogStats",
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


def __getattr__(name: str) -> object:
    if name == "cli":
        import importlib

        return importlib.import_module(f"{__name__}.cli")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
