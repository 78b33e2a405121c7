"""A read-only view of a store's commit log, for readers that are not the store.

Spark's driver and executors read the segment files themselves: they never call
``MessageStore.open`` to read (that would join the store, take locks, flush and write a
checkpoint), never take ``write.lock``, and never write a byte. Everything here opens
files ``O_RDONLY`` and maps them ``ACCESS_READ``.

What is safe to read while a writer runs
-----------------------------------------

* **The published tail** (``state``, docs/FORMAT.md "Shared state"). A writer writes a
  batch's records (and an end marker when it rolls) into the segment, writes their
  consume-queue and index entries, and only then publishes the new tail, under the
  state file's sequence lock. So every byte below a tail read from ``state`` belongs to
  a complete record or end marker, whatever the writers do meanwhile; bytes past it may
  be half written, or left by a writer that died before publishing (the next writer
  zeroes them). ``state`` is read here with ``pread`` and the same sequence-lock rule
  the engine uses (copy the header twice, retry while the sequence is odd or the copies
  differ), never mapped writable, never created.
* **The flushed position** (``checkpoint``'s ``commitlog_flushed``, read with the
  engine's ``read_checkpoint``): below it the log has been fsynced. On one machine the
  page cache makes the published tail visible to every process at once; executors on
  other hosts reading a shared file system (NFS and the like) may only see what was
  fsynced. ``upto="flushed"`` reads up to the checkpoint instead of the tail.
* **Topics** come from ``topics.json``, which is replaced atomically (temp + rename), so
  it is never seen half written. The table is read between two reads of ``state``, and
  read again if ``topics_version`` moved in between.
* **Segments** are listed from ``commitlog/``. Only those between the log's first offset
  and the end chosen above are read; later files hold nothing published (a writer may
  be creating one, or resetting one a dead writer left). Retention deletes old segments
  with ``unlink``: a segment mapped before that stays readable; one the executor cannot
  open fails its task (``scanning.py``: the plan saw the file, so a missing one is never
  taken for one retention deleted), except in a stream with ``failOnDataLoss`` false,
  which skips it when the store says retention deleted it. Files are never truncated below the
  published tail while the store is open: the only truncations (recovery erasing a
  garbage tail, a writer resetting an unpublished segment) touch bytes past it.
* **No usable ``state``** (a store copied without it): the end is found as recovery
  would find it, by scanning the last segment from the checkpoint with the engine's
  ``scan_segment`` (read-only) until the tail.
"""

from __future__ import annotations

import json
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path

from storeadapter.engine.checkpoint import read_checkpoint
from storeadapter.engine.errors import StoreFormatError
from storeadapter.engine.metadata import LAYOUT_SHARED, READABLE_VERSIONS, TopicTable
from storeadapter.engine.names import DLQ_PREFIX, RETRY_PREFIX
from storeadapter.engine.scan import GARBAGE_TAIL, TAIL, scan_segment
from storeadapter.engine.segment import is_segment_name, segment_name
from storeadapter.engine.sharedstate import (
    SPINS,
    STATE_HEADER,
    SharedSnapshot,
    header_snapshot,
    header_updating,
    header_written,
    pen_owner_alive,
)

_HEADER_BYTES = 4096  # the state file's header: the fields, the write mutex
UPTO_PUBLISHED = "published"
UPTO_FLUSHED = "flushed"
UPTO_CHOICES = (UPTO_PUBLISHED, UPTO_FLUSHED)


