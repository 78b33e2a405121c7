"""The writer: a part of ``MessageStore`` that validates, encodes and writes appends.

It owns the write path: preparing messages (``prepare``, ``prepare_batch``), the
group-commit combiner of sync mode (``WriteCombiner``), writing a group of batches under
one hold of the write lock (``write_group``: the catch-up, the shared write extent begun
and finished, each batch's records, then what they mean for the indexes handed to the
store's dispatchers (dispatch.py: time marks, key-index, event-index and consume-queue
entries), the dedup lookups, the appends to event streams, then the new tail
published), clearing
what a failed write left, and the store's failure: the error that made it refuse
writes (``failure``), which ``fail`` sets (the store's own failed flushes and changes
too) and the flusher is told of.

Its collaborators are passed in: the commit log, the queues (``TopicRegistry``), the key
index (dedup lookups), the store's list of dispatchers, the streams, the reader (records
for dedup, and the pulls an append wakes), the disk use, the write session (writesession.py: the
locks, the catch-up, a dead writer's clearing and the publish, which the store's
changes go through too) and the flusher.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Mapping
from itertools import repeat
from pathlib import Path
from zlib import crc32

from . import clock, dataplane
from .combining import WriteCombiner
from .commitlog import CommitLog
from .config import StoreConfig
from .consumequeue import ENTRY_SIZE, TIME_INDEX_INTERVAL
from .diskuse import DiskUse
from .dispatch import WRITTEN, Dispatcher, Run, truncate_all
from .errors import (
    DiskFullError,
    InvalidMessageError,
    MessageTooLargeError,
    QueueFrozenError,
    QueueNotFoundError,
    StoreFailedError,
    StreamTopicError,
    TopicNotFoundError,
)
from .flush import FlushService
from .keyindex import KeyIndex
from .names import DEDUP_KEY_PREFIX, DEDUP_PROPERTY, check_dedup_id
from .reader import Reader
from .record import (
    MARKER_SIZE,
    RECORD_OVERHEAD,
    encode_keys,
    encode_properties,
    encode_tag,
    normalize_keys,
)
from .results import (
    STATUS_DUPLICATE,
    STATUS_FLUSH_TIMEOUT,
    STATUS_OK,
    AppendResult,
    Message,
)
from .seam import Watched
from .streams import REFUSALS as STREAM_REFUSALS
from .streams import Admitted, StreamAppend, StreamBatch, Streams
from .tags import tag_hash
from .topics import Topic, TopicRegistry
from .warming import WarmService
from .writesession import WriteSession

_CHUNK_BYTES = 8 << 20
_DEDUP_CANDIDATES = 16
# A message validated and encoded, waiting for its place in the log:
# (queue or None, routing key bytes or None, tag, keys, properties, body, born ms or None,
#  tag hash, keys to index, dedup id or None)
_Prepared = tuple
_BODY_AND_QUEUE = frozenset(("body", "queue"))
# Errors that refuse one batch of a write group before anything of it is written.
_REFUSED_ALONE = (TopicNotFoundError, QueueFrozenError, MessageTooLargeError)
# What the checks of an append to a stream refuse it with (nothing of it written yet).
_STREAM_REFUSED = (TopicNotFoundError, QueueFrozenError, *STREAM_REFUSALS)


_new_run = tuple.__new__  # a Run made without a Python-level call


def _back_to_published(written: list[tuple]) -> None:
    """A dispatcher failed: the queues' ends in memory go back to the published ones
    (what was written is cleared by the caller)."""
    for queue, first, _packed in written:
        if queue.max_offset > first:
            queue.max_offset = first


def _results(
    id_prefix: str,
    topic: str,
    queue_ids: list[int],
    offsets: list[int],
    starts: list[int],
    store_ms: int,
) -> list[AppendResult]:
    """The results of messages written at ``starts``, each id made in one pass for all:
    the offsets packed big-endian, hex in groups of 8 bytes, upper case."""
    if not starts:
        return []
    hex_offsets = struct.pack(f">{len(starts)}Q", *starts).hex(" ", 8).upper().split()
    return list(
        map(
            tuple.__new__,
            repeat(AppendResult),
            zip(
                map(id_prefix.__add__, hex_offsets),
                repeat(topic),
                queue_ids,
                offsets,
                starts,
                repeat(store_ms),
                repeat(STATUS_OK),
            ),
        )
    )


class Writer(metaclass=Watched):
    """The write path of ``MessageStore``; see the module's docstring."""

    def __init__(
        self,
        path: Path,
        config: StoreConfig,
        commitlog: CommitLog,
        registry: TopicRegistry,
        index: KeyIndex,
        dispatchers: list[Dispatcher],
        streams: Streams,
        reader: Reader,
        disk: DiskUse,
        session: WriteSession,
        flusher: FlushService,
        warm: WarmService,
        id_prefix: str,
        refusals: dataplane.Refusals | None = None,
    ) -> None:
        self.path = path
        self._refusals = refusals
        self.config = config
        self.commitlog = commitlog
        self._registry = registry
        self._index = index  # looked up for dedup ids; written through the dispatchers
        self._dispatchers = dispatchers
        self._streams = streams
        self._reader = reader
        self._disk = disk
        self._session = session
        self._flusher = flusher
        self._warm = warm  # maps in what async appends write (warming.py)
        self._id_prefix = id_prefix
        self._sync_mode = config.flush_mode == "sync"
        self._combiner = WriteCombiner(
            self.write_group,
            lambda: flusher,
            timeout_s=config.flush_timeout_ms / 1000,
            fill_wait_s=config.group_commit_wait_us / 1e6,
            on_timeout=self.flush_timed_out,
        )
        self.failure = None

    @property
    def failure(self) -> BaseException | None:
        """The error that made the store refuse writes (a write's, an fsync's, or a
        change's the store reports with ``fail``); None while it takes them. Setting it
        moves the store's refusal word (``dataplane.Refusals``, read by the native
        append)."""
        return self._failure

    @failure.setter
    def failure(self, error: BaseException | None) -> None:
        self._failure = error
        if self._refusals is not None:
            self._refusals.set(dataplane.REFUSED_FAILED, error is not None)

    # --------------------------------------------------------------- preparing

    def prepare_batch(self, state: Topic, messages: list, limit: int) -> list[_Prepared]:
        """Validate and prepare ``messages`` (``append_batch``'s items, not all plain
        bodies that fit within ``limit``) for ``append_prepared``.

        One native call prepares bytes, str, and dicts and Messages of body, queue, key,
        tag and properties (``_native.prepare_items``: the same tuples); it leaves a
        batch with any other item, or any item ``prepare`` refuses, to the loop below,
        which raises the typed error."""
        prepared = self.prepare_batch_native(state, messages)
        if prepared is not None:
            return prepared
        return self.prepare_batch_python(state, messages, limit)

    def prepare_batch_native(self, state: Topic, messages: list) -> list[_Prepared] | None:
        """``prepare_batch`` in one native call; None when it leaves the batch to Python."""
        return dataplane.prepare_items(
            messages,
            len(state.queues),
            state.info.frozen,
            self.max_body(state),
            RECORD_OVERHEAD + len(state.name_bytes),
            self.commitlog.capacity(),
            Message,
        )

    def prepare_batch_python(self, state: Topic, messages: list, limit: int) -> list[_Prepared]:
        """``prepare_batch`` an item at a time, in Python."""
        prepared = []
        queue_count = len(state.queues)
        frozen = state.info.frozen
        for item in messages:
            if type(item) is bytes and len(item) <= limit:
                prepared.append((None, None, b"", b"", b"", item, None, 0, (), None))
            elif type(item) is dict and item.keys() <= _BODY_AND_QUEUE:
                # A body, perhaps with a queue (the common dict): no _prepare needed when
                # both are plainly valid; anything else goes the long way for its error.
                body = item.get("body")
                queue = item.get("queue")
                if (
                    type(body) is bytes
                    and len(body) <= limit
                    and (
                        queue is None
                        or (type(queue) is int and 0 <= queue < queue_count and queue not in frozen)
                    )
                ):
                    prepared.append((queue, None, b"", b"", b"", body, None, 0, (), None))
                else:
                    prepared.append(self.prepare_mapping(state, item))
            elif isinstance(item, (bytes, bytearray, memoryview, str)):
                prepared.append(self.prepare(state, item, None, None, None, None, None))
            elif isinstance(item, Message):
                prepared.append(self.prepare(state, *item))
            elif isinstance(item, Mapping):
                prepared.append(self.prepare_mapping(state, item))
            else:
                raise InvalidMessageError(
                    f"a message is bytes, str, a dict or a Message, not {type(item).__name__}"
                )
        return prepared

    def prepare_mapping(self, state: Topic, item: Mapping) -> _Prepared:
        unknown = set(item) - set(Message._fields)
        if unknown or "body" not in item:
            raise InvalidMessageError(
                "a message dict needs 'body' and may have "
                f"{', '.join(Message._fields[1:])}; got {sorted(item, key=str)}"
            )
        return self.prepare(state, *Message(**item))

    def plain_body_limit(self, state: Topic) -> int:
        """The largest body that fits, for a message with no key, tag or properties."""
        fits = self.commitlog.capacity() - RECORD_OVERHEAD - len(state.name_bytes)
        own = state.info.settings.get("max_message_bytes", self.config.max_message_bytes)
        return own if own < fits else fits

    def max_body(self, state: Topic) -> int:
        """The topic's ``max_message_bytes``: its own setting, else the store's."""
        return state.info.settings.get("max_message_bytes", self.config.max_message_bytes)

    def prepare(
        self, state, body, key, tag, queue, properties, born_ms, dedup_id=None
    ) -> _Prepared:
        if isinstance(body, str):
            body = body.encode()
        elif isinstance(body, (bytearray, memoryview)):
            body = bytes(body)
        elif not isinstance(body, bytes):
            raise InvalidMessageError(f"a body is bytes or str, not {type(body).__name__}")
        limit = self.max_body(state)
        if len(body) > limit:
            raise MessageTooLargeError(
                f"the body is {len(body)} bytes; the limit of topic {state.info.name!r} is {limit}"
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
        if properties and DEDUP_PROPERTY in properties:
            raise InvalidMessageError(
                f"the property {DEDUP_PROPERTY} is reserved: pass dedup_id= instead"
            )
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

    # ----------------------------------------------------------------- writing

    def append_prepared(self, state: Topic, batch: list, plain: bool = False) -> list[AppendResult]:
        """Write a validated batch, publish it, wait if sync; with ``plain``, ``batch`` is
        a list of bodies (bytes that fit) to go to the writable queues in turn.

        Async mode: written here (``write_group``, a group of one); a flush is asked
        for when the unflushed bytes pass ``flush_dirty_bytes``. Sync mode: threads
        appending at once are written in groups (combining.py), this batch by this
        thread or by the one leading its group, and a group waits for one fsync; a batch
        no fsync covers within ``flush_timeout_ms`` gets status FLUSH_TIMEOUT.
        """
        if (
            state.info.streams
            and type(batch) is not StreamAppend
            and type(batch) is not StreamBatch
        ):
            raise StreamTopicError(
                f"topic {state.info.name!r} is a stream topic: append events to its streams "
                "with append_event"
            )
        if self._disk.ratio >= self.config.disk_reject_ratio:
            raise DiskFullError(
                f"the disk holding {self.path} is {self._disk.ratio:.0%} full, past "
                f"disk_reject_ratio ({self.config.disk_reject_ratio:.0%}): appends are "
                "refused until retention or an operator frees space"
            )
        if self._sync_mode:
            return self._combiner.submit((state, batch, plain))
        outcomes, end = self.write_group([(state, batch, plain)])
        if end - self._flusher.flushed > self.config.flush_dirty_bytes:
            self._flusher.kick()
        self._warm.behind(end)
        if isinstance(outcomes[0], BaseException):
            raise outcomes[0]
        return outcomes[0]

    def write_group(self, group: list[tuple[Topic, list, bool]]) -> tuple[list, int]:
        """Write the batches of a group under one hold of the write lock; return each
        batch's results (or the error it alone met) and the commit-log tail after them.

        Steps: 1. hold a write session (the thread lock, then the pen, caught up with
        what other processes wrote, a dead writer's extent cleared); then per batch:
        2. find messages whose dedup id is already stored; 3. encode and write the
        others (``_write_records``); 4. hand them to the dispatchers (time marks,
        key-index and consume-queue entries); then 5. publish the new tail once. A
        batch refused before it is written (its topic deleted, every queue frozen)
        fails alone; a failed write fails it and every later batch, and the store
        refuses writes.
        """
        outcomes: list = []
        published: list[tuple[int, int, int, int]] = []
        with self._session as failure:
            end = self.commitlog.tail
            if failure is not None:  # a dead writer's clearing failed: the next one clears
                return [failure] * len(group), end
            self._streams.begin_hold()
            now = clock.now_ms()
            whole = True
            for state, batch, plain in group:
                if self.failure is not None:
                    outcomes.append(StoreFailedError(self.failure_sentence()))
                    continue
                try:
                    results = self._write_batch(state, batch, plain, now, published)
                except _REFUSED_ALONE as error:
                    outcomes.append(error)
                    continue
                except STREAM_REFUSALS as error:
                    if type(batch) is not StreamAppend:
                        raise
                    outcomes.append(error)
                    continue
                except OSError as error:
                    # The batches before it are published; what this one wrote is
                    # cleared now if the disk lets it, else left marked as the
                    # writer's extent for the next writer (or the next open) to clear.
                    self.fail(error)
                    self.commitlog.abandon_past(end)
                    outcomes.append(self.write_failure(error))
                    whole = self._clear_failed_write(end)
                    continue
                outcomes.append(results)
                end = self.commitlog.tail
            self._session.publish_tail(end, published, whole)
        arrivals = self._reader.arrivals
        if arrivals.waiting:
            arrivals.wake()
        return outcomes, end

    def _check_topic_limit(self, state: Topic, batch: list, plain: bool) -> None:
        """A topic's own ``max_message_bytes`` again, as caught up under the lock: another
        process may have lowered it after this batch was prepared."""
        limit = self.max_body(state)
        largest = max(map(len, batch if plain else [item[5] for item in batch]), default=0)
        if largest > limit:
            raise MessageTooLargeError(
                f"the body is {largest} bytes; the limit of topic {state.info.name!r} is {limit}"
            )

    def native_write_failed(self, error: OSError, tail: int) -> DiskFullError | StoreFailedError:
        """The native append's write past ``tail`` failed (it holds the pen; its write
        is begun, with its extent marked): fail the store, clear what it wrote if the
        disk lets it, publish ``tail`` as ``write_group`` does; the typed error."""
        self.fail(error)
        failure = self.write_failure(error)
        whole = self._clear_failed_write(tail)
        self._session.publish_tail(tail, [], whole)
        return failure

    def _clear_failed_write(self, tail: int) -> bool:
        """Zero what a batch that failed part-way wrote past ``tail`` (the space was
        reserved: zeros fit even on a full disk); whether that worked."""
        try:
            log = self.commitlog
            extent = self._session.extent()
            truncate_all(self._dispatchers, tail, extent)
            log.clear_after_tail(log.writable_segment(), extent)
        except OSError:
            return False
        return True

    # ------------------------------------------------------- failed writes

    def fail(self, error: BaseException) -> None:
        """Refuse writes from now on (the first error is the one kept); tell the flusher,
        which fails the sync appends waiting for it."""
        if self.failure is None:
            self.failure = error
        self._flusher.fail(error)

    def failure_sentence(self) -> str:
        return (
            f"the store failed to write or fsync ({self.failure}); it refuses writes "
            "until it is closed and reopened"
        )

    def check_writable(self) -> None:
        """Raise StoreFailedError if the store refuses writes."""
        if self.failure is not None:
            raise StoreFailedError(self.failure_sentence())

    def write_failure(self, error: OSError) -> DiskFullError | StoreFailedError:
        if error.errno == errno.ENOSPC:
            failure = DiskFullError(
                f"the disk holding {self.path} is full ({error}); the store "
                "refuses writes until space is freed and it is reopened"
            )
        else:
            failure = StoreFailedError(
                f"writing to the store failed ({error}); it refuses writes until reopened"
            )
        failure.__cause__ = error
        return failure

    # ----------------------------------------------------------------- batches

    def _write_batch(
        self, state: Topic, batch: list, plain: bool, now: int, published: list
    ) -> list[AppendResult]:
        """Steps 2 to 4 of ``_write_group`` for one batch; adds the queues it wrote to
        ``published`` as (topic id, queue, next offset, time)."""
        if self._registry.topics.get(state.info.name) is not state:
            raise TopicNotFoundError(f"topic {state.info.name!r} was deleted meanwhile")
        if "max_message_bytes" in state.info.settings and type(batch) is list:
            self._check_topic_limit(state, batch, plain)
        if type(batch) is StreamAppend:
            outcome = self._write_events(state, [batch], now, published)[0]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        if type(batch) is StreamBatch:
            return self._write_events(state, batch, now, published)
        duplicates = {} if plain else self._find_duplicates(state, batch, now)
        results, next_offsets, written, index_items, marks = self._write_records(
            state, batch, now, duplicates, plain
        )
        # Step 4, inlined (the hot path): the store's dispatchers, in their order.
        run = _new_run(
            Run, (WRITTEN, state, self.commitlog.tail, written, marks, index_items, None)
        )
        try:
            for dispatcher in self._dispatchers:
                dispatcher.dispatch(run)
        except OSError:
            _back_to_published(written)
            raise
        topic_id = state.info.id
        for queue_id, end in next_offsets.items():
            published.append((topic_id, queue_id, end, now))
        return results

    def _write_events(
        self, state: Topic, appends: list[StreamAppend], now: int, published: list
    ) -> list:
        """``_write_batch`` for appends to streams: per append its results, or the error
        that refused it alone (nothing of it written).

        Steps: 1. each append is checked (``Streams.admit``) and laid out after the ones
        before it: its records one after another in one segment and one queue, its
        index entries numbered on; 2. the appends laid out are written together
        (``_write_laid_out``): one native call encodes their records, queue entries,
        index entries and results, then the log, each queue and the index are written
        once. The layout is written first whenever the next append could not be checked
        or laid out beside it: it needs a slot one of them links to (its checks read the
        slot from the file), or the records would not fit in the segment or the chunk.
        """
        outcomes: list = [None] * len(appends)
        streams = self._streams
        log = self.commitlog
        if now < log.last_store_ms:
            now = log.last_store_ms  # store times never go back, even if the clock does
        laid: list[tuple[int, StreamAppend, Admitted]] = []
        rows: list[tuple] = []
        linked: set[int] = set()  # the stream slots the laid-out appends link to
        linked_commands: set[int] = set()  # and the command slots
        length = 0
        next_offsets: dict[int, int] = {}
        number = 0
        index = None
        slots = room = 0
        for i, append in enumerate(appends):
            if laid and (
                append.hashed % slots in linked
                or (append.command and append.command % slots in linked_commands)
            ):
                self._write_laid_out(state, index, laid, rows, now, published, outcomes)
                laid, rows, length = [], [], 0
                linked.clear()
                linked_commands.clear()
            try:
                admitted = streams.admit(state, append)
            except _STREAM_REFUSED as error:
                outcomes[i] = error
                continue
            index = admitted.index
            slots = index.slots
            if laid and length + admitted.length > room:
                self._write_laid_out(state, index, laid, rows, now, published, outcomes)
                laid, rows, length = [], [], 0
                linked.clear()
                linked_commands.clear()
            if not laid:
                self._fit_in_segment(admitted.length)
                room = min(log.writable_segment().end - MARKER_SIZE - log.tail, _CHUNK_BYTES)
                next_offsets.clear()
                number = index.count + 1
            queue_id = admitted.queue
            base = next_offsets.get(queue_id)
            if base is None:
                base = state.queues[queue_id].max_offset
            count = len(append.bodies)
            rows.append(streams.row(append, admitted, base, number))
            next_offsets[queue_id] = base + count
            number += count
            length += admitted.length
            laid.append((i, append, admitted))
            linked.add(append.hashed % slots)
            if append.command:
                linked_commands.add(append.command % slots)
        if laid:
            self._write_laid_out(state, index, laid, rows, now, published, outcomes)
        return outcomes

    def _write_laid_out(
        self,
        state: Topic,
        index,
        laid: list[tuple[int, StreamAppend, Admitted]],
        rows: list[tuple],
        now: int,
        published: list,
        outcomes: list,
    ) -> None:
        """Step 2 of ``_write_events``: encode the appends laid out (``rows``) at the
        commit-log tail, write the records, each queue's entries and time marks, and the
        index entries; put each append's results in ``outcomes``."""
        log = self.commitlog
        segment = log.writable_segment()
        start = log.tail
        data, placed, index_entries = dataplane.encode_events(
            state.name_bytes, now, start, index.count + 1, rows, self._id_prefix, state.info.name
        )
        log.write(segment, start - segment.base, data)
        log.tail = end = start + len(data)
        log.last_store_ms = now
        queues = state.queues
        entries: dict[int, list[bytes]] = {}
        bases: dict[int, int] = {}
        next_offsets: dict[int, int] = {}
        for row, (packed, _last, results, _chain) in zip(rows, placed, strict=True):
            queue_id = row[5]
            if queue_id not in entries:
                entries[queue_id] = [packed]
                bases[queue_id] = row[6]
            else:
                entries[queue_id].append(packed)
            next_offsets[queue_id] = row[6] + len(results)
        written = []
        marks = []
        for queue_id, base in bases.items():
            queue = queues[queue_id]
            written.append((queue, base, b"".join(entries[queue_id])))
            mark = -(-base // TIME_INDEX_INTERVAL) * TIME_INDEX_INTERVAL
            for queue_offset in range(mark, next_offsets[queue_id], TIME_INDEX_INTERVAL):
                marks.append((queue, [(queue_offset, now)]))
        appended = [(append, admitted) for _i, append, admitted in laid]
        events = (index, appended, index_entries, placed, end)
        run = Run(WRITTEN, state, end, written, marks, (), events)
        try:
            for dispatcher in self._dispatchers:
                dispatcher.dispatch(run)
        except OSError:
            _back_to_published(written)
            raise
        topic_id = state.info.id
        published.extend((topic_id, q, next_offsets[q], now) for q in next_offsets)
        for (i, _append, _admitted), (_packed, _last, results, _chain) in zip(
            laid, placed, strict=True
        ):
            outcomes[i] = results

    def _fit_in_segment(self, length: int) -> None:
        """Roll to a new segment first unless ``length`` bytes of records fit in what is
        left of the active one: an append's events never straddle two segments."""
        log = self.commitlog
        segment = log.writable_segment()
        if log.tail + length > segment.end - MARKER_SIZE:
            log.close_segment(segment, log.tail - segment.base)

    def flush_timed_out(self, results: list) -> list:
        """Sync mode: the results of a batch no fsync covered within ``flush_timeout_ms``
        (of several streams' appends: a list of results, or an error, per append)."""
        return [
            self.flush_timed_out(r)
            if type(r) is list
            else r
            if isinstance(r, BaseException) or r.status == STATUS_DUPLICATE
            else r._replace(status=STATUS_FLUSH_TIMEOUT)
            for r in results
        ]

    def _write_records(
        self,
        state: Topic,
        batch: list,
        now: int,
        duplicates: dict[str, AppendResult],
        plain: bool = False,
    ) -> tuple[list[AppendResult], dict[int, int], list[tuple], list[tuple], list]:
        """Encode the batch at the commit-log tail and write it, one pwrite per segment.

        A record is ``record.encode_head`` + body + ``record.encode_trailer``, inlined
        here because this loop is the hot path. A record that does not fit in what is
        left of the segment closes it with an end-of-segment marker and goes to a new one.
        Returns the results, each queue's next offset (by id; only queues written to),
        each queue's entries as the dispatchers take them (queue, first queue offset,
        packed entries), the key-index items and the time marks (per mark, its queue
        and [(queue offset, store time)]).
        """
        topic_name = state.info.name
        writable = state.writable
        if not writable and (plain or any(item[0] is None for item in batch)):
            raise QueueFrozenError(
                f"every queue of {topic_name!r} is frozen: it takes no new messages"
            )
        log = self.commitlog
        if now < log.last_store_ms:
            now = log.last_store_ms  # store times never go back, even if the clock does
        segment = log.writable_segment()
        tail = log.tail
        if plain:
            end = (
                tail + sum(map(len, batch)) + len(batch) * (RECORD_OVERHEAD + len(state.name_bytes))
            )
            if end <= segment.end - MARKER_SIZE and end - tail <= _CHUNK_BYTES:
                return self._write_plain(state, batch, now, segment, end)
            batch = [(None, None, b"", b"", b"", body, None, 0, (), None) for body in batch]
        return self._write_general(state, batch, now, duplicates, segment)

    def _write_plain(
        self, state: Topic, bodies: list[bytes], now: int, segment, end: int
    ) -> tuple[list[AppendResult], dict[int, int], list[tuple], list[tuple], list]:
        """``_write_records`` for bodies alone, all fitting in the segment (up to commit
        offset ``end``): encoded, entries packed and results made by one native call."""
        count = len(bodies)
        queues = state.queues
        writable = state.writable
        rr = state.round_robin
        turn = [writable[(rr + i) % len(writable)] for i in range(min(count, len(writable)))]
        targets = {queue_id: queues[queue_id] for queue_id in turn}
        bases = [queue.max_offset for queue in targets.values()]
        log = self.commitlog
        tail = log.tail
        data, packed, results = dataplane.encode_plain(
            bodies, state.name_bytes, tail, now, turn, bases, self._id_prefix, state.info.name
        )
        log.write(segment, tail - segment.base, data)
        log.tail = end
        log.last_store_ms = now
        state.round_robin = rr + count
        width = len(turn)
        next_offsets: dict[int, int] = {}
        written = []
        marks = []
        for j, queue_id in enumerate(turn):
            queue = targets[queue_id]
            base = bases[j]
            written.append((queue, base, packed[j]))
            end_offset = next_offsets[queue_id] = base + count // width + (j < count % width)
            mark = -(-base // TIME_INDEX_INTERVAL) * TIME_INDEX_INTERVAL
            if mark < end_offset:
                for queue_offset in range(mark, end_offset, TIME_INDEX_INTERVAL):
                    marks.append((queue, [(queue_offset, now)]))
        return results, next_offsets, written, [], marks

    def _write_general(
        self,
        state: Topic,
        batch: list[_Prepared],
        now: int,
        duplicates: dict[str, AppendResult | int],
        segment,
    ) -> tuple[list[AppendResult], dict[int, int], list[tuple], list[tuple], list]:
        """``_write_records`` for any prepared batch, a message at a time."""
        topic_name = state.info.name
        topic_bytes = state.name_bytes
        topic_len = len(topic_bytes)
        fixed = RECORD_OVERHEAD + topic_len
        queues = state.queues
        writable = state.writable
        writable_count = len(writable)
        log = self.commitlog
        # The written messages' queues, queue offsets and commit-log offsets; and where
        # the results of duplicates go, each with its result or the index of the result
        # of the message written earlier in this batch under the same dedup id.
        queue_ids: list[int] = []
        offsets: list[int] = []
        starts: list[int] = []
        skipped: list[tuple[int, AppendResult | int]] = []
        next_offsets: dict[int, int] = {}
        entries: dict[int, list[bytes]] = {}
        targets = {}
        index_items: list[tuple[str, str, int, int]] = []
        time_marks: list[tuple[int, int]] = []
        # The records of the chunk being gathered, each with its place, encoded natively
        # in one call when the chunk is written (_write_rows).
        rows: list[tuple] = []
        add = rows.append
        round_robin = state.round_robin
        tail = log.tail
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
                skipped.append((len(starts) + len(skipped), duplicates[dedup_id]))
                continue
            if queue_id is None:
                if route_key is not None:
                    queue_id = writable[crc32(route_key) % writable_count]
                else:
                    queue_id = writable[round_robin % writable_count]
                    round_robin += 1
            queue_offset = next_offsets.get(queue_id)
            if queue_offset is None:
                queue = targets[queue_id] = queues[queue_id]
                queue_offset = queue.max_offset
                entries[queue_id] = []
            length = fixed + len(body)
            if tag or keys or props:
                length += len(tag) + len(keys) + len(props)
            if tail + length > segment_limit or tail - chunk_end > _CHUNK_BYTES:
                self._write_rows(segment, chunk_start, rows, topic_bytes, entries)
                chunk_start = tail - segment.base
                chunk_end = tail
                if tail + length > segment_limit:
                    segment = log.close_segment(segment, chunk_start)
                    tail = chunk_end = segment.base
                    chunk_start = 0
                    segment_limit = segment.end - MARKER_SIZE
            next_offsets[queue_id] = queue_offset + 1
            add(
                (
                    tail,
                    queue_offset,
                    now if born is None else born,
                    now,
                    queue_id,
                    tag,
                    keys,
                    props,
                    body,
                    hashed,
                )
            )
            if not queue_offset % TIME_INDEX_INTERVAL:
                time_marks.append((queue_id, queue_offset))
            if index_keys:
                for index_key in index_keys:
                    index_items.append((topic_name, index_key, tail, now))
                if dedup_id is not None:
                    duplicates[dedup_id] = len(starts)
            queue_ids.append(queue_id)
            offsets.append(queue_offset)
            starts.append(tail)
            tail += length
        state.round_robin = round_robin
        if rows:
            self._write_rows(segment, chunk_start, rows, topic_bytes, entries)
        log.tail = tail
        log.last_store_ms = now
        marks = [
            (targets[queue_id], [(queue_offset, now)]) for queue_id, queue_offset in time_marks
        ]
        written = _results(self._id_prefix, topic_name, queue_ids, offsets, starts, now)
        results = written
        if skipped:
            results = list(written)
            for at, found in skipped:
                if type(found) is int:
                    found = written[found]._replace(status=STATUS_DUPLICATE)
                results.insert(at, found)
        return (
            results,
            next_offsets,
            [
                (targets[queue_id], next_offsets[queue_id] - len(parts), b"".join(parts))
                for queue_id, parts in entries.items()
            ],
            index_items,
            marks,
        )

    def _write_rows(
        self,
        segment,
        pos: int,
        rows: list[tuple],
        topic: bytes,
        entries: dict[int, list[bytes]],
    ) -> None:
        """Encode the gathered ``rows`` (natively), write them at ``pos`` of ``segment``,
        add each one's consume-queue entry to its queue's and empty ``rows``."""
        data, packed = dataplane.encode_placed(rows, topic)
        self.commitlog.write(segment, pos, data)
        for i, row in enumerate(rows):
            entries[row[4]].append(packed[i * ENTRY_SIZE : i * ENTRY_SIZE + ENTRY_SIZE])
        rows.clear()

    def _find_duplicates(
        self, state: Topic, batch: list[_Prepared], now: int
    ) -> dict[str, AppendResult]:
        """Results of messages already stored under the batch's dedup ids, by id."""
        found: dict[str, AppendResult] = {}
        window_s = state.info.settings.get("dedup_window_s", self.config.dedup_window_s)
        if window_s <= 0:  # no dedup
            return found
        since = now - window_s * 1000
        for item in batch:
            dedup_id = item[9]
            if dedup_id is None or dedup_id in found:
                continue
            for offset in self._index.query(
                state.info.name, DEDUP_KEY_PREFIX + dedup_id, since, None, _DEDUP_CANDIDATES
            ):
                message = self._reader.record_at(offset)
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
