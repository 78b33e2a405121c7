"""The engine's side of its native data plane (``native/``, built as ``_native``), and
its one door: every other module takes the crate's calls from here. The module is
checked at import (``NATIVE_INTERFACE``): an engine never runs on one built from another
``native/`` (``make install`` builds it again). ``_native.pyi`` says what it offers.

The crate does the work per record over buffers: encoding a batch, checking and
decoding records, scanning a segment, packing entries, hashing. It never opens, writes
or syncs a file: the engine hands it the bytes it read (a segment's mapping, a queue's
entries) and writes what it gets back through ``fileio``. This module binds the calls to
the engine's result types and gives the scan the shape of ``scan.scan_segment``.

``record.py`` and ``scan.py`` keep the same format in Python: the reference the tests
hold the native code to, and the long way for whatever the native code does not accept
at once (a damaged record is reported by them, with their reasons).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from . import _native, fileio
from .errors import CorruptRecordError
from .results import STATUS_OK, AppendResult, EventAppendResult, StoredMessage
from .scan import ScanEvent
from .segment import Segment

#: The interface of the ``_native`` this engine is written against (the crate's
#: ``INTERFACE``, native/src/python/mod.rs).
NATIVE_INTERFACE = 47


def _check_native(module) -> None:
    built = getattr(module, "INTERFACE", None)
    if built != NATIVE_INTERFACE:
        raise ImportError(
            f"{Path(module.__file__).name} was built from another version of native/ "
            f"(interface {built}; this engine needs {NATIVE_INTERFACE}): build it again "
            "with `make install`"
        )


_check_native(_native)

# The commit path's write and sync (fileio.pwrite_all, fileio.fdatasync) through the
# crate's look-alikes of os.pwrite and os.fdatasync: a native append in this process
# makes way for the thread when its call ends (native/src/python/returning.rs).
fileio.use_returning_calls(_native.pwrite, _native.fdatasync)
#: How many times a native append let go of the GIL for a thread returning from a
#: write or a sync (tests and benches see the hand-over happen).
made_way = _native.made_way
#: The ``state`` ring's notes taken in per queue (``SharedState.noted_ends``).
noted_ends = _native.noted_ends

#: The seam's own ``pread``: the core reads consume-queue entries itself only while
#: ``fileio.pread`` is still this function (a fault test that replaces it sees them all).
_PREAD = fileio.pread

NATIVE_RUN = "native_run"
Run = _native.Run

# Why read_entries stopped (its second result).
READ_END = 0
READ_FULL = 1
READ_OUTSIDE = 2
READ_SLOW = 3

key_hash = _native.key_hash
tag_hash = _native.tag_hash
canonical_offset = _native.canonical_offset
#: The raw decode (``decode_at`` below binds it to the engine's types).
decode_record = _native.decode_at
seal_entries = _native.seal_entries
populate = _native.populate
drop_block_pages = _native.drop_block_pages
refault_block_pages = _native.refault_block_pages
unmap_block_file = _native.unmap_block_file
prepare_items = _native.prepare_items
read_members = _native.read_members
Filter = _native.Filter
Pen = _native.Pen
#: The store's locks between threads (``threading.Lock``/``RLock``'s methods), which the
#: native append takes without a Python call.
ThreadLock = _native.ThreadLock
StoreCore = _native.StoreCore
AppendCore = _native.AppendCore
#: Sync mode's group commit (native/src/group_commit.rs; nativeappend.log_syncer).
LogSyncer = _native.LogSyncer
#: The words the native append checks (native/src/python/words.rs), moved by the parts
#: that change them: why the store refuses writes (one bit per reason, below), and the
#: log ends past which an append asks the flusher, the warmer or the waiting pulls.
Refusals = _native.Refusals
Asks = _native.Asks
#: A number kept natively (the store's ``_followed_sequence``), read and moved by the
#: native append without a look-up.
Word = _native.Word
#: A shared topic's block index ((queue, seq) -> block; blockqueue.BlockStore.index),
#: which the native shared batch reads and adds to without a Python call.
BlockIndex = _native.BlockIndex
#: A `BlockQueue` end kept in its block index (blockqueue.py), as a descriptor.
QueueEnd = _native.QueueEnd
#: ``Refusals``' bits: closed, opened before a fork, failed, the disk past
#: ``disk_reject_ratio`` (the long way raises the typed error for each). The native
#: reads (``StoreCore``) decline while CLOSED or FORKED is set (``words.rs`` names the
#: two); the other two refuse writes only.
REFUSED_CLOSED = 1
REFUSED_FORKED = 2
REFUSED_FAILED = 4
REFUSED_DISK_FULL = 8
#: The seam generation (seam.py): moved whenever a function of the write path is
#: replaced or put back; the native append looks its genuine functions up again then.
seam_changed = _native.seam_changed
#: The native fault seam (native/src/python/io_seam.rs): a fault plan's hook at the
#: core's named sites (writes, window reservations, the group commit's fdatasyncs), and
#: the core's store time pinned for tests.
set_io = _native.set_io
pin_clock = _native.pin_clock
seam_generation = _native.seam_generation
#: (``eventindex.stream_hash``, ``eventindex.command_hash`` or 0) of a stream id and a
#: command id (or None).
stream_hashes = _native.stream_hashes
encode_placed = _native.encode_placed
#: The crate's record layout (magics, sizes, the header's fields as (name, position, size)),
#: which tests/engine/test_record_layout.py holds to record.py's.
record_layout = _native.record_layout


def store_core(store, log, shared_map, prefix: str, topics: dict) -> _native.StoreCore:
    """The native core of an open store in this process: ``get``, and ``read`` of a
    queue with files of its own or of a shared topic's (``topics``: the registry's topics
    by name), each in one call (see ``native/src/python/store_core.rs`` and its
    ``shared_read.rs``). It follows other processes through
    the store's ``_follow`` when the shared sequence word in ``shared_map`` moved, and
    declines whatever it does not accept at once; the store's Python path answers those."""
    # Imported here: these modules take their calls through this one.
    from .blockqueue import BlockFile, BlockQueue
    from .consumequeue import ConsumeQueue
    from .topics import LazyQueues, Topic

    return _native.StoreCore(
        store,
        log,
        shared_map,
        prefix,
        StoredMessage,
        topics,
        ConsumeQueue,
        fileio,
        _PREAD,
        (Topic, LazyQueues, BlockQueue, BlockFile),
    )