class ReadOnlySegment:
    """A segment file mapped read-only; quacks like ``engine.segment.Segment`` for the
    engine's scanning functions (``base``, ``size``, ``end``, ``map``, ``view``)."""

    __slots__ = ("path", "base", "size", "end", "map", "view", "_fd")

    def __init__(self, path: Path, size: int | None = None) -> None:
        self.path = path
        self.base = int(path.name)
        fd = os.open(path, os.O_RDONLY)
        try:
            actual = os.fstat(fd).st_size
            self.size = actual if size is None else size
            if self.size <= 0 or actual < self.size:
                raise StoreFormatError(
                    f"commit-log segment {path.name} is {actual} bytes, expected {self.size}"
                )
            self.map = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.end = self.base + self.size
        self.view = memoryview(self.map)
        if hasattr(mmap, "MADV_SEQUENTIAL"):
            self.map.madvise(mmap.MADV_SEQUENTIAL)

    def close(self) -> None:
        if self._fd < 0:
            return
        self.view.release()
        self.map.close()
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> ReadOnlySegment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class SegmentFile:
    """A segment as listed: its base (= file name) and its size."""

    base: int
    size: int

    @property
    def end(self) -> int:
        return self.base + self.size

    @property
    def name(self) -> str:
        return segment_name(self.base)


@dataclass(frozen=True)
class TopicView:
    """What a reader needs to know of a topic to tell its records from a deleted
    namesake's: its queue count and, per queue, the offset its records start at."""

    name: str
    queues: int
    since: tuple[int, ...]  # per queue: records of the queue below it are not its own
    shared: bool = False  # its queues' entries are in shared block files (no per-queue files)


@dataclass(frozen=True)
class LogSnapshot:
    """The store as one reader sees it at one moment (see the module docstring)."""

    path: str
    id_prefix: str
    min_offset: int
    end: int  # read records that start below this commit offset
    published_tail: int
    flushed: int
    segments: tuple[SegmentFile, ...]  # every segment overlapping [min_offset, end)
    topics: dict[str, TopicView]
    queue_file_entries: int = 0  # entries per consume-queue file (store.json)

    def segment_path(self, segment: SegmentFile) -> Path:
        return Path(self.path) / "commitlog" / segment.name

    def is_sealed(self, segment: SegmentFile) -> bool:
        """Whether ``segment`` was closed by an end marker before ``end``: the next
        record went to a later segment."""
        return segment.end <= self.end


def is_group_topic(name: str) -> bool:
    """Whether ``name`` is a consumer group's retry or dead-letter topic."""
    return name.startswith(RETRY_PREFIX) or name.startswith(DLQ_PREFIX)


def read_store_id(path: Path) -> str:
    """The store's id as message ids begin with it (8 hex digits), from store.json."""
    return read_identity(path)[0]


