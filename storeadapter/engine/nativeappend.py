"""The one native call for a common ``append`` (``_native.AppendCore``,
native/src/python/append_core.rs; docs/PERFORMANCE.md, "Issue 31 (part 3)").

A single message (``append``: a bytes body without keys, perhaps with an explicit queue,
a tag and properties, in the core's own single write; one with keys, a str body, or to a
shared topic, prepared natively as ``Writer.prepare`` prepares it and written as a dict
batch of one), a list of plain bodies (``append_batch``), or a batch of prepared dict
items (``append_items``: placed, tagged and keyed as ``Writer._write_general`` does, the
keys handed to ``KeyIndex.put_many``), or a shared topic's batch of any of those items
as given (``append_messages``: each prepared natively as ``Writer.prepare`` prepares it,
without its tuple, then written as ``append_items`` writes them), on the mutex pen: the
core does the whole write session in one call, or declines (a message ``Writer.prepare``
refuses, a dedup id, a roll, a new queue file...) and the store takes its Python path
(``Writer``), which raises the typed error of a refused message. In sync mode an append
the core wrote then waits, without the GIL, for the group commit's fdatasync that covers
it (``log_syncer``; docs/PERFORMANCE.md, "Issue 31 (part 9)"). It declines while a fault
plan is installed: a test that replaces one of the functions or methods listed in
``_SEAM`` (a failing disk in ``fileio``, a kill point on an engine method; in sync mode
also ``fileio.fdatasync``) finds the store writing through them, as before. Those
genuine objects are taken here, when the engine is imported, before any test can replace
them; the core looks them up again only when the seam generation moved (seam.py: their
modules and classes are watched, so replacing one moves it). A plan installed with
native sites (``dataplane.set_io``; tests/faults/faultyfs.py, ``FaultyFS(native=True)``)
names the functions the core's sites stand in for (``fileio.pwrite_all``, and
``fileio.fdatasync`` for the group commit's ``log.sync``): those may be replaced, and
the core keeps running, in sync mode too, its writes, window reservations and fdatasyncs
shown to the plan by site (native/src/python/io_seam.rs)."""

from __future__ import annotations

from . import clock, dataplane, fileio
from .blockqueue import BlockQueue, BlockStore
from .commitlog import CommitLog
from .consumequeue import ConsumeQueue, QueueFile
from .dispatch import EventIndexDispatch, KeyIndexDispatch, QueueDispatch, TimeIndexDispatch
from .keyindex import KeyIndex
from .results import AppendResult
from .segment import Segment
from .sharedstate import SharedSnapshot, SharedState
from .timeindex import TimeIndex
from .topics import Topic
from .writer import Writer
from .writesession import WriteSession

#: How far past the tail the pretoucher faults the active segment in (store.py,
#: ``_pretouch``; the native append asks for it every 256 KiB of log).
PRETOUCH_BYTES = 512 << 10

# (namespace, name): the long way's steps the native append stands in for.
_SEAM = (
    (fileio, "pwrite_all"),
    (clock, "now_ms"),
    (CommitLog, "write"),
    (CommitLog, "close_segment"),
    (ConsumeQueue, "write"),
    (ConsumeQueue, "_put"),
    (QueueFile, "pwrite"),
    (QueueDispatch, "dispatch"),
    (TimeIndexDispatch, "dispatch"),
    (TimeIndex, "write"),
    (SharedState, "begin_write"),
    # The follow of other processes' appends the core makes itself (append_core/follow.rs).
    (SharedState, "read"),
    (SharedState, "notes"),
    (SharedState, "raise_extent"),
    (SharedState, "publish_tail"),
    (WriteSession, "__enter__"),
    (WriteSession, "publish_tail"),
    (Writer, "append_prepared"),
    (Writer, "write_group"),
    (Writer, "_write_records"),
    (Writer, "_write_plain"),
    (Writer, "_write_general"),
    (KeyIndexDispatch, "dispatch"),
    (KeyIndex, "put_many"),
    # A shared topic's dict batch (shared_core.rs): the blocks' writes and allocation.
    (BlockQueue, "write_many"),
    (BlockStore, "write_many"),
    (BlockStore, "_remember"),
    (BlockStore, "publish_end"),
    (BlockStore, "refresh"),
)
_GENUINE = [(vars(owner), name, vars(owner)[name]) for owner, name in _SEAM]
# Sync mode: the group commit fdatasyncs the log natively; a plan on fdatasync sees it
# only on the long way.
_GENUINE_SYNC = [*_GENUINE, (vars(fileio), "fdatasync", fileio.fdatasync)]
# The dispatchers whose work for a plain record the native append does (the entry; the
# time mark and the key and event indexes have none for it, or it declines).
_KNOWN_DISPATCHERS = (TimeIndexDispatch, KeyIndexDispatch, EventIndexDispatch, QueueDispatch)


def log_syncer(store) -> dataplane.LogSyncer | None:
    """Sync mode's group commit for the native append of ``store`` (just opened; see
    native/src/group_commit.rs): its flusher thread fdatasyncs the log while appends wait
    without the GIL. None where the native append does not apply."""
    if store.config.flush_mode != "sync" or not _applies(store):
        return None
    syncer = dataplane.LogSyncer(
        store.commitlog.flushed,
        store.path / "checkpoint",
        store.config.flush_timeout_ms,
    )
    store._flusher.native = syncer
    return syncer


def _applies(store) -> bool:
    """The mutex pen, and the store's own list of dispatchers (the core also declines
    once the list changes)."""
    if not isinstance(store._pen, dataplane.Pen):
        return False
    return tuple(map(type, store.dispatchers)) == _KNOWN_DISPATCHERS


def append_core(store) -> dataplane.AppendCore | None:
    """The native append of ``store`` (just opened, its ``_log_syncer`` made), or None
    where it never applies: the flock pen, or a list of dispatchers other than the
    store's own. In sync mode each append then waits on the group commit."""
    if not _applies(store):
        return None
    sync = store.config.flush_mode == "sync"
    return dataplane.AppendCore(
        store,
        store._pen,
        store.dispatchers,
        store._shared.map,
        store._id_prefix,
        AppendResult,
        SharedSnapshot,
        ConsumeQueue,
        _GENUINE_SYNC if sync else _GENUINE,
        store.config.max_message_bytes,
        (Topic, QueueFile, Segment, TimeIndex),
    )


__all__ = ["PRETOUCH_BYTES", "append_core", "log_syncer"]
