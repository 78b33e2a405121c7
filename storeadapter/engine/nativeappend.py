"""The one native call for a common ``append`` (``_native.AppendCore``,
native/src/python/append_core.rs; docs/PERFORMANCE.md, "Issue 31 (part 3)").

A plain body (``append``), a list of plain bodies (``append_batch``), or a batch of
prepared dict items (``append_items``: placed, tagged and keyed as
``Writer._write_general`` does, the keys handed to ``KeyIndex.put_many``) to a topic with
files per queue, in async mode, on the mutex pen: the core does the whole write session
in one call, or declines and the store takes its Python path (``Writer``). It declines
while a fault plan is installed: a test that replaces one of the functions or methods
listed in ``_SEAM`` (a failing disk in ``fileio``, a kill point on an engine method)
finds the store writing through them, as before. Those genuine objects are taken here,
when the engine is imported, before any test can replace them; the core looks them up
again only when the seam generation moved (seam.py: their modules and classes are
watched, so replacing one moves it).
"""

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
from .warming import WARM_ASK_BYTES
from .writer import Writer
from .writesession import WriteSession

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
# The dispatchers whose work for a plain record the native append does (the entry; the
# time mark and the key and event indexes have none for it, or it declines).
_KNOWN_DISPATCHERS = (TimeIndexDispatch, KeyIndexDispatch, EventIndexDispatch, QueueDispatch)


def append_core(store) -> dataplane.AppendCore | None:
    """The native append of ``store`` (just opened), or None where it never applies:
    sync mode (an append waits for its fsync), the flock pen, or a list of dispatchers
    other than the store's own (the core also declines once the list changes)."""
    if store.config.flush_mode != "async" or not isinstance(store._pen, dataplane.Pen):
        return None
    if tuple(map(type, store.dispatchers)) != _KNOWN_DISPATCHERS:
        return None
    return dataplane.AppendCore(
        store,
        store._pen,
        store.dispatchers,
        store._shared.map,
        store._id_prefix,
        AppendResult,
        SharedSnapshot,
        ConsumeQueue,
        _GENUINE,
        store.config.max_message_bytes,
        store.config.flush_dirty_bytes,
        WARM_ASK_BYTES,
        (Topic, QueueFile, Segment, TimeIndex),
    )


__all__ = ["append_core"]