def read_identity(path: Path) -> tuple[str, int]:
    """The store's id (8 hex digits) and its entries per consume-queue file, from
    store.json."""
    try:
        data = json.loads((path / "store.json").read_bytes())
        store_id = int(data["store_id"])
        version = int(data["format_version"])
        queue_file_entries = int(data["queue_file_entries"])
    except FileNotFoundError:
        raise StoreFormatError(f"{path} is not a Tidemark store (it has no store.json)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StoreFormatError(f"{path}/store.json cannot be read ({error})") from None
    if version not in READABLE_VERSIONS:  # the reader needs no entry's check
        raise StoreFormatError(
            f"store format version {version} is not supported (this reader reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))})"
        )
    return f"{store_id:08X}", queue_file_entries


def read_shared_state(path: Path) -> SharedSnapshot | None:
    """The shared fields of ``<store>/state``, read without changing the file; None when
    there is no valid state (no file, or never written)."""
    try:
        fd = os.open(path / "state", os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = STATE_HEADER.size
        spins = 0
        while True:
            first = os.pread(fd, size, 0)
            if len(first) < size:
                return None
            fields = STATE_HEADER.unpack(first)
            if not header_written(fields):
                return None
            if header_updating(fields):
                spins += 1
                if spins < SPINS:
                    continue
                # A writer mid-update holds the write mutex: wait while its owner lives,
                # however long it is descheduled. Dead (or on the flock path, where a
                # reader that takes no lock cannot tell): the fields as they are, each
                # a whole word (the tail below which every record is whole).
                if pen_owner_alive(os.pread(fd, _HEADER_BYTES, 0)):
                    time.sleep(0.001)
                    continue
                return header_snapshot(fields, notes_trusted=False)
            if os.pread(fd, size, 0) == first:
                return header_snapshot(fields)
    finally:
        os.close(fd)


def list_segments(path: Path) -> list[SegmentFile]:
    """Every segment file of the log, in offset order (empty files left out)."""
    directory = path / "commitlog"
    try:
        names = sorted(n for n in os.listdir(directory) if is_segment_name(n))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        try:
            size = os.stat(directory / name).st_size
        except FileNotFoundError:  # retention deleted it meanwhile
            continue
        if size:
            found.append(SegmentFile(int(name), size))
    return found


def load_topics(path: Path) -> dict[str, TopicView]:
    table = TopicTable(path / "topics.json")
    return {
        info.name: TopicView(
            info.name,
            info.queues,
            tuple(info.since(q) for q in range(info.queues)),
            info.layout == LAYOUT_SHARED,
        )
        for info in table.topics.values()
    }


def snapshot(path: str | os.PathLike, upto: str = UPTO_PUBLISHED) -> LogSnapshot:
    """Look at the store at ``path`` once: its tail, segments and topics.

    ``upto`` is ``"published"`` (what the engine's own readers see: the tail in
    ``state``) or ``"flushed"`` (only what the checkpoint says was fsynced).
    """
    if upto not in UPTO_CHOICES:
        raise ValueError(f"upto must be one of {', '.join(UPTO_CHOICES)}, not {upto!r}")
    root = Path(path)
    if not root.is_dir():
        raise StoreFormatError(f"there is no store directory at {root}")
    id_prefix, queue_file_entries = read_identity(root)
    for _attempt in range(20):
        before = read_shared_state(root)
        topics = load_topics(root)
        state = read_shared_state(root)
        if before is None or state is None or before.topics_version == state.topics_version:
            break
    checkpoint = read_checkpoint(root / "checkpoint")
    flushed = checkpoint.commitlog_flushed if checkpoint is not None else 0
    segments = list_segments(root)
    first = segments[0].base if segments else 0
    if state is not None:
        tail = state.tail
        min_offset = max(state.min_offset, first)
    else:
        tail = _scan_for_tail(root, segments, flushed)
        min_offset = first
    end = min(tail, flushed) if upto == UPTO_FLUSHED else tail
    end = max(end, min_offset)
    segments = [s for s in segments if s.end > min_offset and s.base < end]
    for previous, following in zip(segments, segments[1:], strict=False):
        if previous.end != following.base:
            raise StoreFormatError(
                f"commit-log segment {following.name} does not follow {previous.name} "
                f"(which ends at {previous.end}); the log has a gap"
            )
    return LogSnapshot(
        str(root),
        id_prefix,
        min_offset,
        end,
        tail,
        flushed,
        tuple(segments),
        topics,
        queue_file_entries,
    )


def _scan_for_tail(root: Path, segments: list[SegmentFile], flushed: int) -> int:
    """Where the log ends when ``state`` cannot say: scan the last segment (from the
    checkpoint when it lies there) as recovery would, without repairing anything."""
    if not segments:
        return 0
    last = segments[-1]
    start = max(0, min(flushed - last.base, last.size)) if flushed > last.base else 0
    with ReadOnlySegment(root / "commitlog" / last.name) as segment:
        for event in scan_segment(segment, start, False, flushed):
            if event.kind in (TAIL, GARBAGE_TAIL):
                return event.offset
    return last.end


__all__ = [
    "LogSnapshot",
    "ReadOnlySegment",
    "SegmentFile",
    "TopicView",
    "UPTO_CHOICES",
    "UPTO_FLUSHED",
    "UPTO_PUBLISHED",
    "is_group_topic",
    "read_shared_state",
    "snapshot",
]
