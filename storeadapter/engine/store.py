"""MessageStore: the public face of the engine (names are a contract, see DESIGN.md)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from zlib import crc32

from crc32c import crc32c

from . import fileio
from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .config import StoreConfig
from .consumequeue import ENTRY, ENTRY_SIZE, TIME_INDEX_INTERVAL, ConsumeQueue
from .errors import (
    CorruptRecordError,
    DiskFullError,
    InvalidMessageError,
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
    TopicExistsError,
    TopicNotFoundError,
)
from .flush import FlushService
from .follow import follow_log, trim_queue_end
from .handles import HandleCache
from .keyindex import KeyIndex
from .locks import ForkGuard, StoreLocks
from .message_id import format_message_id, parse_message_id
from .metadata import StoreIdentity, TopicInfo, TopicTable
from .names import DEDUP_KEY_PREFIX, DEDUP_PROPERTY, check_dedup_id, check_name
from .offsets import OffsetChange, OffsetStore
from .record import (
    HEADER_PACK,
    MARKER_SIZE,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    STORE_TIME,
    STORE_TIME_AT,
    TRAILER_PACK,
    decode_record,
    encode_keys,
    encode_properties,
    encode_tag,
    frame_intact,
    normalize_keys,
)
from .recovery import RecoveryReport, choose_start, recover
from .results import (
    STATUS_DUPLICATE,
    STATUS_FLUSH_TIMEOUT,
    STATUS_OK,
    AppendResult,
    Corruption,
    Message,
    ReadResult,
    StoredMessage,
)
from .retention import QueueDrop, RetentionReport, choose_segments, segment_newest_time
from .scan import RESYNC_WINDOW
from .segment import segment_name
from .sharedstate import SharedSnapshot, SharedState
from .tags import tag_hash
from .topics import Topic, TopicRegistry

MAX_QUEUES_PER_TOPIC = 1024
_CHUNK_BYTES = 8 << 20
MAX_READ_MESSAGES = 10_000
_TAG_SCAN_CHUNK = 1024
_PULL_POLL_S = 0.002
_DEDUP_CANDIDATES = 16
_INDEX_MARKER = ".complete"
_ANY = object()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# A message validated and encoded, waiting for its place in the log:
# (queue or None, routing key bytes or None, tag, keys, properties, body, born ms or None,
#  tag hash, keys to index, dedup id or None)
_Prepared = tuple


class MessageStore:
    """An open store directory. Use ``MessageStore.open(path, config)``; close it when done.

    Thread-safe, and several processes may open the same directory: appends take the
    store's write lock (a thread lock, then an OS file lock, per batch) and first catch
    up with what other processes appended; readers never take it.
    """

    def __init__(self, path: Path, config: StoreConfig) -> None:
        self.path = path
        self.config = config
        self._write_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._appended = threading.Condition()
        self._pull_waiters = 0
        self._sync_mode = config.flush_mode == "sync"
        self._closed = False
        self._failure: BaseException | None = None
        self._dirty_queues: set[ConsumeQueue] = set()
        self._corruptions: deque[Corruption] = deque(maxlen=1000)
        self._corrupt_offsets: set[int] = set()
        self._follow_lock = threading.RLock()
        self._locks: StoreLocks | None = None
        self._shared: SharedState | None = None
        self._seen = SharedSnapshot(0, 0, 0, 0, 0)
        self._forked = False
        self._disk_ratio = 0.0
        self.last_retention: RetentionReport | None = None

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: str | os.PathLike, config: StoreConfig | None = None) -> MessageStore:
        """Open (creating if needed) the store at ``path``.

        The first process to open it recovers it if it crashed; later ones join. Raises
        StoreFormatError when its files are not in a format this engine reads.
        """
        store = cls(Path(path), config or StoreConfig())
        try:
            store._open()
        except BaseException:
            store._release()
            raise
        ForkGuard.watch(store)
        return store

    def _open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self._locks = StoreLocks(self.path)
        with self._locks.opening() as alone:
            self._locks.lock_writes()
            try:
                self._shared = SharedState(self.path / "state")
                self.identity = StoreIdentity.load_or_create(
                    self.path / "store.json",
                    self.config.queue_file_entries,
                    self.config.segment_bytes,
                )
                self._id_prefix = self.identity.id_prefix
                self._table = TopicTable(self.path / "topics.json")
                self.commitlog = CommitLog(self.path / "commitlog", self.config.segment_bytes)
                self.commitlog.open(None if alone else self._shared.read().tail)
                self._handles = HandleCache(self.config.max_open_queue_files)
                self._registry = TopicRegistry(
                    self.path / "consumequeue", self.identity.queue_file_entries, self._handles
                )
                self._topics = self._registry.topics
                self._checkpoint = Checkpoint(self.path / "checkpoint")
                self._index = KeyIndex(
                    self.path / "index", self.config.index_slots, self.config.index_entries
                )
                if alone:
                    self._open_alone()
                else:
                    self._open_beside_others()
            finally:
                self._locks.unlock_writes()
        self.commitlog.last_store_ms = max(
            self.commitlog.last_store_ms, self.commitlog.store_time_before_tail()
        )
        self._registry.on_load = self._on_queue_load
        self._disk_ratio = self._probe_disk()
        self._flusher = FlushService(
            self._sync_log,
            self._flush_everything,
            self.config.flush_interval_ms / 1000,
            self._fail,
        )
        self._flush_everything()
        self._flusher.start(self.commitlog.flushed)

    def _open_alone(self) -> None:
        """No other process has the store open: recover it, then publish the state."""
        rebuild_from = self._registry.load(self._table, repair=True)
        index_from = self._open_index_for_recovery()
        if index_from is not None and (rebuild_from is None or index_from < rebuild_from):
            rebuild_from = index_from
        abort_marker = self.path / "abort"
        clean = not abort_marker.exists()
        start = choose_start(self.commitlog, self._checkpoint.state, rebuild_from)
        if not clean:
            # After a crash every queue may hold entries past what survived: check them
            # all now (after a clean close, each is checked when first used).
            for queue in self._registry.all_queues():
                queue.files  # noqa: B018 - loading is the point
        state = self._checkpoint.state
        self.last_recovery = recover(
            self.commitlog,
            self._registry.loaded_queues,
            self._registry.resolve,
            start,
            clean,
            durable_end=state.commitlog_flushed if state else 0,
            resync_window=max(RESYNC_WINDOW, 2 * self.config.max_message_bytes),
            index=self._index,
        )
        self._dirty_queues.update(self._registry.loaded_queues())
        for corruption in self.last_recovery.corruptions:
            self._note_corruption(corruption)
        fileio.write_atomic(
            self.path / "recovery.json", json.dumps(self.last_recovery.as_dict()).encode()
        )
        self._offsets = OffsetStore(self.path / "offsets", repair=True)
        abort_marker.touch()
        fileio.fsync_dir(self.path)
        previous = self._shared.read()
        self._seen = self._shared.write(
            tail=self.commitlog.tail,
            min_offset=self.commitlog.min_offset,
            topics_version=previous.topics_version + 1,
            offsets_version=previous.offsets_version + 1,
            index_version=previous.index_version + 1,
        )

    def _open_index_for_recovery(self) -> int | None:
        """Open the key index; if it is missing, empty it and return the log offset its
        rebuild starts from (the whole log)."""
        marker = self.path / "index" / _INDEX_MARKER
        self._index.directory.mkdir(exist_ok=True)
        if marker.exists():
            self._index.open()
            return None
        for leftover in self._index.directory.iterdir():
            if leftover.is_file():
                leftover.unlink()
        self._index.open()
        marker.touch()
        fileio.fsync_dir(self._index.directory)
        return self.commitlog.min_offset if self.commitlog.segments else None

    def _open_beside_others(self) -> None:
        """Other processes have the store open: take their published state as it is."""
        snapshot = self._shared.read()
        self._registry.load(self._table, repair=False)
        self._index.open()
        self.commitlog.tail = snapshot.tail
        self.commitlog.refresh(snapshot.tail)
        self._offsets = OffsetStore(self.path / "offsets", repair=False)
        self.last_recovery = self._read_last_recovery()
        self._seen = snapshot

    def _read_last_recovery(self) -> RecoveryReport:
        try:
            data = json.loads((self.path / "recovery.json").read_bytes())
            data["corruptions"] = [Corruption(**c) for c in data.get("corruptions", [])]
            return RecoveryReport(**data)
        except (OSError, ValueError, TypeError):
            return RecoveryReport(clean_shutdown=True)

    def _apply_notes(self, notes: list[tuple[int, int, int, int]], tail: int) -> set:
        """Take the queue ends other processes noted when they published up to ``tail``."""
        grown = set()
        log = self.commitlog
        for topic_id, queue_id, end, store_ms in notes:
            topic = self._registry.by_id.get(topic_id)
            if topic is not None and queue_id < len(topic.queues):
                queue = topic.queues[queue_id]
                if end > queue.max_offset:
                    queue.mark_dirty(queue.max_offset, end)
                    queue.max_offset = end
                    grown.add(queue)
            if store_ms > log.last_store_ms:
                log.last_store_ms = store_ms
        for segment in log.segments:
            if segment.end > log.tail and segment.base < tail:
                log.mark_unsynced(segment)
        log.tail = tail
        return grown

    def _on_queue_load(self, queue: ConsumeQueue) -> None:
        """A queue's files were just looked at: check its ends against the log (entries
        left by a writer that died before publishing, records deleted by retention)."""
        topic, queue_id = queue.owner
        trim_queue_end(self.commitlog, queue, topic, queue_id, self.commitlog.tail, False)
        queue.advance_min(self.commitlog.min_offset)

    # ----------------------------------------------------- following the others

    def _follow(self) -> None:
        """Catch up with what other processes published (appends, topics, offsets)."""
        snapshot = self._shared.read()
        if snapshot != self._seen:
            with self._follow_lock:
                self._follow_to(snapshot)

    def _follow_to(self, snapshot: SharedSnapshot) -> None:
        seen = self._seen
        if snapshot == seen:
            return
        if snapshot.topics_version != seen.topics_version:
            self._table = TopicTable(self.path / "topics.json")
            self._registry.reload(self._table)
            self._dirty_queues = {q for q in self._dirty_queues if not q.closed}
        if snapshot.min_offset > self.commitlog.min_offset:
            self.commitlog.drop_below(snapshot.min_offset)
            self._advance_queue_mins()
            self._index.refresh()
        if snapshot.tail > self.commitlog.tail:
            self.commitlog.refresh(snapshot.tail)
            notes = self._shared.notes(seen.ring_seq, snapshot.ring_seq)
            if notes is None:
                grown = follow_log(self.commitlog, snapshot.tail, self._registry.resolve)
            else:
                grown = self._apply_notes(notes, snapshot.tail)
            self._dirty_queues.update(grown)
        if snapshot.offsets_version != seen.offsets_version:
            self._offsets.catch_up()
        self._seen = snapshot

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the store's write lock (thread, then OS file), caught up with the others."""
        with self._write_lock:
            self._check_writable()
            self._locks.lock_writes()
            try:
                with self._follow_lock:
                    self._follow_to(self._shared.read())
                    yield
            finally:
                self._locks.unlock_writes()

    def _publish(self, **changes: int) -> None:
        """Make this process's writes visible to the others (caller holds the lock)."""
        self._seen = self._shared.write(**changes)

    # ------------------------------------------------------------------ topics

    def create_topic(self, name: str, queues: int = 4) -> TopicInfo:
        """Create a topic with ``queues`` queues; raise TopicExistsError if it exists."""
        check_name(name, "topic")
        self._check_queue_count(queues)
        with self._exclusive():
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} already exists")
            info = TopicInfo(name, queues, _now_ms(), self.commitlog.tail, id=self._table.next_id())
            self._registry.create(info)
            self._table.topics[name] = info
            self._table.save()
            self._publish(topics_version=self._seen.topics_version + 1)
            return self._topic_copy(info)

    def topics(self) -> list[TopicInfo]:
        """Every topic, sorted by name."""
        self._check_open()
        self._follow()
        return [self._topic_copy(t.info) for _, t in sorted(self._topics.items())]

    def topic(self, name: str) -> TopicInfo:
        return self._topic_copy(self._topic(name).info)

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its queues and the groups' offsets on it.

        Its records stay in the commit log until retention deletes their segments.
        """
        check_name(name, "topic")
        # The flush lock first (as flushes take it): a flush must not fsync a queue file
        # closed here.
        with self._flush_lock, self._exclusive():
            self._topic(name)
            del self._table.topics[name]
            self._table.save()
            for queue in self._registry.close_topic(name):
                self._dirty_queues.discard(queue)
            shutil.rmtree(self.path / "consumequeue" / name, ignore_errors=True)
            self._offsets.drop_topic(name)
            self._publish(
                topics_version=self._seen.topics_version + 1,
                offsets_version=self._seen.offsets_version + 1,
            )

    def add_queues(self, topic: str, count: int) -> TopicInfo:
        """Add ``count`` queues at the end of ``topic`` (ids continue from the last)."""
        self._check_queue_count(count)
        with self._exclusive():
            state = self._topic(topic)
            if state.info.queues + count > MAX_QUEUES_PER_TOPIC:
                raise StoreError(
                    f"topic {topic!r} has {state.info.queues} queues; adding {count} would pass "
                    f"the limit of {MAX_QUEUES_PER_TOPIC}"
                )
            self._registry.add_queues(state, count)
            since = self._queue_since(state.info) + [self.commitlog.tail] * count
            self._change_topic(state, queues=state.info.queues + count, queue_since=since)
            return self._topic_copy(state.info)

    def freeze_queue(self, topic: str, queue: int) -> TopicInfo:
        """Stop new appends to a queue; reads and consumption go on."""
        with self._exclusive():
            state = self._topic(topic)
            self._queue(topic, queue)
            if queue not in state.info.frozen:
                self._change_topic(state, frozen=sorted([*state.info.frozen, queue]))
            return self._topic_copy(state.info)

    def unfreeze_queue(self, topic: str, queue: int) -> TopicInfo:
        """Let a frozen queue take new appends again."""
        with self._exclusive():
            state = self._topic(topic)
            self._queue(topic, queue)
            if queue in state.info.frozen:
                self._change_topic(state, frozen=[q for q in state.info.frozen if q != queue])
            return self._topic_copy(state.info)

    def remove_queue(self, topic: str, queue: int) -> TopicInfo:
        """Remove the topic's last queue, once frozen and consumed to the end by every group.

        Otherwise QueueInUseError says why, naming each group that is behind and by how
        many messages (EQueue's safe scale-down). Its records stay in the commit log
        until retention deletes them; the groups' offsets on it are forgotten.
        """
        with self._flush_lock, self._exclusive():
            state = self._topic(topic)
            consume_queue = self._queue(topic, queue)
            last = state.info.queues - 1
            if queue != last:
                raise QueueInUseError(
                    f"only the last queue of {topic!r} (queue {last}) can be removed; "
                    "freeze the others to stop writes to them"
                )
            if last == 0:
                raise QueueInUseError(f"queue 0 is the only queue of {topic!r}; delete the topic")
            if queue not in state.info.frozen:
                raise QueueInUseError(
                    f"queue {queue} of {topic!r} is not frozen: freeze it, let the groups "
                    "consume it to the end, then remove it"
                )
            behind = self._groups_behind(topic, queue, consume_queue.max_offset)
            if behind:
                listed = ", ".join(f"{group} ({count} behind)" for group, count in behind)
                raise QueueInUseError(
                    f"queue {queue} of {topic!r} still has unconsumed messages for: {listed}"
                )
            self._dirty_queues.discard(consume_queue)
            self._registry.remove_last_queue(state)
            self._offsets.drop_queue(topic, queue)
            self._change_topic(
                state,
                queues=last,
                frozen=[q for q in state.info.frozen if q != queue],
                queue_since=self._queue_since(state.info)[:last],
                offsets_changed=True,
            )
            return self._topic_copy(state.info)

    def _groups_behind(self, topic: str, queue: int, end: int) -> list[tuple[str, int]]:
        """Groups consuming ``topic`` that have not reached ``end`` on ``queue``."""
        groups = sorted({g for (g, t, _q) in self._offsets.offsets if t == topic})
        behind = []
        for group in groups:
            committed = self._offsets.get(group, topic, queue) or 0
            if committed < end:
                behind.append((group, end - committed))
        return behind

    @staticmethod
    def _queue_since(info: TopicInfo) -> list[int]:
        return [info.since(q) for q in range(info.queues)]

    def _change_topic(self, state: Topic, offsets_changed: bool = False, **changes) -> None:
        """Save a topic's new metadata and tell the other processes (caller holds the lock)."""
        info = replace(state.info, **changes)
        self._table.topics[info.name] = info
        self._table.save()
        state.info = info
        published = {"topics_version": self._seen.topics_version + 1}
        if offsets_changed:
            published["offsets_version"] = self._seen.offsets_version + 1
        self._publish(**published)

    @staticmethod
    def _topic_copy(info: TopicInfo) -> TopicInfo:
        return replace(info, frozen=list(info.frozen), queue_since=list(info.queue_since))

    @staticmethod
    def _check_queue_count(queues: object) -> None:
        if not isinstance(queues, int) or isinstance(queues, bool):
            raise InvalidMessageError("the number of queues must be an integer")
        if not 1 <= queues <= MAX_QUEUES_PER_TOPIC:
            raise StoreError(f"a topic has 1 to {MAX_QUEUES_PER_TOPIC} queues, not {queues}")

    def _topic(self, name: str) -> Topic:
        self._check_open()
        state = self._topics.get(name)
        if state is None:
            self._follow()
            state = self._topics.get(name)
        if state is None:
            check_name(name, "topic")
            raise TopicNotFoundError(f"topic {name!r} does not exist")
        return state

    def _queue(self, topic: str, queue: int) -> ConsumeQueue:
        state = self._topic(topic)
        if not isinstance(queue, int) or isinstance(queue, bool):
            raise QueueNotFoundError(f"a queue id is an integer, not {queue!r}")
        if not 0 <= queue < len(state.queues):
            raise QueueNotFoundError(
                f"topic {topic!r} has queues 0 to {len(state.queues) - 1}; "
                f"there is no queue {queue}"
            )
        return state.queues[queue]

    # ----------------------------------------------------------------- appends

    def append(
        self,
        topic: str,
        body: bytes | str,
        key: str | list[str] | None = None,
        tag: str | None = None,
        queue: int | None = None,
        properties: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
    ) -> AppendResult:
        """Append one message and return where it landed.

        The queue is ``queue`` if given, else chosen by the key's hash, else round-robin.
        With ``dedup_id``, a message with the same id stored in this topic within
        ``dedup_window_s`` (by any process, before or after a restart) is not written
        again: its result comes back with status DUPLICATE.
        In sync mode this returns after an fsync covers the record (status OK) or after
        ``flush_timeout_ms`` (status FLUSH_TIMEOUT). Raises MessageTooLargeError,
        InvalidMessageError, TopicNotFoundError, QueueNotFoundError, StoreFailedError.
        """
        state = self._topics.get(topic) or self._topic(topic)
        if (
            type(body) is bytes
            and key is None
            and tag is None
            and queue is None
            and not properties
            and len(body) <= self._plain_body_limit(state)
            and dedup_id is None
        ):
            prepared = (None, None, b"", b"", b"", body, None, 0, (), None)
        else:
            prepared = self._prepare(state, body, key, tag, queue, properties, None, dedup_id)
        return self._append_prepared(state, [prepared])[0]

    def append_batch(
        self, topic: str, messages: Iterable[Message | Mapping | bytes | str]
    ) -> list[AppendResult]:
        """Append many messages to one topic in one locked write (the fast path).

        Each item is a Message, a dict with Message's fields, or a body (bytes or str).
        Every message is validated before any is written: one bad message writes none.
        """
        state = self._topic(topic)
        prepared = []
        limit = self._plain_body_limit(state)
        for item in messages:
            if type(item) is bytes and len(item) <= limit:
                prepared.append((None, None, b"", b"", b"", item, None, 0, (), None))
            elif isinstance(item, (bytes, bytearray, memoryview, str)):
                prepared.append(self._prepare(state, item, None, None, None, None, None))
            elif isinstance(item, Message):
                prepared.append(self._prepare(state, *item))
            elif isinstance(item, Mapping):
                unknown = set(item) - set(Message._fields)
                if unknown or "body" not in item:
                    raise InvalidMessageError(
                        "a message dict needs 'body' and may have "
                        f"{', '.join(Message._fields[1:])}; got {sorted(item)}"
                    )
                prepared.append(self._prepare(state, *Message(**item)))
            else:
                raise InvalidMessageError(
                    f"a message is bytes, str, a dict or a Message, not {type(item).__name__}"
                )
        if not prepared:
            return []
        return self._append_prepared(state, prepared)

    def _plain_body_limit(self, state: Topic) -> int:
        """The largest body that fits, for a message with no key, tag or properties."""
        fits = self.commitlog.capacity() - RECORD_OVERHEAD - len(state.name_bytes)
        return min(self.config.max_message_bytes, fits)

    def _prepare(
        self, state, body, key, tag, queue, properties, born_ms, dedup_id=None
    ) -> _Prepared:
        if isinstance(body, str):
            body = body.encode()
        elif isinstance(body, (bytearray, memoryview)):
            body = bytes(body)
        elif not isinstance(body, bytes):
            raise InvalidMessageError(f"a body is bytes or str, not {type(body).__name__}")
        if len(body) > self.config.max_message_bytes:
            raise MessageTooLargeError(
                f"the body is {len(body)} bytes; the limit is {self.config.max_message_bytes}"
            )
        if queue is not None:
            if not isinstance(queue, int) or isinstance(queue, bool):
                raise QueueNotFoundError(f"a queue id is an integer, not {queue!r}")
            if not 0 <= queue < len(state.queues):
                raise QueueNotFoundError(
                    f"topic {state.info.name!r} has queues 0 to {len(state.queues) - 1}; "
                    f"there is no queue {queue}"
                )
            if queue in state.info.frozen:
                raise QueueFrozenError(
                    f"queue {queue} of {state.info.name!r} is frozen: it takes no new messages"
                )
        keys = normalize_keys(key) if key is not None else []
        tag_bytes = encode_tag(tag)
        if born_ms is not None and (not isinstance(born_ms, int) or born_ms < 0):
            raise InvalidMessageError("born_time_ms must be a non-negative integer")
        keys_bytes = encode_keys(keys) if keys else b""
        index_keys = tuple(keys)
        if dedup_id is not None:
            check_dedup_id(dedup_id)
            properties = {**(properties or {}), DEDUP_PROPERTY: dedup_id}
            index_keys += (DEDUP_KEY_PREFIX + dedup_id,)
        properties_bytes = encode_properties(properties)
        length = (
            RECORD_OVERHEAD
            + len(state.name_bytes)
            + len(tag_bytes)
            + len(keys_bytes)
            + len(properties_bytes)
            + len(body)
        )
        if length > self.commitlog.capacity():
            raise MessageTooLargeError(
                f"the message takes {length} bytes on disk, more than a commit-log segment "
                f"holds ({self.commitlog.capacity()}); send less or raise segment_bytes"
            )
        return (
            queue,
            keys[0].encode() if keys else None,
            tag_bytes,
            keys_bytes,
            properties_bytes,
            body,
            born_ms,
            tag_hash(tag_bytes),
            index_keys,
            dedup_id,
        )

    def _append_prepared(self, state: Topic, batch: list[_Prepared]) -> list[AppendResult]:
        """Write a validated batch under the write lock, publish it, wait if sync.

        Steps: 1. take the thread lock, then the OS write lock, and catch up with what
        other processes wrote; 2. find messages whose dedup id is already stored;
        3. encode and write the others (``_write_records``); 4. write their consume-queue
        and key-index entries; 5. publish the new tail; 6. in sync mode, wait for the
        fsync that covers it.
        """
        if self._disk_ratio >= self.config.disk_reject_ratio:
            raise DiskFullError(
                f"the disk holding {self.path} is {self._disk_ratio:.0%} full, past "
                f"disk_reject_ratio ({self.config.disk_reject_ratio:.0%}): appends are "
                "refused until retention or an operator frees space"
            )
        with self._write_lock, self._follow_lock:
            self._check_writable()
            self._locks.lock_writes()
            try:
                self._follow_to(self._shared.read())
                if self._topics.get(state.info.name) is not state:
                    raise TopicNotFoundError(f"topic {state.info.name!r} was deleted meanwhile")
                now = _now_ms()
                duplicates = self._find_duplicates(state, batch, now)
                try:
                    results, next_offsets, entries, index_items = self._write_records(
                        state, batch, now, duplicates
                    )
                    self._dispatch(state.queues, next_offsets, entries)
                    if index_items:
                        self._index.put_many(index_items)
                except OSError as error:
                    self._fail(error)
                    raise StoreFailedError(
                        f"writing to the store failed ({error}); it refuses writes until reopened"
                    ) from error
                end = self.commitlog.tail
                topic_id = state.info.id
                ring_seq = self._shared.publish_tail(
                    end,
                    [(topic_id, q, next_offsets[q], now) for q in entries if entries[q]],
                )
                self._seen = self._seen._replace(tail=end, ring_seq=ring_seq)
            finally:
                self._locks.unlock_writes()
        if self._pull_waiters:
            with self._appended:
                self._appended.notify_all()
        if self._sync_mode:
            if not self._flusher.wait_durable(end, self.config.flush_timeout_ms / 1000):
                return [
                    r if r.status == STATUS_DUPLICATE else r._replace(status=STATUS_FLUSH_TIMEOUT)
                    for r in results
                ]
        elif end - self._flusher.flushed > self.config.flush_dirty_bytes:
            self._flusher.kick()
        return results

    def _write_records(
        self,
        state: Topic,
        batch: list[_Prepared],
        now: int,
        duplicates: dict[str, AppendResult],
    ) -> tuple[list[AppendResult], dict[int, int], dict[int, list[bytes]], list[tuple]]:
        """Encode the batch at the commit-log tail and write it, one pwrite per segment.

        A record is ``record.encode_head`` + body + ``record.encode_trailer``, inlined
        here because this loop is the hot path. A record that does not fit in what is
        left of the segment closes it with an end-of-segment marker and goes to a new one.
        Returns the results, each queue's next offset, the packed consume-queue entries
        per queue and the key-index items.
        """
        topic_name = state.info.name
        topic_bytes = state.name_bytes
        topic_len = len(topic_bytes)
        fixed = RECORD_OVERHEAD + topic_len
        queues = state.queues
        writable = state.writable
        writable_count = len(writable)
        log = self.commitlog
        prefix = self._id_prefix
        new_result = tuple.__new__
        pack_entry = ENTRY.pack
        pack_head = HEADER_PACK
        pack_trailer = TRAILER_PACK
        checksum = crc32c
        results: list[AppendResult] = []
        next_offsets: dict[int, int] = {}
        entries: dict[int, list[bytes]] = {}
        index_items: list[tuple[str, str, int, int]] = []
        time_marks: list[tuple[int, int]] = []
        parts: list[bytes] = []
        add = parts.append
        if not writable_count and any(item[0] is None for item in batch):
            raise QueueFrozenError(
                f"every queue of {topic_name!r} is frozen: it takes no new messages"
            )
        round_robin = state.round_robin
        if now < log.last_store_ms:
            now = log.last_store_ms  # store times never go back, even if the clock does
        segment = log.writable_segment()
        tail = log.tail
        if self._shared.mark_writing():
            log.clear_after_tail(segment)
        chunk_start = tail - segment.base
        chunk_end = tail
        segment_limit = segment.end - MARKER_SIZE
        for (
            queue_id,
            route_key,
            tag,
            keys,
            props,
            body,
            born,
            hashed,
            index_keys,
            dedup_id,
        ) in batch:
            if dedup_id is not None and dedup_id in duplicates:
                results.append(duplicates[dedup_id])
                continue
            if queue_id is None:
                if route_key is not None:
                    queue_id = writable[crc32(route_key) % writable_count]
                else:
                    queue_id = writable[round_robin % writable_count]
                    round_robin += 1
            queue_offset = next_offsets.get(queue_id)
            if queue_offset is None:
                queue_offset = queues[queue_id].max_offset
                entries[queue_id] = []
            body_len = len(body)
            if tag or keys or props:
                length = fixed + len(tag) + len(keys) + len(props) + body_len
                meta = topic_bytes + tag + keys + props
            else:
                length = fixed + body_len
                meta = topic_bytes
            if tail + length > segment_limit or tail - chunk_end > _CHUNK_BYTES:
                log.write(segment, chunk_start, b"".join(parts))
                parts.clear()
                chunk_start = tail - segment.base
                chunk_end = tail
                if tail + length > segment_limit:
                    segment = log.close_segment(segment, chunk_start)
                    tail = chunk_end = segment.base
                    chunk_start = 0
                    segment_limit = segment.end - MARKER_SIZE
            next_offsets[queue_id] = queue_offset + 1
            head = (
                pack_head(
                    length,
                    RECORD_MAGIC,
                    tail,
                    queue_offset,
                    now if born is None else born,
                    now,
                    queue_id,
                    body_len,
                    0,
                    topic_len,
                    len(tag),
                    len(keys),
                    len(props),
                )
                + meta
            )
            add(head)
            add(body)
            add(pack_trailer(checksum(body, checksum(head)), length))
            entries[queue_id].append(pack_entry(tail, length, hashed))
            if not queue_offset % TIME_INDEX_INTERVAL:
                time_marks.append((queue_id, queue_offset))
            result = new_result(
                AppendResult,
                (f"{prefix}{tail:016X}", topic_name, queue_id, queue_offset, tail, now, STATUS_OK),
            )
            results.append(result)
            if index_keys:
                for index_key in index_keys:
                    index_items.append((topic_name, index_key, tail, now))
                if dedup_id is not None:
                    duplicates[dedup_id] = result._replace(status=STATUS_DUPLICATE)
            tail += length
        state.round_robin = round_robin
        if parts:
            log.write(segment, chunk_start, b"".join(parts))
        log.tail = tail
        log.last_store_ms = now
        for queue_id, queue_offset in time_marks:
            queues[queue_id].time_index.write([(queue_offset, now)])
        return results, next_offsets, entries, index_items

    def _find_duplicates(
        self, state: Topic, batch: list[_Prepared], now: int
    ) -> dict[str, AppendResult]:
        """Results of messages already stored under the batch's dedup ids, by id."""
        found: dict[str, AppendResult] = {}
        since = now - self.config.dedup_window_s * 1000
        for item in batch:
            dedup_id = item[9]
            if dedup_id is None or dedup_id in found:
                continue
            for offset in self._index.query(
                state.info.name, DEDUP_KEY_PREFIX + dedup_id, since, None, _DEDUP_CANDIDATES
            ):
                message = self._record_at(offset)
                if (
                    message is not None
                    and message.topic == state.info.name
                    and offset >= state.info.created_offset
                    and message.properties.get(DEDUP_PROPERTY) == dedup_id
                ):
                    found[dedup_id] = AppendResult(
                        message.message_id,
                        message.topic,
                        message.queue,
                        message.queue_offset,
                        offset,
                        message.store_time_ms,
                        STATUS_DUPLICATE,
                    )
                    break
        return found

    def _record_at(self, commit_offset: int) -> StoredMessage | None:
        """The intact record starting at ``commit_offset``, or None."""
        if not self.commitlog.min_offset <= commit_offset < self.commitlog.tail:
            return None
        found = self.commitlog.locate(commit_offset)
        if found is None:
            return None
        segment, pos = found
        try:
            return decode_record(segment.view, pos, segment.size, commit_offset, self._id_prefix)
        except CorruptRecordError:
            return None

    def _dispatch(self, queues, next_offsets, entries) -> None:
        for queue_id, packed in entries.items():
            if not packed:
                continue
            queue = queues[queue_id]
            queue.write(next_offsets[queue_id] - len(packed), b"".join(packed))
            self._dirty_queues.add(queue)

    # ------------------------------------------------------------------- reads

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
        wanted_hash = tag_hash(encode_tag(tag)) if tag is not None else None
        prefix = self._id_prefix
        position = max(offset, consume_queue.min_offset)
        messages: list[StoredMessage] = []
        while len(messages) < max_messages and position < consume_queue.max_offset:
            count = max_messages - len(messages) if wanted_hash is None else _TAG_SCAN_CHUNK
            packed = consume_queue.read(position, count)
            if not packed:
                break
            segment = None
            for commit_offset, size, hashed in ENTRY.iter_unpack(packed):
                position += 1
                if not size or (wanted_hash is not None and hashed != wanted_hash):
                    continue
                if segment is None or not segment.base <= commit_offset < segment.end:
                    found = self.commitlog.locate(commit_offset)
                    if found is None:
                        continue
                    segment = found[0]
                try:
                    message = decode_record(
                        segment.view,
                        commit_offset - segment.base,
                        segment.size,
                        commit_offset,
                        prefix,
                        size,
                    )
                except CorruptRecordError as error:
                    self._note_corruption(Corruption(commit_offset, size, error.reason))
                    continue
                if tag is not None and message.tag != tag:
                    continue
                messages.append(message)
                if len(messages) == max_messages:
                    break
        return ReadResult(messages, position, consume_queue.min_offset, consume_queue.max_offset)

    def get(self, message_id: str) -> StoredMessage:
        """The message with this id, read in one lookup.

        Raises InvalidMessageIdError for a malformed id, MessageNotFoundError when no
        intact record starts where it points, CorruptRecordError when the record there
        fails its CRC check.
        """
        store_id, commit_offset = parse_message_id(message_id)
        self._check_open()
        self._follow()
        if store_id != self.identity.store_id:
            raise MessageNotFoundError(
                f"message {message_id} belongs to store {store_id:08X}, "
                f"not to this store ({self._id_prefix})"
            )
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
        if pos + 8 > segment.size or int.from_bytes(segment.map[pos + 4 : pos + 8], "little") != (
            RECORD_MAGIC
        ):
            raise MessageNotFoundError(
                f"no message starts at commit-log offset {commit_offset} (id {message_id})"
            )
        try:
            return decode_record(segment.view, pos, segment.size, commit_offset, self._id_prefix)
        except CorruptRecordError as error:
            says_here = int.from_bytes(segment.map[pos + 8 : pos + 16], "little") == commit_offset
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

    def _store_time(self, consume_queue: ConsumeQueue, index: int) -> int | None:
        entry = consume_queue.entry(index)
        if entry is None:
            return None
        found = self.commitlog.locate(entry[0])
        if found is None:
            return None
        segment, pos = found
        return STORE_TIME.unpack_from(segment.map, pos + STORE_TIME_AT)[0]

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

    def message_id(self, commit_offset: int) -> str:
        return format_message_id(self.identity.store_id, commit_offset)

    # ----------------------------------------------------------------- offsets

    def commit_offset(
        self,
        group: str,
        topic: str,
        queue: int,
        offset: int,
        who: str = "consumer",
        reason: str = "commit",
        expected: int | None | object = _ANY,
    ) -> OffsetChange | None:
        """Durably record ``offset`` (the next to consume) as the group's position.

        Every change is kept in the group's history with ``who`` and ``reason``.
        With ``expected``, the commit happens only if the committed offset is still that
        value (None: never committed), else OffsetConflictError: how a consumer notices
        that an operator reset the offsets under it. Raises OffsetOutOfRangeError for
        an offset below 0 or above the queue's max.
        """
        check_name(group, "group")
        consume_queue = self._queue(topic, queue)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise OffsetOutOfRangeError(f"an offset is an integer ≥ 0, not {offset!r}")
        if offset > consume_queue.max_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is past the end of {topic}/{queue} "
                f"(max offset {consume_queue.max_offset})"
            )
        with self._exclusive():
            current = self._offsets.get(group, topic, queue)
            if expected is not _ANY and current != expected:
                raise OffsetConflictError(
                    f"the offset of {group} on {topic}/{queue} is {current}, not {expected}: "
                    "someone else changed it (an operator's reset?); continue from it",
                    current,
                )
            try:
                change = self._offsets.commit(group, topic, queue, offset, who, reason)
            except OSError as error:
                self._fail(error)
                raise StoreFailedError(f"saving the offset failed ({error})") from error
            if change is not None:
                self._publish(offsets_version=self._seen.offsets_version + 1)
            return change

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None:
        """The group's committed offset on a queue, or None if it never committed."""
        check_name(group, "group")
        self._check_open()
        self._follow()
        self._queue(topic, queue)
        return self._offsets.get(group, topic, queue)

    def offset_history(
        self, group: str, topic: str | None = None, queue: int | None = None, limit: int = 100
    ) -> list[OffsetChange]:
        """The group's offset changes, newest first, optionally for one topic or queue."""
        check_name(group, "group")
        self._check_open()
        self._follow()
        history = self._offsets.history.get(group, ())
        picked = [
            change
            for change in reversed(history)
            if (topic is None or change.topic == topic) and (queue is None or change.queue == queue)
        ]
        return picked[:limit]

    def groups(self) -> list[str]:
        """Every group that has committed an offset, sorted."""
        self._check_open()
        self._follow()
        return sorted({group for group, _, _ in self._offsets.offsets})

    def pull(
        self,
        group: str,
        topic: str,
        queue: int,
        max_messages: int = 32,
        timeout_s: float = 0.0,
    ) -> list[StoredMessage]:
        """Messages after the group's committed offset; waits up to ``timeout_s`` for some.

        Pulling does not commit: the consumer commits what it has processed.
        """
        consume_queue = self._queue(topic, queue)
        committed = self.committed_offset(group, topic, queue)
        offset = consume_queue.min_offset if committed is None else committed
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

    # -------------------------------------------------------------- durability

    def flush(self) -> None:
        """fsync the commit log and consume queues, then write the checkpoint."""
        self._check_open()
        if self._failure is not None:
            raise StoreFailedError(self._failure_sentence())
        try:
            self._flusher.advance(self._flush_everything())
        except OSError as error:
            self._fail(error)
            raise StoreFailedError(self._failure_sentence()) from error

    def _sync_log(self) -> int:
        """fsync the commit log up to the current tail; return that tail.

        Flushes run one at a time: a flush that took no segments must not report the
        log durable while another is still syncing the segments it took.
        """
        with self._flush_lock:
            with self._write_lock:
                target = self.commitlog.tail
                pending = self.commitlog.take_unsynced()
            for segment in pending:
                segment.sync()
            self.commitlog.flushed = max(self.commitlog.flushed, target)
            return target

    def _flush_everything(self) -> int:
        """fsync the log and the consume queues, then write the checkpoint; return the tail."""
        with self._flush_lock:
            self._follow()
            with self._write_lock:
                target = self.commitlog.tail
                segments = self.commitlog.take_unsynced()
                queue_files = [f for q in self._dirty_queues for f in q.take_dirty()]
                time_indexes = [q.time_index for q in self._dirty_queues]
                self._dirty_queues.clear()
                index_files = self._index.take_dirty()
                if self._index.files and self._index.files[-1] not in index_files:
                    index_files.append(self._index.files[-1])  # other processes write it too
            for segment in segments:
                segment.sync()
            for queue_file in queue_files:
                queue_file.sync()
            for time_index in time_indexes:
                time_index.sync()
            for index_file in index_files:
                index_file.sync()
            self._checkpoint.save(target, target, target)
            self.commitlog.flushed = max(self.commitlog.flushed, target)
            self._disk_ratio = self._probe_disk()
            return target

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        flusher = getattr(self, "_flusher", None)
        if flusher is not None:
            flusher.fail(error)

    def _failure_sentence(self) -> str:
        return (
            f"the store failed to write or fsync ({self._failure}); it refuses writes "
            "until it is closed and reopened"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"the store at {self.path} is closed")
        if self._forked:
            raise StoreClosedError(
                f"the store at {self.path} was opened before this process forked; "
                "open it again in this process"
            )

    def _check_writable(self) -> None:
        self._check_open()
        if self._failure is not None:
            raise StoreFailedError(self._failure_sentence())

    def _note_corruption(self, corruption: Corruption) -> None:
        if corruption.commit_offset not in self._corrupt_offsets:
            self._corrupt_offsets.add(corruption.commit_offset)
            self._corruptions.append(corruption)

    @property
    def failed(self) -> bool:
        return self._failure is not None

    # --------------------------------------------------------------- retention

    def delete_expired(self, now_ms: int | None = None) -> RetentionReport:
        """Delete whole commit-log segments past retention (or past the disk limits).

        Oldest first, never the active segment. Queue minimum offsets move past the
        deleted records, and consume-queue and key-index files wholly below them go too.
        The report says what was freed and, per queue and group, how many of the dropped
        messages the group had not consumed.
        """
        now = _now_ms() if now_ms is None else now_ms
        retention_ms = int(self.config.retention_hours * 3_600_000)
        with self._flush_lock, self._exclusive():
            used, total = fileio.disk_usage(self.path)
            ratio = used / total if total else 0.0
            report = RetentionReport(now, retention_ms, ratio)
            plan = choose_segments(
                self.commitlog,
                now,
                retention_ms,
                ratio,
                self.config.disk_force_ratio,
                self.config.disk_warn_ratio,
                1 / total if total else 0.0,
            )
            if plan:
                before = {
                    (name, queue_id): queue.min_offset
                    for name, topic in self._topics.items()
                    for queue_id, queue in enumerate(topic.queues)
                }
                new_min = plan[-1][0].end
                for segment, reason in plan:
                    report.deleted_segments.append(
                        {"name": segment_name(segment.base), "base": segment.base, "reason": reason}
                    )
                    report.freed_bytes += os.fstat(segment.fd).st_blocks * 512
                self.commitlog.drop_below(new_min)
                self._advance_queue_mins()
                report.index_files_deleted = self._index.delete_below(new_min)
                report.queues = self._queue_drops(before)
                self._publish(min_offset=self.commitlog.min_offset)
            self._disk_ratio = report.disk_ratio_after = self._probe_disk()
        self.last_retention = report
        fileio.write_atomic(self.path / "retention.json", json.dumps(report.as_dict()).encode())
        return report

    def _queue_drops(self, before: dict[tuple[str, int], int]) -> list[QueueDrop]:
        drops = []
        for (name, queue_id), old_min in before.items():
            topic = self._topics.get(name)
            if topic is None:
                continue
            new_min = topic.queues[queue_id].min_offset
            if new_min == old_min:
                continue
            drop = QueueDrop(name, queue_id, old_min, new_min)
            for (group, group_topic, group_queue), committed in self._offsets.offsets.items():
                if group_topic == name and group_queue == queue_id:
                    drop.unconsumed_by_group[group] = max(0, new_min - max(committed, old_min))
            drops.append(drop)
        return drops

    def expiry_forecast(self, now_ms: int | None = None) -> list[dict]:
        """When retention will next delete messages each group has not consumed.

        One row per group and queue with unconsumed messages in a sealed segment:
        ``expires_at_ms`` (when that segment passes retention), ``messages`` (how many
        unconsumed messages of that queue it holds) and ``overdue`` (already past it).
        Messages still in the active segment are not at risk until it is sealed.
        """
        self._check_open()
        self._follow()
        now = _now_ms() if now_ms is None else now_ms
        retention_ms = int(self.config.retention_hours * 3_600_000)
        log = self.commitlog
        rows = []
        for (group, name, queue_id), committed in sorted(self._offsets.offsets.items()):
            topic = self._topics.get(name)
            if topic is None or queue_id >= len(topic.queues):
                continue
            queue = topic.queues[queue_id]
            start = max(committed, queue.min_offset)
            entry = queue.entry(start) if start < queue.max_offset else None
            if entry is None:
                continue
            position = next(
                (i for i, s in enumerate(log.segments) if s.base <= entry[0] < s.end), None
            )
            if position is None or position == len(log.segments) - 1:
                continue
            newest = segment_newest_time(log, position)
            if newest is None:
                continue
            segment_end = log.segments[position].end
            rows.append(
                {
                    "group": group,
                    "topic": name,
                    "queue": queue_id,
                    "committed_offset": committed,
                    "expires_at_ms": newest + retention_ms,
                    "overdue": newest + retention_ms <= now,
                    "messages": self._entries_below(queue, start, segment_end),
                }
            )
        return rows

    def _entries_below(self, queue: ConsumeQueue, start: int, offset: int) -> int:
        """How many entries from ``start`` point below commit-log ``offset``."""
        low, high = start, queue.max_offset
        while low < high:
            middle = (low + high) // 2
            entry = queue.entry(middle)
            if entry is not None and entry[0] >= offset:
                high = middle
            else:
                low = middle + 1
        return low - start

    def _advance_queue_mins(self) -> None:
        log_min = self.commitlog.min_offset
        for queue in self._registry.loaded_queues():
            queue.advance_min(log_min)

    def _probe_disk(self) -> float:
        used, total = fileio.disk_usage(self.path)
        return used / total if total else 0.0

    # ------------------------------------------------------------------- stats

    def stats(self) -> dict:
        """Segments, disk use, per-topic and per-queue offsets, flush state, last recovery."""
        self._check_open()
        self._follow()
        log = self.commitlog
        segments = [
            {
                "name": segment_name(s.base),
                "base": s.base,
                "size": s.size,
                "disk_bytes": os.fstat(s.fd).st_blocks * 512,
                "used_bytes": max(0, min(log.tail, s.end) - s.base),
            }
            for s in list(log.segments)
        ]
        topics = {}
        for name, state in sorted(self._topics.items()):
            queue_stats = {}
            for queue_id, queue in enumerate(state.queues):
                queue_stats[queue_id] = {
                    "min_offset": queue.min_offset,
                    "max_offset": queue.max_offset,
                    "messages": queue.max_offset - queue.min_offset,
                    "last_store_time_ms": self._last_store_time(queue),
                }
            topics[name] = {
                "queues": queue_stats,
                "messages": sum(q["messages"] for q in queue_stats.values()),
                "created_ms": state.info.created_ms,
            }
        return {
            "path": str(self.path),
            "store_id": self._id_prefix,
            "flush_mode": self.config.flush_mode,
            "segment_bytes": self.config.segment_bytes,
            "segments": segments,
            "segment_count": len(segments),
            "disk_bytes": sum(s["disk_bytes"] for s in segments),
            "commit_log": {
                "min_offset": log.min_offset,
                "tail": log.tail,
                "flushed": self._flusher.flushed,
            },
            "last_flush_ms": self._flusher.last_flush_ms,
            "topics": topics,
            "groups": self.groups(),
            "last_recovery": self.last_recovery.as_dict(),
            "last_retention": self._read_json("retention.json"),
            "disk_ratio": round(self._disk_ratio, 4),
            "retention_hours": self.config.retention_hours,
            "corruptions": [c._asdict() for c in self._corruptions],
            "failed": None if self._failure is None else str(self._failure),
        }

    def _read_json(self, name: str) -> dict | None:
        try:
            return json.loads((self.path / name).read_bytes())
        except (OSError, ValueError):
            return None

    def _last_store_time(self, queue: ConsumeQueue) -> int | None:
        index = queue.max_offset - 1
        while index >= queue.min_offset:
            entry = queue.entry(index)
            if entry is not None:
                found = self.commitlog.locate(entry[0])
                if found is None:
                    return None
                segment, pos = found
                return int.from_bytes(segment.map[pos + 32 : pos + 40], "little", signed=True)
            index -= 1
        return None

    # ----------------------------------------------------------------- closing

    def close(self) -> None:
        """Flush, write the checkpoint, and leave; the last process to leave marks the
        shutdown clean. Safe to call twice."""
        if self._closed:
            return
        self._flusher.stop()
        clean = self._failure is None and not self._forked
        if clean:
            try:
                self._flush_everything()
            except OSError as error:
                self._fail(error)
                clean = False
        self._closed = True
        with self._appended:
            self._appended.notify_all()
        self._registry.close()
        self._handles.close()
        self._index.close()
        self.commitlog.close()
        self._checkpoint.close()
        self._offsets.close()
        with self._locks.closing() as last:
            if last and clean:
                (self.path / "abort").unlink(missing_ok=True)
                fileio.fsync_dir(self.path)
        self._release()

    def _release(self) -> None:
        if self._shared is not None:
            self._shared.close()
            self._shared = None
        if self._locks is not None:
            self._locks.close()
            self._locks = None

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MessageStore({str(self.path)!r}, flush_mode={self.config.flush_mode!r})"


__all__ = ["MessageStore", "ENTRY_SIZE"]
