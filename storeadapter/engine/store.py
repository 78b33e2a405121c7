"""MessageStore: the public face of the engine (names are a contract, see DESIGN.md).

``MessageStore`` composes parts that own their state, and keeps the decisions that span
them: opening and recovery, following other processes, the write lock, flushes, closing.

* the commit log (``CommitLog``, commitlog.py): segments, tail, flushed position;
* the queues (``TopicRegistry``, topics.py): topics and their consume queues or shared
  blocks, the open queue files, and the queues written since the last flush (``dirty``);
* the key index (``KeyIndex``, keyindex.py) and the event streams (``Streams``);
* the reader (``Reader``, reader.py): checked reads of the log by queue offset, id, time
  and key; the damage reads and recovery found (``CorruptionLog``); the pulls waiting in
  this process for an append (``Arrivals``);
* the disk use as last measured (``DiskUse``, diskuse.py), which appends are judged by;
* the writer (``Writer``, writer.py): preparing messages, the sync-mode combiner
  (``WriteCombiner``), writing groups of batches under the write lock (records, queue,
  time-index and key-index entries, dedup, appends to streams), clearing a failed
  write, and the failure that makes the store refuse writes;
* the committed offsets (``OffsetStore``), the checkpoint, the shared state
  (``SharedState``), the locks and the write session (``WriteSession``), the flusher
  (``FlushService``).

Its public methods are defined here and in one mixin per concern: ``Appending``
(``append`` and ``append_batch``: find the topic, then ask the writer), ``Reading``
(read methods: check, follow, find the queue, then ask the reader), ``TopicAdmin``
(topics and queues), ``GroupOffsets`` (committed offsets) and ``Upkeep`` (retention,
disk use); the appends to event streams are here, and ask the writer too.

What is still shared: the writer is handed the commit log, the queues, the key index,
the streams, the reader, the disk use and the flusher, which the store's flushes,
catch-ups and changes use as well, and the write session (``WriteSession``,
writesession.py), which the store's changes hold too (``_exclusive``): the one owner of
the write lock (the pen), the catch-up, a dead writer's clearing and the publish; it
calls back the steps that stay the store's (``_check_writable``, ``_catch_up``,
``_clear_dead_writer``, ``_published_tail``). The mixins other than
``Appending`` and ``Reading`` still share attributes set here (``commitlog``,
``config``, ``path``, ``_registry``, ``_index``, ``_streams``, ``_offsets``,
``_table``, ``_shared`` and ``_seen``, the locks, ``_flusher``, ``_disk``) and the
store's own steps (``_check_open``, ``_follow``, ``_exclusive``, ``_publish``, ``_fail``,
``_topic``, ``_queue``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import json
import mmap
import os
import threading
import time
from collections.abc import Collection, Iterator
from itertools import repeat
from pathlib import Path

from . import dataplane, fileio
from .admin import TopicAdmin
from .appending import Appending
from .blockqueue import BlockFile, BlockStore
from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .config import StoreConfig
from .consumequeue import ENTRY_SIZE, ConsumeQueue, QueueFile
from .diskuse import DiskUse
from .dispatch import FOLLOWED, Dispatcher, Run, dispatch_all, make_dispatchers, truncate_all
from .entrychecks import seal_old_entries
from .errors import (
    CorruptRecordError,
    DiskFullError,
    StoreClosedError,
    StoreError,
    StoreFailedError,
    StoreIOError,
    StreamTopicError,
)
from .flush import FlushService
from .follow import follow_log, mark_records_written, trim_queue_end
from .groupoffsets import GroupOffsets
from .keyindex import KeyIndex
from .locks import ForkGuard, StoreLocks
from .metadata import ENTRY_CHECKS_VERSION, StoreIdentity, TopicTable
from .nativeappend import PRETOUCH_BYTES, append_core, log_syncer
from .offsets import OffsetStore
from .queuebase import entry_checked, entry_not_written, unpack_entry
from .reader import Reader
from .reading import Reading
from .recovery import RecoveryReport, choose_start, ends_natively, maybe_past_ends, recover
from .restore import restore_queue_end
from .results import (
    Corruption,
    EventAppendResult,
    EventSlice,
    StoredMessage,
)
from .retention import RetentionReport
from .segment import segment_name
from .sharedstate import RING_ENTRIES, SharedSnapshot, SharedState
from .storestats import (
    CommitLogStats,
    IndexFileProblem,
    QueueStats,
    SegmentStats,
    StoreStats,
    TopicStats,
)
from .streamrecovery import cut_partial_group
from .streams import Streams
from .topics import Topic, TopicRegistry
from .upkeep import Upkeep
from .warming import WARM_ASK_BYTES, Warmer, WarmService
from .writer import Writer
from .writesession import Pen, WriteSession, held_alone, open_pen

_INDEX_MARKER = ".complete"
#: ``log_cache_behind_bytes``: the log's pages are let go of by whole runs of this many
#: bytes of a segment (the largest folio the page cache makes of a file here).
LET_GO_BYTES = 2 << 20
#: Notes behind the ring's sequence at which the flush thread's look follows
#: (``MessageStore._keep_up``), and the shortest time between two looks.
KEEP_UP_NOTES = RING_ENTRIES // 8
KEEP_UP_MIN_S = 0.001
#: The longest time between two looks, whatever the flush interval: the ring's rate is
#: known only by looking (two producers of 1 KiB batches here: ~25,000 notes a second).
KEEP_UP_MAX_S = 0.1
KEEP_UP_IDLE_S = 0.5
#: Async mode: the periodic flush syncs shared topics' block files before their cadence
#: (``queue_flush_interval_ms``) once this much log lies past the checkpoint's
#: ``dispatched``: recovery replays every record past it (~1.5 µs a record at a million
#: queues, ~2M records of 58-byte messages here), so a reopen after a kill stays a few
#: seconds however fast the puts (docs/PERFORMANCE.md, mill33-s50).
BLOCKS_BEHIND_BYTES = 256 << 20


class MessageStore(Appending, Reading, TopicAdmin, GroupOffsets, Upkeep):
    """An open store directory. Use ``MessageStore.open(path, config)``; close it when done.

    Thread-safe, and several processes may open the same directory: appends take the
    store's write lock (a thread lock, then the write mutex in `state`; see
    writesession.py) and first catch up with what other processes appended; readers
    never take it.
    """

    # The parts `_open` makes, once, before the store is handed out (`__init__` sets the
    # rest). `get` and `read` are bound there too: to the native core's calls.
    identity: StoreIdentity
    commitlog: CommitLog
    last_recovery: RecoveryReport
    _id_prefix: str
    _table: TopicTable
    _registry: TopicRegistry
    _checkpoint: Checkpoint
    _index: KeyIndex
    _reader: Reader
    _streams: Streams
    _offsets: OffsetStore
    _flusher: FlushService
    _warm: WarmService
    _cache_let_go: int
    _session: WriteSession
    _writer: Writer
    dispatchers: list[Dispatcher]

    def __init__(self, path: Path, config: StoreConfig) -> None:
        self.path = path
        self.config = config
        # Between this process's threads: the write lock (a write session's, and the
        # flush's) and the follow lock (reentrant). Native (``dataplane.ThreadLock``), so
        # the native append takes them without a Python call; waiting releases the GIL.
        self._write_lock = dataplane.ThreadLock()
        self._sync_mode = config.flush_mode == "sync"
        self._flush_lock = threading.Lock()
        # When the periodic flush next fsyncs shared topics' block files (async mode).
        self._blocks_due = time.monotonic() + config.queue_flush_interval_ms / 1000
        self._closed = False
        # Whether this process's first read or get (`_reads_begin`) has been made.
        self._reading = False
        # Why the store refuses writes, one bit each (closed, forked, failed, the disk
        # past its reject ratio), moved where those change; the native append reads it
        # (docs/PERFORMANCE.md, "Issue 31 (part 10)").
        self._refusals = dataplane.Refusals()
        # When an append asks the flusher, the warmer, the waiting pulls (their parts
        # move it); the native append reads it. Sync mode asks for no flush.
        self._asks = dataplane.Asks(
            None if self._sync_mode else config.flush_dirty_bytes, WARM_ASK_BYTES
        )
        self._core = None  # the native read core (dataplane.store_core), made by _open
        self._appender = None  # the native append (nativeappend.py), made by _open
        # Sync mode's native group commit (nativeappend.log_syncer), made by _open.
        self._log_syncer = None
        self._follow_lock = dataplane.ThreadLock(reentrant=True)
        self._locks: StoreLocks | None = None
        self._pen: Pen | None = None  # the write lock (writesession.py), made by _open
        self._shared: SharedState | None = None
        self._seen = SharedSnapshot(0, 0, 0, 0, 0)
        # The shared state's sequence when last caught up (``_followed_sequence``), in a
        # native word the native append reads and moves without a look-up.
        self._followed = dataplane.Word(-1)
        self._forked = False
        self._index_marker_pending = False
        # Stretches [start, end) of the log whose records' files this process has not
        # marked for its flush (written before it opened, or followed into a queue it
        # had not loaded): the next flush walks what of them the checkpoint does not
        # vouch for yet (``_cover_unseen``). Its own writes, what it followed and what
        # its recovery passed are marked as they happen.
        self._unmarked: list[tuple[int, int]] = []
        # A checkpoint found above the log's tail at open (recovery cut the log below it;
        # its fields never move back): its highest field, until a flush of this
        # process's passes it; meanwhile its watermarks are no sign of another
        # process's sync (``_flush_everything``). 0: none.
        self._checkpoint_above = 0
        # The flush thread's last look at the notes ring (``_keep_up``): when, its
        # sequence then, and the native appends this process had made.
        self._looked = (time.monotonic(), 0, 0)
        self._named_paths: set[str] = set()  # files other than queue files, adopted
        self._disk = DiskUse(path, config.disk_reject_ratio, self._refusals)
        self.last_retention: RetentionReport | None = None
        # (the report stats() gave out, its copy): see _recovery_copy.
        self._handed_recovery: tuple[RecoveryReport, RecoveryReport] | None = None

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
        fileio.make_dir(self.path, parents=True, exist_ok=True)
        self._locks = StoreLocks(self.path)
        with self._locks.opening() as alone:
            self._shared = SharedState(self.path / "state")
            self._pen = open_pen(self._locks, self._shared.path, alone)
            if not alone:
                # Joined: wait for the pen (behind a writer, maybe for long) without
                # open.lock, so other processes' opens and closes do not queue behind.
                self._locks.step_aside()
            with held_alone(self._pen):
                self.identity = StoreIdentity.load_or_create(
                    self.path / "store.json",
                    self.config.queue_file_entries,
                    self.config.segment_bytes,
                )
                self._id_prefix = self.identity.id_prefix
                self._table = TopicTable(self.path / "topics.json")
                self.commitlog = CommitLog(self.path / "commitlog", self.config.segment_bytes)
                self.commitlog.open(None if alone else self._shared.read_held().tail)
                self.commitlog.before_write = self._shared.raise_extent
                self._registry = TopicRegistry(
                    self.path / "consumequeue",
                    self.identity.queue_file_entries,
                    self.config.max_open_queue_files,
                )
                self._registry.tail_source = self._followed_tail
                self._checkpoint = Checkpoint(self.path / "checkpoint")
                self._index = KeyIndex(
                    self.path / "index", self.config.index_slots, self.config.index_entries
                )
                self._reader = Reader(
                    self.commitlog,
                    self.identity.store_id,
                    self._id_prefix,
                    self._index,
                    self._asks,
                )
                self._streams = Streams(
                    self.path / "consumequeue",
                    self.config.stream_index_slots,
                    self.config.stream_cache_streams,
                    self.commitlog,
                    self._reader.record_at,
                    self.config.max_message_bytes,
                )
                self._streams.on_damage = self._note_index_damage
                self._streams.exclusive = self._exclusive
                self._index.on_damage = self._note_index_damage
                self._index.records_with_key = self._reader.records_with_key
                # Every index the log's records go to, in one list: the writer, recovery,
                # the catch-up, a queue's restore and a dead writer's clearing use it.
                self.dispatchers = make_dispatchers(
                    self._registry, self.commitlog, self._index, self._streams
                )
                self._streams.dispatchers = self.dispatchers
                if alone:
                    self._open_alone()
                else:
                    self._open_beside_others()
                self._mark_unvouched_segments(self._unmarked[0][1])
                self._streams.preload(self._registry.topics)
        self.commitlog.last_store_ms = max(
            self.commitlog.last_store_ms, self.commitlog.store_time_before_tail()
        )
        self._registry.on_load = self._on_queue_load
        self._disk.measure()
        # What this process writes or follows from now on, mapped in ahead of its readers.
        self._warm = WarmService(Warmer(self.commitlog, self.commitlog.tail), self._asks)
        # ``log_cache_behind_bytes``: the log's pages below this were let go of (none of
        # those from before this process opened: other readers may be reading them).
        self._cache_let_go = self.commitlog.tail
        self._flusher = FlushService(
            self._sync_log,
            self._flush_periodic,
            self.config.flush_interval_ms / 1000,
            self._fail,
            self._log_unsynced,
            self._pretouch,
            self._asks,
            self._keep_up,
        )
        self._session = WriteSession(
            self._pen,
            self._shared,
            self._write_lock,
            self._follow_lock,
            check=self._check_writable,
            catch_up=self._catch_up,
            tail=lambda: self.commitlog.tail,
            clear_dead_writer=self._clear_dead_writer,
            fail=self._fail,
            failure_of=lambda error: self._writer.write_failure(error),
            published=self._published_tail,
        )
        self._shared.wait_for_writer = self._wait_for_writer
        self._writer = Writer(
            self.path,
            self.config,
            self.commitlog,
            self._registry,
            self._index,
            self.dispatchers,
            self._streams,
            self._reader,
            self._disk,
            self._session,
            self._flusher,
            self._warm,
            self._id_prefix,
            self._refusals,
        )
        self._core = dataplane.store_core(
            self, self.commitlog, self._shared.map, self._id_prefix, self._registry.topics
        )
        self._log_syncer = log_syncer(self)
        self._appender = append_core(self)
        if self._appender is not None:
            # ``append`` in one native call, no Python frame around it: the core calls
            # ``_append_long_way`` itself for what it declines (appending.py).
            self.append = self._appender.append_or_long_way
        # The first read or get starts warming (warming.py), then binds them to the core.
        self.get = self._first_get
        self.read = self._first_read
        opened = self._checkpoint.current()
        above = max(opened.commitlog_flushed, opened.dispatched, opened.index_dispatched)
        self._checkpoint_above = above if above > self.commitlog.tail else 0
        if alone:  # a joiner has nothing of its own to make durable yet
            self._flush_everything()
        if self._index_marker_pending:
            fileio.touch(self.path / "index" / _INDEX_MARKER)
            fileio.fsync_dir(self.path / "index")
        self._flusher.start(self.commitlog.flushed)
        self._warm.start()

    def _first_read(self, *args, **kwargs) -> list[StoredMessage]:
        self._reads_begin()
        return self.read(*args, **kwargs)

    def _first_get(self, message_id: str) -> StoredMessage:
        self._reads_begin()
        return self.get(message_id)

    def _reads_begin(self) -> None:
        """This process's first read: warming starts, and ``get`` and ``read`` answer
        in one native call from now on (no Python frame around them: the core calls
        ``_get_long_way`` / ``_read_long_way`` itself for whatever it declines)."""
        self.get = self._core.get_or_long_way
        self.read = self._core.read_or_long_way
        self._reading = True
        self._warm.engage(self.commitlog.tail)

    def _open_alone(self) -> None:
        """No other process has the store open: recover it, then publish the state."""
        rebuild_from = self._registry.load(self._table, repair=True)
        index_from = self._open_index_for_recovery()
        if index_from is not None and (rebuild_from is None or index_from < rebuild_from):
            rebuild_from = index_from
        abort_marker = self.path / "abort"
        clean = not abort_marker.exists()
        start = choose_start(self.commitlog, self._checkpoint.state, rebuild_from)
        self._unmarked = [(0, start)]  # recovery passes every record from there
        self._checkpoint.check()
        unloaded = []  # (shared topic, floor) whose queues recovery looks at natively
        if not clean:
            # After a crash every queue may hold entries past what survived: check them
            # all now (after a clean close, each is checked when first used). A shared
            # topic's are looked at in one native pass after the replay instead, and only
            # those it does not find settled are loaded (recovery.look_at_ends).
            old_store = self.identity.format_version < ENTRY_CHECKS_VERSION
            for topic in self._registry.topics.values():
                if not old_store and ends_natively(topic):
                    unloaded.append((topic, self.queue_floor(topic)))
                    continue
                for queue in topic.queues:
                    queue.min_offset  # noqa: B018 - loading is the point
        state = self._checkpoint.state
        self.last_recovery = recover(
            self.commitlog,
            self._registry.loaded_queues,
            self._registry.resolve,
            self.dispatchers,
            start,
            clean,
            durable_end=state.commitlog_flushed if state else 0,
            index=self._index,
            dispatched=state.dispatched if state else 0,
            cut_tail=self._cut_partial_group,
            dirty=self._registry.dirty,
            shared=self._registry.shared_topics(),
            unloaded=unloaded,
        )
        self.last_recovery.event_indexes = self._streams.recover(
            self._registry.topics.values(),
            state.dispatched if state else None,
            self.commitlog.tail,
        )
        if self.identity.format_version < ENTRY_CHECKS_VERSION:  # an older engine's store
            seal_old_entries(self._registry, self._reader)
            self.identity = self.identity.upgrade_format(self.path / "store.json")
        self._registry.dirty.update(q.flush_target for q in self._registry.loaded_queues())
        # (entries of their unloaded queues may be in the page cache only)
        self._registry.dirty.update(topic.blocks for topic, _ in unloaded if len(topic.queues))
        for topic in self._registry.shared_topics():
            topic.blocks.rebuilding = False
            topic.blocks.republish_end(self.commitlog.tail)
        self._advance_queue_mins()
        for info, blocks in self._registry.damage:
            self.last_recovery.corruptions.append(
                Corruption(
                    max(info.created_offset, self.commitlog.min_offset),
                    0,
                    f"shared topic {info.name} had {blocks} unreadable blocks below its "
                    "published allocation end; its entries were rebuilt from the commit log",
                )
            )
        self._registry.damage.clear()
        for corruption in self.last_recovery.corruptions:
            self._reader.corruptions.note(corruption)
        log_damaged = self.last_recovery.corruptions or self.last_recovery.truncated_at is not None
        for topic in self._registry.topics.values():
            if topic.ends is None:
                continue  # a shared topic: no witness (a million queues to pass over)
            if log_damaged:
                topic.ends.forget_past(self.commitlog.tail, len(topic.queues))
            for queue in topic.queues:  # the others are checked when loaded
                if queue.loaded:
                    self._restore_lost_end(queue)
        self._offsets = OffsetStore(self.path / "offsets", repair=True)
        self.last_recovery.offsets_damage = [d.as_dict() for d in self._offsets.damage]
        self._drop_leftover_offsets()
        if not clean or log_damaged:
            self.last_recovery.offsets_clamped = self._clamp_offsets_past_ends(
                {topic.info.name for topic, _ in unloaded}
            )
        fileio.write_atomic(
            self.path / "recovery.json", json.dumps(self.last_recovery.as_dict()).encode()
        )
        fileio.touch(abort_marker)
        fileio.fsync_dir(self.path)
        self._shared.finish_write()  # a writer of the last session that died is dealt with
        previous = self._shared.read_held()
        self._seen = self._shared.write(
            tail=self.commitlog.tail,
            min_offset=self.commitlog.min_offset,
            topics_version=previous.topics_version + 1,
            offsets_version=previous.offsets_version + 1,
            index_version=previous.index_version + 1,
        )

    def _note_index_damage(self, commit_offset: int, reason: str) -> None:
        self._reader.corruptions.note(Corruption(commit_offset, 0, reason))

    def _cut_partial_group(self, log: CommitLog, tail: int, durable_end: int) -> int:
        def is_stream_topic(name: bytes) -> bool:
            topic = self._registry.topic_of(name)
            return topic is not None and topic.info.streams

        return cut_partial_group(log, tail, durable_end, is_stream_topic)

    def _open_index_for_recovery(self) -> int | None:
        """Open the key index; if it is missing, empty it and return the log offset its
        rebuild starts from (the whole log)."""
        marker = self.path / "index" / _INDEX_MARKER
        fileio.make_dir(self._index.directory, exist_ok=True)
        if marker.exists():
            self._index.open()
            skipped = self._index.skipped_from()
            if skipped is not None:  # an older file was damaged: index again from it
                self._index.truncate_from(skipped)
                return max(skipped, self.commitlog.min_offset)
            if self._index.problems:  # the newest file was cut or removed: index again
                end = self._index.end_offset
                return self.commitlog.min_offset if end is None else end - 1  # a record start
            return None
        for leftover in self._index.directory.iterdir():
            if leftover.is_file():
                fileio.unlink(leftover, missing_ok=False)
        self._index.open()
        self._index_marker_pending = True  # set once the rebuild is durable
        return self.commitlog.min_offset if self.commitlog.segments else None

    def _open_beside_others(self) -> None:
        """Other processes have the store open: take their published state as it is."""
        snapshot = self._shared.read_held()
        self._registry.load(self._table, repair=False)
        self._index.open()
        self.commitlog.tail = snapshot.tail
        self.commitlog.refresh(snapshot.tail)
        self._unmarked = [(0, snapshot.tail)]
        self._offsets = OffsetStore(self.path / "offsets", repair=False)
        self.last_recovery = self._read_last_recovery()
        self._seen = snapshot

    def _read_last_recovery(self) -> RecoveryReport:
        try:
            data = json.loads((self.path / "recovery.json").read_bytes())
            data["corruptions"] = [Corruption(**c) for c in data.get("corruptions", [])]
            # A newer engine's report may hold fields this one does not know.
            known = {f.name for f in dataclasses.fields(RecoveryReport)}
            return RecoveryReport(**{k: v for k, v in data.items() if k in known})
        except (OSError, ValueError, TypeError):
            return RecoveryReport(clean_shutdown=True)

    def _apply_notes(
        self, noted: list[tuple[int, int, int]], store_ms: int | None, tail: int
    ) -> list[tuple]:
        """Take in the queue ends other processes noted when they published up to
        ``tail`` (``SharedState.noted_ends``: each queue's highest, and the latest store
        time): (queue, its end here, its new end) of each queue that grew, for a
        followed run."""
        ends: dict = {}
        log = self.commitlog
        unseen = False
        followed = log.tail
        # Moved first: a queue loaded now, and a shared topic's blocks found now, are
        # judged by the new tail (its published allocation end).
        log.tail = tail
        for topic_id, queue_id, end in noted:
            topic = self._registry.by_id.get(topic_id)
            if topic is not None and queue_id < len(topic.queues):
                queue = topic.queues[queue_id]
                # Loaded only now, it shows the new entries already: which files hold
                # them is found by walking their records before the next checkpoint.
                unseen = unseen or not queue.loaded
                if end > queue.max_offset:
                    ends[queue] = end
        if store_ms is not None and store_ms > log.last_store_ms:
            log.last_store_ms = store_ms
        for segment in log.segments:
            if segment.end > followed and segment.base < tail:
                log.mark_unsynced(segment)
        if unseen:
            self._unmarked.append((followed, tail))
        return [(queue, queue.max_offset, end) for queue, end in ends.items()]

    def _drop_leftover_offsets(self) -> None:
        """Forget committed offsets on topics and queues that no longer exist (a
        deletion killed between saving the topics and dropping their offsets)."""
        counts = {name: len(topic.queues) for name, topic in self._registry.topics.items()}
        leftovers = set()
        for _group, topic, queues in self._offsets.topic_positions():
            count = counts.get(topic, -1)
            if queues and max(queues) >= count:  # one C loop a group's topic, when all is well
                leftovers.update((topic, queue) for queue in queues if queue >= count)
        for topic in {topic for topic, _queue in leftovers if topic not in counts}:
            self._offsets.drop_topic(topic)
        for topic, queue in leftovers:
            if topic in counts:
                self._offsets.drop_queue(topic, queue)

    def _clamp_offsets_past_ends(self, unloaded: Collection[str] = ()) -> list[dict]:
        """Set committed offsets past their queue's end back to it, and list them.

        Readers see records before the fsync that makes them durable, and commits are
        fsynced at once: after a power loss a group may have committed past what was
        kept. Left so, the next message would take an offset the group already passed.

        A queue of a topic of ``unloaded`` (whose settled queues the open left unloaded,
        ``recovery.look_at_ends``) loaded here has its minimum moved as the open moves
        the minimums of the queues it loads (``_advance_queue_mins``).
        """
        past: dict[tuple[str, str], dict[int, int]] = {}
        clamped = []
        for group, topic, queue, committed in self._positions_to_clamp(unloaded):
            state = self._registry.topics[topic]
            target = state.queues[queue]
            fresh = topic in unloaded and not target.loaded
            end = target.max_offset
            if fresh:
                target.advance_min(self.queue_floor(state))
            if committed > end:
                past.setdefault((group, topic), {})[queue] = end
                clamped.append(
                    {"group": group, "topic": topic, "queue": queue, "committed": committed,
                     "end": end}
                )  # fmt: skip
        for (group, topic), offsets in past.items():
            self._offsets.commit_many(
                group, topic, offsets, "recovery", "past the queue's end after recovery"
            )
        return clamped

    def _positions_to_clamp(self, unloaded: Collection[str]) -> list[tuple[str, str, int, int]]:
        """The committed positions ``_clamp_offsets_past_ends`` looks at, sorted: (group,
        topic, queue, position) of every queue that exists, but of the queues of
        ``unloaded`` the open left unloaded only those whose position the native look at
        their last blocks (``recovery.maybe_past_ends``, one call a topic for every
        group) finds may be past their end: the others are at or below it, so a million
        positions cost no load (nor a queue object) each."""
        topics = self._registry.topics
        counts = {name: len(topic.queues) for name, topic in topics.items()}
        loaded = {  # the queues of ``unloaded`` loaded all the same
            name: {queue.queue_id for queue in topics[name].made_queues() if queue.loaded}
            for name in unloaded
            if name in topics
        }
        looks = []
        unmade: dict[str, tuple[list[str], list[int], list[int]]] = {}
        for group, topic, held in self._offsets.topic_positions():
            count = counts.get(topic)
            if count is None or not held:
                continue
            if max(held) >= count:
                held = {queue: offset for queue, offset in held.items() if queue < count}
            seen = loaded.get(topic)
            if seen is None:
                looks.extend((group, topic, queue, offset) for queue, offset in held.items())
                continue
            looks.extend((group, topic, queue, held[queue]) for queue in seen.intersection(held))
            groups, queues, offsets = unmade.setdefault(topic, ([], [], []))
            groups.extend(repeat(group, len(held)))  # C loops: a million positions, no call each
            queues.extend(held.keys())
            offsets.extend(held.values())
        for topic, (groups, queues, offsets) in unmade.items():
            seen = loaded[topic]
            for at in maybe_past_ends(topics[topic], queues, offsets):
                if queues[at] not in seen:  # a loaded queue is looked at above
                    looks.append((groups[at], topic, queues[at], offsets[at]))
        looks.sort()
        return looks

    def _followed_tail(self) -> int:
        return self.commitlog.tail

    def _on_queue_load(self, queue: ConsumeQueue) -> None:
        """A queue's files were just looked at: check its ends against the log (entries
        left by a writer that died before publishing, records deleted by retention).
        A queue with no entries (its ends 0, 0) has no end to trim and no minimum to move;
        only a topic that witnesses its queues' ends (files per queue) may know of more.
        A shared topic witnesses none: its empty queues (most of a million, at their
        first use) are not looked at further."""
        topic, queue_id = queue.owner
        if not queue._max_offset and not queue._min_offset:
            state = self._registry.topic_of(topic)
            if state is not None and state.ends is None:
                return
        end = queue._max_offset  # as found (``max_offset`` would go through the load's lock)
        trimmed = trim_queue_end(self.commitlog, queue, topic, queue_id, self.commitlog.tail, False)
        queue.advance_min(self.queue_floor(self._registry.topic_of(topic)))
        if trimmed:
            self._restore_damaged_end(queue, end, trimmed)
        self._restore_lost_end(queue)

    def _restore_damaged_end(self, queue: ConsumeQueue, end: int, trimmed: int) -> None:
        """When the queue's last entry (at ``end - 1``), trimmed, is damaged (it points
        below the tail at a record not its own, or fails its check) in a shared topic,
        which has no witness of its queues' ends to restore it from
        (``_restore_lost_end``). Put back from the commit log whatever of the trimmed
        entries' records is there (the log from the last kept entry's record on), and
        report it: their queue offsets were handed out and must not be again. A damaged
        entry's record is found; a dead writer's leftover (whose record's place another
        writer's records took since: its own were never published) finds none, and stays
        trimmed."""
        name, queue_id = queue.owner
        topic = self._registry.topic_of(name)
        if topic is None or topic.ends is not None:
            return  # its witness restores it (``_restore_lost_end``)
        # Still in its block: the trim moved only the queue's end.
        last = queue.blocks.read(queue.queue_id, end - 1, 1)
        if len(last) != ENTRY_SIZE or entry_not_written(last):
            return
        commit_offset, size, _ = unpack_entry(last)
        if commit_offset + size > self.commitlog.tail and entry_checked(last):
            return  # a whole entry past the tail: a dead writer's unpublished one
        self._restore_from_log(
            queue,
            topic,
            f"consume queue {topic.info.name}/{queue_id}: {trimmed} damaged entries from "
            f"{queue.max_offset} on pointed at records not theirs",
        )

    def _restore_from_log(self, queue: ConsumeQueue, topic, what: str) -> None:
        """Put back the entries past the queue's end from the commit log, sync them, and
        report ``what`` happened with how many were restored."""
        restored = restore_queue_end(
            self.commitlog,
            queue,
            topic.info.since(queue.owner[1]),
            queue.max_offset,
            self.commitlog.tail,
            self.dispatchers,
        )
        for queue_file in queue.take_dirty():
            queue_file.sync()
        if restored.count:
            self._reader.corruptions.note(
                Corruption(
                    restored.first_commit_offset,
                    0,
                    f"{what}; {restored.count} were restored from the commit log",
                )
            )

    def _restore_lost_end(self, queue: ConsumeQueue) -> None:
        """Put back entries lost at the queue's end below the checkpoint (the queue is
        shorter than its witness says), from the commit log, and report them."""
        name, queue_id = queue.owner
        topic = self._registry.topic_of(name)
        if topic is None or topic.ends is None:
            return
        witnessed = topic.ends.get(queue_id, self.commitlog.tail)
        if witnessed <= queue.max_offset:
            return
        self._restore_from_log(
            queue,
            topic,
            f"consume queue {topic.info.name}/{queue_id} had lost its entries "
            f"{queue.max_offset} to {witnessed - 1} (its files were cut or zeroed)",
        )
        queue.time_index.sync()
        if queue.max_offset < witnessed:  # their records are gone too: stop looking
            topic.ends.lower_to(queue_id, queue.max_offset, len(topic.queues))

    # ----------------------------------------------------- following the others

    def _follow(self) -> None:
        """Catch up with what other processes published (appends, topics, offsets)."""
        sequence = self._shared.sequence()
        if sequence == self._followed.value:
            return  # nothing was published since this process last caught up
        snapshot = self._shared.read()
        if snapshot != self._seen:
            with self._follow_lock:
                self._follow_to(snapshot)
        if not sequence & 1 and self._seen == snapshot:
            self._followed.value = sequence

    def _keep_up(self) -> float:
        """The flush thread, between flushes (``FlushService``): follow the other
        processes' appends through the notes ring while they are still in it, and answer
        the seconds to the next look.

        A process that neither appends nor reads (a console, a consumer between polls)
        follows otherwise only at its flush, every ``flush_interval_ms``; past
        ``RING_ENTRIES`` notes meanwhile (8,192 batches' queues, or single appends: under
        half a second of two producers' 1 KiB batches here) the ring has wrapped, and the
        follow walks every record's header instead, the log's pages faulted into this
        process's mapping (in the two-process bench 90 % of such a process's CPU:
        docs/PERFORMANCE.md, idle31-s58). Looked at when, at the rate the ring moved since
        the last look, a quarter of it will have moved again (half, while it is less
        than ``KEEP_UP_NOTES`` behind); at most every
        ``KEEP_UP_MIN_S``, at least every ``KEEP_UP_MAX_S`` while the ring moves; while
        it does not, twice as long each time, up to ``KEEP_UP_IDLE_S`` (or the flush
        interval: an idle store wakes about as often as its flushes did). A process that
        appended since its last look keeps up at each pen by itself: it looks again only
        after ``KEEP_UP_IDLE_S`` (each look takes the interpreter's lock from its
        appending threads: looks every few ms behind single appends raised the p99 of an
        offset commit beside them; docs/PERFORMANCE.md, "Session 58's machine")."""
        now = time.monotonic()
        ring = self._shared.ring_sequence()
        core = self._appender
        appended = (core.appended + core.batched) if core is not None else 0
        last_at, last_ring, last_appended = self._looked
        self._looked = (now, ring, appended)
        flush_s = self.config.flush_interval_ms / 1000
        if appended != last_appended:
            # Caught up at each pen (natively: ``_seen`` is not kept then, and a follow
            # from it would walk what the core already took in).
            return min(flush_s, KEEP_UP_IDLE_S)
        behind = ring - self._seen.ring_seq
        # Past a whole ring behind the notes are gone: the follow would walk the records,
        # which the flush does anyway (walked here, in more and smaller pieces, they held
        # up offset commits beside single appends: docs/PERFORMANCE.md, "Session 58's
        # machine").
        if KEEP_UP_NOTES <= behind <= RING_ENTRIES and not self._closed:
            self._follow()
        rate = (ring - last_ring) / max(now - last_at, KEEP_UP_MIN_S)
        interval = min(flush_s, KEEP_UP_MAX_S)
        if rate <= 0:
            return min(max(2 * (now - last_at), interval), flush_s, KEEP_UP_IDLE_S)
        if behind > RING_ENTRIES:
            return interval  # (wrapped already: faster looks would only walk more often)
        ahead = RING_ENTRIES // 4 if behind >= KEEP_UP_NOTES else RING_ENTRIES // 2
        return min(max(ahead / rate, KEEP_UP_MIN_S), interval)

    def _wait_for_writer(self) -> bool:
        """``SharedState.read`` found the header mid-update: True when this thread holds
        the write lock (it holds the pen, or takes it next: no other writer can be
        mid-update, so that one died; the caller walks the records and leaves the
        mending to ``_catch_up``); else wait for the writer to let go of the pen,
        settling it if it died (``WriteSession.wait_out``), and say so with False."""
        if self._write_lock.held_here():
            return True
        self._session.wait_out()
        return False

    @property
    def _followed_sequence(self) -> int:
        """The shared state's sequence word when this process last caught up."""
        return self._followed.value

    def _follow_to(self, snapshot: SharedSnapshot) -> None:
        seen = self._seen
        if snapshot == seen:
            return
        if snapshot.topics_version != seen.topics_version:
            floors = {n: t.info.retained_from for n, t in self._registry.topics.items()}
            self._table = TopicTable(self.path / "topics.json")
            self._registry.reload(self._table)
            self._follow_topic_floors(floors)
        if snapshot.min_offset > self.commitlog.min_offset:
            self.commitlog.drop_below(snapshot.min_offset)
            self._advance_queue_mins()
            self._index.refresh()
        if snapshot.tail > self.commitlog.tail:
            for topic in self._registry.shared_topics():
                topic.blocks.stale = True  # they may have allocated blocks
            self.commitlog.refresh(snapshot.tail)
            noted = self._shared.noted_ends(seen.ring_seq, snapshot.ring_seq)
            if noted is None:
                ends = follow_log(self.commitlog, snapshot.tail, self._registry.resolve)
            else:
                ends = self._apply_notes(*noted, snapshot.tail)
            dispatch_all(self.dispatchers, Run(FOLLOWED, None, snapshot.tail, ends))
        if snapshot.offsets_version != seen.offsets_version:
            self._offsets.catch_up()
        self._seen = snapshot

    def _catch_up(self) -> None:
        """Follow everything other processes published (the caller holds the pen)."""
        snapshot = self._shared.read()
        if snapshot[5] < 0:  # ring_seq: a dead writer's half update (read under the pen)
            snapshot = self._shared.read_held()  # mended
        self._follow_to(snapshot)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold a write session (writesession.py) as a writer of changes other than
        appends (topics, offsets, retention): the thread lock, then the pen, caught up
        with the others.

        The change is marked under way in the shared state while it runs: if this
        process dies in the middle, the next writer takes in what it wrote without
        publishing (``_clear_dead_writer``).
        """
        with self._session.change():
            try:
                yield
            except OSError as error:
                raise self._io_failure(error) from error

    def _clear_dead_writer(self, extent: int) -> None:
        """The last writer died (or failed) before publishing: clear what it wrote past
        the tail (up to ``extent``, the end it had marked), and take in the topic and
        offset changes it saved without publishing them."""
        log = self.commitlog
        tail = log.tail
        self._table = TopicTable(self.path / "topics.json")
        self._registry.reload(self._table)
        truncate_all(self.dispatchers, tail, extent)  # reads its records: before they go
        if extent > tail:
            log.clear_after_tail(log.writable_segment(), extent)
        self._offsets.catch_up()
        self._finish_dead_retention()
        self._publish(
            min_offset=self.commitlog.min_offset,
            topics_version=self._seen.topics_version + 1,
            offsets_version=self._seen.offsets_version + 1,
        )

    def _finish_dead_retention(self) -> None:
        """If the dead writer was a retention run that deleted segments and died before
        publishing the log's new first offset (``delete_expired``), finish its run: the
        log starts at its first segment left, the queues' minimums move up (their files
        wholly below go) and so do the key index's; the caller publishes it. Until then
        the other processes still list the files it deleted (docs/RECOVERY.md,
        "Retention")."""
        segments = self.commitlog.segments
        first = 0
        while first < len(segments) - 1 and not os.path.exists(segments[first].path):
            first += 1
        if not first:
            return
        new_min = segments[first].base
        self.commitlog.drop_below(new_min)
        self._advance_queue_mins()
        self._index.delete_below(new_min)

    def _io_failure(self, error: OSError) -> DiskFullError | StoreIOError:
        """The typed error of a topic, offset or retention change whose file could not be
        written. A full disk refuses the change whole (a file is replaced only once its
        new content is written); any other error may have cut it short, so the store
        then refuses writes until it is reopened (and reads the truth from its files)."""
        if error.errno == errno.ENOSPC:
            return DiskFullError(
                f"the disk holding {self.path} is full ({error.strerror}); the change was not made"
            )
        self._fail(error)
        return StoreIOError(
            f"a file of the store at {self.path} could not be written ({error}); the change "
            "may be only partly made: the store refuses writes until it is reopened"
        )

    def _publish(self, **changes: int) -> None:
        """Make this process's writes visible to the others (caller holds the lock)."""
        self._seen = self._shared.write(**changes)

    def _published_tail(self, tail: int, ring_seq: int) -> None:
        """The write session published ``tail`` (notes up to ``ring_seq``): seen."""
        seen = self._seen
        self._seen = SharedSnapshot(tail, seen[1], seen[2], seen[3], seen[4], ring_seq)

    # ----------------------------------------------------------- event streams

    def append_event(
        self,
        topic: str,
        stream_id: str,
        body: bytes | str,
        expected_version: int | None = None,
        command_id: str | None = None,
        event_type: str | None = None,
    ) -> EventAppendResult:
        """Append one event to a stream of a stream topic; its ``version`` is the
        stream's new version.

        ``expected_version``: the stream's version the caller saw (0: no events yet);
        raises WrongExpectedVersionError, carrying the current version, when the stream
        is elsewhere; None appends at the next version whatever it is. ``command_id``: a
        command id already used in this stream raises DuplicateCommandError, carrying
        the version that command produced, every time. ``event_type`` is the record's
        tag. Raises StreamTopicError for a topic that is not a stream topic.
        """
        return self.append_events(
            topic, stream_id, [body], expected_version, command_id, event_type
        )[0]

    def append_events(
        self,
        topic: str,
        stream_id: str,
        events: list,
        expected_version: int | None = None,
        command_id: str | None = None,
        event_type: str | None = None,
    ) -> list[EventAppendResult]:
        """Append several events to a stream as one group, under one command: all are
        stored, or none. Each item is a body or ``{"body", "event_type"}``; the checks
        are ``append_event``'s."""
        state = self._topic(topic)
        if not state.info.streams:
            raise StreamTopicError(
                f"topic {topic!r} is not a stream topic: create one with create_stream_topic"
            )
        append = self._streams.request(
            stream_id,
            events,
            expected_version,
            command_id,
            event_type,
            max_bytes=self._writer.max_body(state),
        )
        return self._writer.append_prepared(state, append)

    def append_to_streams(
        self, topic: str, appends: list
    ) -> list[list[EventAppendResult] | StoreError]:
        """Append to several streams of a stream topic at once, under one hold of the
        write lock (the fast path). Each append is a dict with ``stream_id``, ``events``
        and, optionally, ``expected_version``, ``command_id`` and ``event_type`` (or a
        tuple of those in that order), checked as ``append_events`` checks one.

        Returns, per append in order, its results, or the error that refused it alone
        (WrongExpectedVersionError, DuplicateCommandError, QueueFrozenError, …): the
        others are stored all the same. Bad arguments raise before anything is written.
        """
        state = self._topic(topic)
        if not state.info.streams:
            raise StreamTopicError(
                f"topic {topic!r} is not a stream topic: create one with create_stream_topic"
            )
        batch = self._streams.request_many(appends, self._writer.max_body(state))
        if not batch:
            return []
        return self._writer.append_prepared(state, batch)

    def read_stream(
        self, topic: str, stream_id: str, from_version: int = 1, max_count: int = 100
    ) -> EventSlice:
        """The stream's events from ``from_version`` on, at most ``max_count``, in
        version order (a list of StoredEvent).

        Reads start at the oldest version retention kept: the answer's
        ``first_kept_version`` says which, and ``deleted_by_retention`` whether the read
        started later than asked. ``stream_version`` is the stream's newest version.
        """
        self._check_open()
        self._follow()
        state = self._topic(topic)
        log = self.commitlog
        return self._streams.read(
            state, stream_id, from_version, max_count, log.tail, log.min_offset,
            self._reader.corruptions.note,
        )  # fmt: skip

    def stream_version(self, topic: str, stream_id: str) -> int:
        """The stream's newest version; 0 for a stream with no events."""
        self._check_open()
        self._follow()
        return self._streams.version(self._topic(topic), stream_id, self.commitlog.tail)

    # ------------------------------------------------------------------ topics

    # ----------------------------------------------------------------- appends

    # ------------------------------------------------------------------- reads

    # ----------------------------------------------------------------- offsets

    # -------------------------------------------------------------- durability

    def flush(self) -> None:
        """fsync the commit log and consume queues, then write the checkpoint."""
        self._check_open()
        writer = self._writer
        writer.check_writable()
        try:
            self._flusher.advance(self._flush_everything())
        except OSError as error:
            writer.fail(error)
            if error.errno == errno.ENOSPC:
                raise DiskFullError(writer.failure_sentence()) from error
            raise StoreFailedError(writer.failure_sentence()) from error

    def _log_unsynced(self) -> bool:
        """Whether the log holds writes no fsync has covered yet (this process's appends
        past what it synced, or segments others wrote that it must sync)."""
        log = self.commitlog
        return log.tail > log.flushed or bool(log.unsynced)

    def _sync_log(self) -> int:
        """fsync the commit log up to the current tail; return that tail.

        Flushes run one at a time: a flush that took no segments must not report the
        log durable while another is still syncing the segments it took.
        """
        with self._flush_lock:
            with self._write_lock:
                target = self.commitlog.tail
                if not self._log_unsynced():
                    return target  # an fdatasync would cover nothing new
                pending = self.commitlog.take_unsynced()
            for segment in pending:
                segment.sync()
            self._flusher.log_syncs += len(pending)
            if self._sync_mode:
                # The durable watermark follows the fsync that acknowledges: damage found
                # below it after a crash is reported, never cut off as a torn tail.
                self._checkpoint.save_flushed(target)
            self.commitlog.flushed = max(self.commitlog.flushed, target)
            self._warm.behind(target)
            return target

    def _sync_through(self) -> None:
        """Sync mode: make the log durable up to its tail now, for a native append that
        its group commit cannot cover alone (its segment is new and what is below it is
        not known durable yet, or other segments wait for an fsync). Raises the typed
        error of a failed fsync, which fails the store."""
        try:
            self._flusher.advance(self._sync_log())
        except OSError as error:
            self._fail(error)
            raise self._flusher.refusal() from error

    def _flush_periodic(self) -> int:
        """The flush thread's flush: everything, but in async mode shared topics' block
        files only every ``queue_flush_interval_ms`` (a store into a mapped block page
        written back since costs a fault: the fewer writebacks, the fewer faults), or
        sooner once ``BLOCKS_BEHIND_BYTES`` of log wait past ``dispatched``."""
        now = time.monotonic()
        due = (
            self._sync_mode
            or now >= self._blocks_due
            or self.commitlog.tail - self._checkpoint.current().dispatched > BLOCKS_BEHIND_BYTES
        )
        if due:
            self._blocks_due = now + self.config.queue_flush_interval_ms / 1000
        return self._flush_everything(blocks=due, refault=due and not self._sync_mode)

    def _flush_everything(self, blocks: bool = True, refault: bool = False) -> int:
        """fsync the log and the consume queues, then write the checkpoint; return the tail.

        The checkpoint vouches only for what this flush made durable: every segment,
        queue file, time index, block file, key-index and event-index file holding
        records or entries past what the checkpoint already vouched for, whoever wrote
        them. This process's own writes, what it followed and what its recovery passed
        are marked as they happen; records from before it opened are found by walking
        the log from the checkpoint (``_cover_unseen``). ``refault``: each block file's
        pages stored into before its sync are mapped again after it (the flush thread's).
        """
        with self._flush_lock:
            self._follow()
            vouched = self._checkpoint.current()
            # Under the follow lock too: a reader's follow moves the tail before it marks
            # the files of what it followed.
            with self._write_lock, self._follow_lock:
                target = self.commitlog.tail
                self._cover_unseen(vouched.dispatched)
                segments = self.commitlog.take_unsynced()
                segments += [
                    s for s in self._segments_past(vouched.commitlog_flushed) if s not in segments
                ]
                # The log is durable below the checkpoint's watermark, whoever synced it
                # (each process's flush syncs every segment past the one before it): a
                # segment with no bytes past it up to the target needs no fdatasync, not
                # this process's own nor one another process wrote and synced since.
                # Not while the checkpoint is above what was written again since a cut.
                trusted = not self._checkpoint_above
                if trusted:
                    flushed = vouched.commitlog_flushed
                    segments = [s for s in segments if min(s.end, target) > flushed]
                # Another process's flush made everything below the target durable, queue
                # and index entries too (its checkpoint's ``dispatched``): the files this
                # process marked hold nothing for this flush to sync.
                covered = trusted and target <= min(
                    vouched.commitlog_flushed, vouched.dispatched, vouched.index_dispatched
                )
                dirty = self._registry.take_dirty()
                # Block stores left for their own cadence (``blocks`` false): given back
                # to the dirty set, and ``dispatched`` not raised past the last flush
                # that synced them (recovery re-dispatches the records past it).
                held = [] if blocks else [q for q in dirty if isinstance(q, BlockStore)]
                if held:
                    dirty = [q for q in dirty if not isinstance(q, BlockStore)]
                    self._registry.dirty.update(held)
                queue_files = [f for q in dirty for f in q.take_dirty()]
                witnessed = self._queue_ends(dirty)
                time_indexes = [q.time_index for q in dirty]
                # Every key-index file with entries past the last checkpoint: other
                # processes write and roll them too, unseen by this one's dirty list.
                index_files = self._index.files_to_sync(vouched.index_dispatched)
                event_indexes = self._streams.to_sync(self._registry.topics, target)
                if covered:  # (a time index stays dirty: synced by a later flush)
                    queue_files, time_indexes, index_files, witnessed = [], [], [], {}
            for segment in segments:
                segment.sync()
            self._flusher.log_syncs += len(segments)
            self._let_go_of_log(target)
            for queue_file in queue_files:
                queue_file.sync()
                if refault and type(queue_file) is BlockFile:
                    # The pages stored into before the sync mapped again on this thread
                    # right after it, so that the producers' next stores into them take
                    # no fault under their thread lock (docs/PERFORMANCE.md, put33-s51).
                    queue_file.map_stored_pages()
            for time_index in time_indexes:
                time_index.sync()
            for index_file in index_files:
                index_file.sync()
            for event_index in event_indexes:
                event_index.sync()
            self._adopt_files([*queue_files, *index_files, *event_indexes])
            self._witness_queue_ends(witnessed, target)
            self._checkpoint.save(target, vouched.dispatched if held else target, target)
            if self._checkpoint_above and target >= self._checkpoint_above and not held:
                self._checkpoint_above = 0  # everything below it synced by this process
            self.commitlog.flushed = max(self.commitlog.flushed, target)
            self._disk.measure()
            self._warm.soon(target)  # what this process followed, and appended last
            return target

    def _let_go_of_log(self, durable: int) -> None:
        """``log_cache_behind_bytes``: let go of the page-cache pages of the log below
        ``durable`` (just fsynced) minus that distance, past what earlier flushes let go
        of: this process's own mapping of them unmapped (``MADV_DONTNEED``: the
        pretoucher's and its readers' page-table entries; a shared file mapping loads
        them again from the file), then the pages freed (``POSIX_FADV_DONTNEED``: clean
        ones go at once; one another process has mapped stays). By whole
        ``LET_GO_BYTES`` of a segment: the page cache keeps a file in folios of up to
        that size, and one reaching past the range asked for is kept whole. No byte
        changes; a reader of them reads from the disk."""
        behind = self.config.log_cache_behind_bytes
        upto = durable - behind
        if not behind or upto - self._cache_let_go < LET_GO_BYTES:
            return
        log = self.commitlog
        with log.closing:  # a segment is not closed (its descriptor reused) meanwhile
            for segment in log._located[1]:
                if segment.end <= self._cache_let_go or segment.fd < 0:
                    continue
                if segment.base >= upto:
                    break
                low = max(self._cache_let_go, segment.base) - segment.base
                low -= low % LET_GO_BYTES
                if upto >= segment.end:
                    high = segment.size
                else:
                    high = (upto - segment.base) // LET_GO_BYTES * LET_GO_BYTES
                if high <= low:
                    continue
                # Hints: one refused (a closed mapping, an errno) fails no flush.
                with contextlib.suppress(ValueError, OSError):
                    segment.map.madvise(mmap.MADV_DONTNEED, low, high - low)
                with contextlib.suppress(OSError):
                    os.posix_fadvise(segment.fd, low, high - low, os.POSIX_FADV_DONTNEED)
                self._cache_let_go = segment.base + high

    def _pretouch(self) -> None:
        """The pretoucher, on the flush thread, asked by the native append every 256 KiB
        of log: the active segment's next ``PRETOUCH_BYTES`` past the tail and each
        queue window's next entries are faulted in for writing without the GIL
        (``AppendCore.pretouch``), so that the appending thread does not take those
        page faults. Under the log's ``closing`` lock: a segment being closed waits."""
        core = self._appender
        log = self.commitlog
        if core is None:
            return
        with log.closing:
            segment = log.active
            if segment is None:
                return
            start = max(0, log.tail - segment.base)
            with contextlib.suppress(ValueError, BufferError):  # a closed mapping
                core.pretouch(segment.map, start, start + PRETOUCH_BYTES)

    def _adopt_files(self, files: list) -> None:
        """Make the names of the files just fsynced durable before the checkpoint vouches
        for what they hold, where this process did not create them so: another process
        did, and may have died before fsyncing their directory (or a queue's first file,
        made without that fsync). One fsync per directory, once per file: a queue file
        says whether its name is known durable (``named``); the few block, key-index and
        event-index files are remembered by path."""
        unnamed = []
        for file in files:
            if isinstance(file, QueueFile):
                if not file.named:
                    unnamed.append(file)
            elif os.fspath(file.path) not in self._named_paths:
                unnamed.append(file)
        for directory in {file.path.parent for file in unnamed}:
            fileio.fsync_dir(directory)
        for file in unnamed:
            if isinstance(file, QueueFile):
                file.named = True
            else:
                self._named_paths.add(os.fspath(file.path))

    def _cover_unseen(self, vouched: int) -> None:
        """Mark the files written by the records this process has not marked
        (``_unmarked``) past what the checkpoint vouches for, walking their headers, so
        that this flush fsyncs them before its checkpoint covers them (caller holds the
        write and follow locks). Below ``vouched`` nothing is needed: the checkpoint
        never moves back."""
        stretches = [(max(start, vouched), end) for start, end in self._unmarked]
        self._unmarked = []
        for start, end in stretches:
            if start < end:
                grown = mark_records_written(self.commitlog, start, end, self._registry.resolve)
                self._registry.dirty.update(grown)

    def _segments_past(self, offset: int) -> list:
        """The segments holding log bytes past ``offset`` (the newest last)."""
        segments = self.commitlog.segments
        first = len(segments)
        while first > 0 and segments[first - 1].end > offset:
            first -= 1
        return segments[first:]

    def _mark_unvouched_segments(self, since: int) -> None:
        """Have the next fsync of the log cover every segment past what the checkpoint
        says is durable, or past ``since``: written before this process opened, by a
        process that may not have synced them (an async writer, a killed one)."""
        flushed = self._checkpoint.current().commitlog_flushed
        for segment in self._segments_past(min(flushed, since)):
            self.commitlog.mark_unsynced(segment)

    @staticmethod
    def _queue_ends(queues) -> dict[bytes, dict[int, int]]:
        """Topic name → queue id → end, of the queues with files of their own."""
        ends: dict[bytes, dict[int, int]] = {}
        for queue in queues:
            if isinstance(queue, ConsumeQueue) and queue.loaded:
                name, queue_id = queue.owner
                ends.setdefault(name, {})[queue_id] = queue.max_offset
        return ends

    def _witness_queue_ends(self, witnessed: dict[bytes, dict[int, int]], tail: int) -> None:
        """Record the ends just made durable (see ``queueends``). A failed write only
        weakens the witness, so it does not fail the flush."""
        for name, ends in witnessed.items():
            topic = self._registry.topic_of(name)
            if topic is not None and topic.ends is not None:
                with contextlib.suppress(OSError):
                    topic.ends.raise_to(ends, len(topic.queues), tail)

    def _mark_forked(self) -> None:
        """This process forked after the store was opened: the child may not use it
        (ForkGuard calls it in the child)."""
        self._forked = True
        self._refusals.set(dataplane.REFUSED_FORKED, True)

    def _fail(self, error: BaseException) -> None:
        """Refuse writes until reopened (the writer keeps the failure)."""
        self._writer.fail(error)

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
        self._writer.check_writable()

    @property
    def _topics(self) -> dict[str, Topic]:
        """The queues part's topics by name (tests outside the engine look at them)."""
        return self._registry.topics

    @property
    def closed(self) -> bool:
        """Whether this store object can no longer be used (closed, or from before a fork)."""
        return self._closed or self._forked

    @property
    def failed(self) -> bool:
        return self._writer.failure is not None

    # --------------------------------------------------------------- retention

    # ------------------------------------------------------------------- stats

    def stats(self, *, topics: bool = True) -> StoreStats:
        """Segments, disk use, per-topic and per-queue offsets, flush state, last recovery.

        ``topics=False`` leaves ``topics`` None (every queue of every topic is not read):
        for callers that show only the store-wide figures, on stores with many queues.
        """
        self._check_open()
        self._follow()
        log = self.commitlog
        # Under the follow lock: the flush thread may follow another process's retention
        # meanwhile, closing the segments it deletes.
        with self._follow_lock:
            segments = [
                SegmentStats(
                    name=segment_name(s.base),
                    base=s.base,
                    size=s.size,
                    disk_bytes=os.fstat(s.fd).st_blocks * 512,
                    used_bytes=max(0, min(log.tail, s.end) - s.base),
                )
                for s in list(log.segments)
            ]
        commit_log = CommitLogStats(
            log.min_offset, log.tail, self._flusher.flushed, self._flusher.syncs
        )
        topic_figures = (
            {
                name: self._topic_stats(state)
                for name, state in sorted(self._registry.topics.items())
            }
            if topics
            else None
        )
        return StoreStats(
            path=str(self.path),
            store_id=self._id_prefix,
            flush_mode=self.config.flush_mode,
            segment_bytes=self.config.segment_bytes,
            segments=segments,
            segment_count=len(segments),
            disk_bytes=sum(s.disk_bytes for s in segments),
            commit_log=commit_log,
            last_flush_ms=self._flusher.last_flush_ms,
            topics=topic_figures,
            groups=self.groups(),
            last_recovery=self._recovery_copy(),
            last_retention=self._read_json("retention.json"),
            disk_ratio=round(self._disk.measure(), 4),
            retention_hours=self.config.retention_hours,
            corruptions=list(self._reader.corruptions.recent()),
            index_problems=[IndexFileProblem(p.path.name, p.reason) for p in self._index.problems],
            offsets_dropped_bytes=self._offsets.dropped_bytes,
            checkpoint_problems=list(self._checkpoint.problems),
            streams=self._streams.stats(self._registry.topics),
            failed=None if self._writer.failure is None else str(self._writer.failure),
        )

    def _recovery_copy(self) -> RecoveryReport:
        """The last recovery report as ``stats()`` gives it: a copy (a caller changing it
        does not change the store's own), made once per report and shared by every call
        until the store has another (a deep copy costs more than the rest of ``stats()``
        on a small store): read it, do not change it."""
        report = self.last_recovery
        handed = self._handed_recovery
        if handed is None or handed[0] is not report:
            handed = self._handed_recovery = (report, copy.deepcopy(report))
        return handed[1]

    def topic_stats(self, name: str, first: int = 0, count: int | None = None) -> TopicStats:
        """One topic's part of ``stats()``: per queue min and max offsets, messages and
        last store time, and the topic's message count; of the queues ``first`` to
        ``first + count - 1`` (default: every queue; a page of a topic with very many)."""
        self._check_open()
        self._follow()
        return self._topic_stats(self._topic(name), first, count)

    def topic_totals(self, name: str) -> tuple[int, int | None]:
        """One topic's message count and its newest message's store time (None when no
        queue has a readable last record): ``topic_stats``'s totals without an object per
        queue, for lists of topics (storeadapter/summaries.py; a topics page reads 50)."""
        self._check_open()
        self._follow()
        messages = 0
        newest = None
        last_store_time = self._last_store_time
        for queue in self._topic(name).queues:
            messages += queue.max_offset - queue.min_offset
            when = last_store_time(queue)
            if when and (newest is None or when > newest):
                newest = when
        return messages, newest

    def _last_store_time(self, queue) -> int | None:
        """The store time of the queue's last message; None, and the damage noted among
        the corruptions, when its record is cut short."""
        try:
            return self._reader.last_store_time(queue)
        except CorruptRecordError as error:
            self._reader.corruptions.note(Corruption(error.offset, 0, error.reason))
            return None

    def _topic_stats(self, state: Topic, first: int = 0, count: int | None = None) -> TopicStats:
        queue_stats = {}
        queues = state.queues
        stop = len(queues) if count is None else min(len(queues), first + max(0, count))
        for queue_id in range(max(0, first), stop):
            queue = queues[queue_id]
            queue_stats[queue_id] = QueueStats(
                min_offset=queue.min_offset,
                max_offset=queue.max_offset,
                messages=queue.max_offset - queue.min_offset,
                last_store_time_ms=self._last_store_time(queue),
            )
        return TopicStats(
            queues=queue_stats,
            messages=sum(q.messages for q in queue_stats.values()),
            created_ms=state.info.created_ms,
        )

    def _read_json(self, name: str) -> dict | None:
        try:
            return json.loads((self.path / name).read_bytes())
        except (OSError, ValueError):
            return None

    # ----------------------------------------------------------------- closing

    def close(self) -> None:
        """Flush, write the checkpoint, and leave; the last process to leave marks the
        shutdown clean. Safe to call twice."""
        if self._closed:
            return
        self._flusher.stop()
        self._warm.stop()
        clean = self._writer.failure is None and not self._forked
        if clean:
            try:
                self._flusher.advance(self._flush_everything())  # wakes sync appenders
            except OSError as error:
                self._fail(error)
                clean = False
        if self._log_syncer is not None:
            self._log_syncer.close()  # its waiters not covered by now time out
        self._closed = True
        self._refusals.set(dataplane.REFUSED_CLOSED, True)
        self._core.close()
        appender, self._appender = self._appender, None  # it holds the store: no cycle
        self.__dict__.pop("append", None)  # its bound call holds the core
        self._reader.arrivals.wake()
        self._registry.close()
        if appender is not None:
            appender.close()  # after the files: it lets go of closed block files' maps
        self._index.close()
        self._streams.close()
        self.commitlog.close()
        self._checkpoint.close()
        self._offsets.close()
        self._pen = None
        self._locks.unshare_writes()  # before open.lock: an older engine may be opening
        with self._locks.closing() as last:
            # A write left unfinished (its writer died or failed, and no one has written
            # since to clear it) keeps the shutdown unclean: the next open clears it.
            if last and clean and not self._shared.write_pending():
                fileio.unlink(self.path / "abort")
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