def read_entries(
    segment: Segment,
    entries: bytes,
    start: int,
    topic: bytes,
    topic_name: str,
    queue: int,
    first_queue_offset: int,
    prefix: str,
    wanted_hash: int | None,
    wanted_tag: bytes | None,
    max_messages: int,
    messages: list[StoredMessage],
) -> tuple[int, int]:
    """Append to ``messages`` the messages of the consume-queue ``entries`` (packed; the
    first at ``first_queue_offset``) from index ``start`` whose records lie in
    ``segment``, each checked as ``Reader.read_queue`` checks it; at most ``max_messages``.

    Returns the index the walk stopped at and why: READ_END (every entry looked at),
    READ_FULL, READ_OUTSIDE (that entry's record is in another segment) or READ_SLOW
    (that entry must be read the long way, which reports what is wrong with it).
    """
    return _native.read_entries(
        segment.map,
        segment.base,
        entries,
        start,
        topic,
        topic_name,
        queue,
        first_queue_offset,
        prefix,
        wanted_hash,
        wanted_tag,
        max_messages,
        StoredMessage,
        messages,
    )


def decode_at(
    segment: Segment, pos: int, commit_offset: int, message_id: str, expected_length: int = 0
) -> StoredMessage | None:
    """The message of the intact record at ``pos`` of ``segment`` (saying it lives at
    ``commit_offset``, of ``expected_length`` bytes unless 0), or None: then
    ``record.decode_record`` says what is wrong, if anything is."""
    return _native.decode_at(
        segment.map, pos, commit_offset, message_id, expected_length, StoredMessage
    )


def check_record(data, pos: int, commit_offset: int) -> tuple:
    """``record.check_record`` done natively over ``data`` (a buffer: bytes, a mapping):
    the header of the intact record at ``pos``, which must say it lives at
    ``commit_offset``, or CorruptRecordError with the reason the Python check gives."""
    found = _native.check_at(data, pos, commit_offset)
    if type(found) is str:
        raise CorruptRecordError(commit_offset, found)
    return found


def encode_plain(
    bodies: list[bytes],
    topic: bytes,
    tail: int,
    now: int,
    turn: list[int],
    bases: list[int],
    prefix: str,
    topic_name: str,
) -> tuple[bytes, list[bytes], list[AppendResult]]:
    """Records of ``bodies`` from commit offset ``tail``, dealt to the queues of ``turn``
    in turn from the queue offsets ``bases``: their bytes, each turn queue's packed
    entries, and the results."""
    return _native.encode_plain(
        bodies, topic, tail, now, turn, bases, prefix, topic_name, STATUS_OK, AppendResult
    )


def encode_events(
    topic: bytes,
    store_ms: int,
    start: int,
    first_number: int,
    rows: list[tuple],
    prefix: str,
    topic_name: str,
) -> tuple[bytes, list[tuple[bytes, int, list[EventAppendResult], list]], bytes]:
    """The records of appends to streams (``rows``: ``Streams.row`` of each), one after
    another from commit offset ``start``, the bytes ``eventrecords.encode_events``
    makes for each; per append its packed consume-queue entries, the commit offset of
    its last record, its results and the jump chain of its last event; and the
    event-index entries of them all, numbered from ``first_number``, each event's jump
    as ``eventindex.run_jumps`` finds it (the bytes ``eventindex.encode_entry`` packs)."""
    return _native.encode_events(
        topic, store_ms, start, first_number, rows, prefix, topic_name, STATUS_OK,
        EventAppendResult,
    )  # fmt: skip


def follow_spans(
    segment: Segment, start: int, limit: int
) -> tuple[int, int | None, list[tuple[bytes, int, int, int, int]]]:
    """The follow's walk over ``segment`` from in-segment ``start`` up to ``limit``
    (follow.py ``_walk``): where it stopped (``limit``, or the first record it does not
    pass: an end-of-segment marker, a damaged or cut record, one running past
    ``limit``), the highest store time met (None: no record), and per (topic, queue id)
    met, in the order first met, ``(topic, queue id, lowest queue offset, highest queue
    offset, commit offset of its first record)``."""
    return _native.follow_spans(segment.map, segment.base, start, limit)


def scan_runs(
    segment: Segment, start: int, sealed: bool, durable_end: int = 0
) -> Iterator[ScanEvent]:
    """``scan.scan_segment(segment, start, sealed, durable_end, runs=True)`` done
    natively: the same events, but consecutive intact records come as NATIVE_RUN events
    whose ``header`` is a ``Run`` (``count``, ``headers()``, ``queues()``, ``pack()``)."""
    position: int | None = start
    while position is not None:
        events, position = _native.scan_step(
            segment.map, segment.base, position, sealed, durable_end
        )
        for kind, offset, length, reason, run in events:
            yield ScanEvent(kind, offset, length, reason, run)
