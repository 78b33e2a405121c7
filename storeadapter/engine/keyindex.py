"""The key index: from (topic, key) to the commit offsets of the records that carry the key.

RocketMQ's IndexFile layout: each file has a header, a table of hash slots and an array of
fixed 24-byte entries; every slot, every entry and both parts of the header carry a CRC32C.
A slot holds the number of the newest entry whose key hashes to it, and each entry holds
the number of the previous entry of the same slot, so the entries of a slot form a chain
from newest to oldest. docs/FORMAT.md ("Key index") describes every
byte.

Files live in ``index/`` and are named by the commit offset of their first entry (20
digits). They are created at full size without writing the zeros (sparse), under a
temporary name that is renamed once the header is durable, so a file under its final name
is always complete. Writes go through ``pwrite`` (entries, then slots, then the header's
count), reads through a read-only mapping. One writer at a time (the caller holds the
store's lock); readers in other processes trust only the header's count and notice new
and removed files through the header's flags.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from . import dataplane, fileio
from .checkedslots import SLOT, SLOT_SIZE, slot_bytes, slot_valid
from .seam import Watched
from .segment import is_segment_name, segment_name

MAGIC = b"TDMI"
#: Version 2 gave every entry a CRC32C, version 3 every slot and the header (files of an
#: older version are skipped as of an unknown version, and their keys indexed again from
#: the log).
VERSION = 3
# magic, version, reserved, slots, capacity, begin_ms, begin_offset, check of those;
# end_ms, end_offset, count, flags, check of those
HEADER = struct.Struct("<4sHHIIqQIqQIII")
HEADER_SIZE = HEADER.size
# magic .. begin_offset: written once, when the file is created
_HEAD = struct.Struct("<4sHHIIqQ")
_HEAD_CHECK_AT = _HEAD.size
_BEGIN = struct.Struct("<qQ")
_BEGIN_AT = 16
# end_ms, end_offset, count, flags: the part of the header a put rewrites
_TAIL = struct.Struct("<qQII")
_TAIL_AT = _HEAD_CHECK_AT + 4
_TAIL_CHECK_AT = _TAIL_AT + _TAIL.size
_FLAGS = struct.Struct("<I")
_FLAGS_AT = _TAIL_AT + 20
# key hash, commit offset, time diff (ms from begin_ms), previous entry number, and the
# CRC32C of those 20 bytes
ENTRY = struct.Struct("<IQIII")
ENTRY_SIZE = ENTRY.size
_ENTRY_BODY = struct.Struct("<IQII")
_CHECKED = _ENTRY_BODY.size
_CRC = struct.Struct("<I")

FLAG_SEALED = 1  # a newer file exists: readers and writers re-list the directory
FLAG_REMOVED = 2  # the file is being deleted: ignore it
MAX_U32 = 0xFFFFFFFF
_MAX_U64 = (1 << 64) - 1
_SLOT_RUN_GAP = 64  # changed slots this close together are written by one pwrite
_ZERO_CHUNK = 1 << 20
_HEADER_READS = 3  # reads again of a header failing its check before it counts


#: ``key_hash(topic, key)``: the stored 32-bit hash of a key, CRC32C of ``topic NUL key``
#: in UTF-8, never 0 (native; tests/engine/test_native_hashes.py holds it to that).
key_hash = dataplane.key_hash


def pack_entry(hashed: int, commit_offset: int, diff: int, previous: int) -> bytes:
    body = _ENTRY_BODY.pack(hashed, commit_offset, diff, previous)
    return body + _CRC.pack(crc32c(body))


def entry_intact(raw, at: int = 0) -> bool:
    """Whether the entry at ``at`` of ``raw`` passes its CRC32C."""
    return _CRC.unpack_from(raw, at + _CHECKED)[0] == crc32c(raw[at : at + _CHECKED])


def head_bytes(slots: int, capacity: int, begin_ms: int, begin_offset: int) -> bytes:
    """The header's first part (written once) with its check."""
    head = _HEAD.pack(MAGIC, VERSION, 0, slots, capacity, begin_ms, begin_offset)
    return head + _CRC.pack(crc32c(head))


def tail_bytes(end_ms: int, end_offset: int, count: int, flags: int) -> bytes:
    """The header's second part (rewritten by every put) with its check."""
    tail = _TAIL.pack(end_ms, end_offset, count, flags)
    return tail + _CRC.pack(crc32c(tail))


def header_problem(raw) -> str | None:
    """Which part of a (version 3) header fails its check, or None."""
    if _CRC.unpack_from(raw, _HEAD_CHECK_AT)[0] != crc32c(bytes(raw[:_HEAD_CHECK_AT])):
        return "its header (slots, capacity, begin) fails its check"
    if _CRC.unpack_from(raw, _TAIL_CHECK_AT)[0] != crc32c(bytes(raw[_TAIL_AT:_TAIL_CHECK_AT])):
        return "its header (end, count, flags) fails its check"
    return None


def file_size(slots: int, capacity: int) -> int:
    return HEADER_SIZE + slots * SLOT_SIZE + capacity * ENTRY_SIZE


@dataclass(frozen=True)
class IndexProblem:
    """A file that was skipped, repaired or removed, and why."""

    path: Path
    reason: str


class IndexFile:
    """One index file. ``fd`` is open read-write; ``sync()`` makes its writes durable."""

    __slots__ = (
        "path", "name", "begin_offset", "slots", "capacity", "entries_at", "fd", "map", "inode",
    )  # fmt: skip

    def __init__(self, path: Path, fd: int, slots: int, capacity: int) -> None:
        self.path = path
        self.name = path.name
        self.begin_offset = int(path.name)
        self.slots = slots
        self.capacity = capacity
        self.entries_at = HEADER_SIZE + slots * SLOT_SIZE
        self.fd = fd
        self.map = mmap.mmap(fd, file_size(slots, capacity), access=mmap.ACCESS_READ)
        self.inode = os.fstat(fd).st_ino

    def state(self) -> tuple[int, int, int, int, int, int]:
        """(begin_ms, begin_offset, end_ms, end_offset, count, flags) from the header
        (checked when the file is opened)."""
        return _BEGIN.unpack_from(self.map, _BEGIN_AT) + _TAIL.unpack_from(self.map, _TAIL_AT)

    def count(self) -> int:
        return self.state()[4]

    def flags(self) -> int:
        return _FLAGS.unpack_from(self.map, _FLAGS_AT)[0]

    def slot(self, slot: int) -> int | None:
        """The newest entry of ``slot`` (0: none), or None when the slot fails its check."""
        position = HEADER_SIZE + slot * SLOT_SIZE
        number, check = SLOT.unpack_from(self.map, position)
        return number if slot_valid(position, number, check) else None

    def entry(self, number: int) -> tuple[int, int, int, int]:
        """(hash, commit offset, time diff, previous) of entry ``number`` (1-based), as
        stored (``intact`` says whether it passes its check)."""
        return _ENTRY_BODY.unpack_from(self.map, self.entries_at + (number - 1) * ENTRY_SIZE)

    def intact(self, number: int) -> bool:
        return entry_intact(self.map, self.entries_at + (number - 1) * ENTRY_SIZE)

    def write_tail(self, end_ms: int, end_offset: int, count: int, flags: int) -> None:
        fileio.pwrite_all(self.fd, tail_bytes(end_ms, end_offset, count, flags), _TAIL_AT)

    def write_flags(self, flags: int) -> None:
        _, _, end_ms, end_offset, count, _ = self.state()
        self.write_tail(end_ms, end_offset, count, flags)

    def write_slots(self, heads: dict[int, int]) -> None:
        """Write changed slots, one pwrite per run of nearby slots."""
        items = sorted(heads.items())
        i = 0
        while i < len(items):
            j = i
            while j + 1 < len(items) and items[j + 1][0] - items[j][0] <= _SLOT_RUN_GAP:
                j += 1
            low = items[i][0]
            start = HEADER_SIZE + low * SLOT_SIZE
            if i == j:
                data = slot_bytes(start, items[i][1])
            else:
                data = bytearray(self.map[start : start + (items[j][0] - low + 1) * SLOT_SIZE])
                for slot, value in items[i : j + 1]:
                    at = (slot - low) * SLOT_SIZE
                    data[at : at + SLOT_SIZE] = slot_bytes(start + at, value)
            fileio.pwrite_all(self.fd, data, start)
            i = j + 1

    def rebuild_slots(self, count: int) -> None:
        """Recompute every slot from entries 1..count (after damage to the chains)."""
        table = [0] * self.slots
        data = self.map[self.entries_at : self.entries_at + count * ENTRY_SIZE]
        for number, (hashed, _offset, _diff, _prev, _crc) in enumerate(ENTRY.iter_unpack(data), 1):
            if hashed and entry_intact(data, (number - 1) * ENTRY_SIZE):
                table[hashed % self.slots] = number
        data = bytearray(self.slots * SLOT_SIZE)
        for slot, number in enumerate(table):
            if number:
                at = slot * SLOT_SIZE
                data[at : at + SLOT_SIZE] = slot_bytes(HEADER_SIZE + at, number)
        fileio.pwrite_all(self.fd, data, HEADER_SIZE)

    def zero_entries(self, first: int, last: int) -> None:
        """Overwrite entries first..last (1-based, inclusive) with zeros."""
        position = self.entries_at + (first - 1) * ENTRY_SIZE
        remaining = (last - first + 1) * ENTRY_SIZE
        while remaining > 0:
            n = min(remaining, _ZERO_CHUNK)
            fileio.pwrite_all(self.fd, bytes(n), position)
            position += n
            remaining -= n

    def sync(self) -> None:
        """fdatasync the file (its size never changes after creation); no-op once closed."""
        if not self.map.closed:
            fileio.fdatasync(self.fd)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


def _open_file(path: Path, repair: bool) -> tuple[IndexFile | None, str | None]:
    """Open and check one file: (file or None, a problem to report or None).

    With ``repair`` (the newest file, on open), a file cut short is extended to its size
    and keeps the entries that survived; one with no usable header or entry is removed.
    """
    try:
        fd = fileio.open_file(path)
    except OSError as error:
        return None, f"cannot open: {error.strerror}"
    try:
        size = os.fstat(fd).st_size
        raw = fileio.pread(fd, HEADER_SIZE, 0)
        damaged = None
        if len(raw) < HEADER_SIZE:
            damaged = f"{size} bytes, shorter than the {HEADER_SIZE}-byte header"
        else:
            fields = HEADER.unpack(raw)
            magic, version, _, slots, capacity, _, begin_offset, _, _, _, count, flags, _ = fields
            if magic != MAGIC:
                damaged = f"bad magic {magic!r}"
            elif version != VERSION:
                os.close(fd)
                return None, f"unknown version {version}"
            elif (damaged := _checked_header(fd, raw)) is not None:
                pass
            elif slots < 1 or capacity < 1 or count > capacity:
                damaged = f"bad header (slots {slots}, capacity {capacity}, count {count})"
            elif begin_offset != int(path.name):
                damaged = f"header begin offset {begin_offset} does not match the name"
        if damaged is not None:
            os.close(fd)
            if repair:
                fileio.unlink(path)
                return None, f"{damaged}; removed"
            return None, damaged
        if flags & FLAG_REMOVED:
            os.close(fd)
            if repair:
                fileio.unlink(path)
            return None, None
        expected = file_size(slots, capacity)
        if size > expected:
            os.close(fd)
            return None, f"{size} bytes, expected {expected}"
        if size == expected:
            return IndexFile(path, fd, slots, capacity), None
        if not repair:
            os.close(fd)
            return None, f"truncated: {size} of {expected} bytes"
    except BaseException:
        os.close(fd)
        raise
    return _repair_truncated(path, fd, slots, capacity, size, count)


def _checked_header(fd: int, raw: bytes) -> str | None:
    """Why the header fails its check, or None. A failing header is read again a few
    times first: a put in another process may have been rewriting its second part."""
    problem = header_problem(raw)
    for _ in range(_HEADER_READS):
        if problem is None:
            break
        time.sleep(0.001)
        problem = header_problem(fileio.pread(fd, HEADER_SIZE, 0))
    return problem


def _repair_truncated(
    path: Path, fd: int, slots: int, capacity: int, size: int, count: int
) -> tuple[IndexFile | None, str]:
    expected = file_size(slots, capacity)
    entries_at = HEADER_SIZE + slots * SLOT_SIZE
    kept = min(count, max(0, size - entries_at) // ENTRY_SIZE) if size >= entries_at else 0
    try:
        fileio.ftruncate(fd, expected)
        index_file = IndexFile(path, fd, slots, capacity)
    except BaseException:
        os.close(fd)
        raise
    try:
        while kept and not index_file.entry(kept)[0]:
            kept -= 1
        problem = f"truncated: {size} of {expected} bytes"
        if not kept:
            index_file.close()
            fileio.unlink(path)
            return None, f"{problem}; no entry left, removed"
        _, _, end_ms, _, _, flags = index_file.state()
        index_file.rebuild_slots(kept)
        index_file.write_tail(end_ms, index_file.entry(kept)[1], kept, flags)
        fileio.fsync(fd)
    except BaseException:
        if not index_file.map.closed:
            index_file.close()
        raise
    return index_file, f"{problem}; repaired, {kept} of {count} entries kept"


class _Batch:
    """Entries being appended to one file; ``KeyIndex._finish`` writes them."""

    __slots__ = ("file", "begin_ms", "end_ms", "end_offset", "start", "count", "data", "heads")

    def __init__(self, index_file: IndexFile) -> None:
        begin_ms, _, end_ms, end_offset, count, _ = index_file.state()
        self.file = index_file
        self.begin_ms = begin_ms
        self.end_ms = end_ms
        self.end_offset = end_offset
        self.start = count
        self.count = count
        self.data = bytearray()
        self.heads: dict[int, int] = {}

    def fits(self, commit_offset: int, store_ms: int) -> bool:
        if self.count >= self.file.capacity or not 0 <= store_ms - self.begin_ms <= MAX_U32:
            return False
        return self.count > 0 or commit_offset == self.file.begin_offset


class KeyIndex(metaclass=Watched):
    """The index files of one store directory (``<store>/index``).

    Thread-safe within a process; across processes, one writer at a time.
    """

    def __init__(self, directory: Path, slots: int, entries: int) -> None:
        if not 1 <= slots <= MAX_U32 or not 1 <= entries <= MAX_U32:
            raise ValueError("slots and entries must be between 1 and 2**32 - 1")
        self.directory = Path(directory)
        self.slots = slots
        self.entries = entries
        self.files: list[IndexFile] = []
        self.problems: list[IndexProblem] = []
        self._bad: dict[str, int] = {}  # skipped files: name -> inode
        self._reported: set[tuple[str, int]] = set()
        self._dirty: set[IndexFile] = set()
        self._lock = threading.RLock()
        # Told (commit offset, sentence) of damage a lookup meets (set by the store to
        # report it as a corruption).
        self.on_damage: Callable[[int, str], None] | None = None
        # (topic, key, first, last, low_ms, high_ms): the commit offsets of the intact
        # records from ``first`` to ``last`` stored within the window that carry the key
        # (set by the store: the log walked), for where a file's entries fail their check.
        self.records_with_key: Callable[[str, str, int, int, int, int], list[int]] | None = None

    # -- opening and listing -------------------------------------------------------

    def open(self) -> None:
        """Open the existing files; repair or remove a damaged newest file."""
        with self._lock:
            fileio.make_dir(self.directory, parents=True, exist_ok=True)
            listing = self._list()
            names = sorted(listing)
            for position, name in enumerate(names):
                self._load(name, listing[name], repair=position == len(names) - 1)
            self.files.sort(key=lambda f: f.begin_offset)

    def refresh(self) -> None:
        """Pick up files created by other processes and drop those deleted since."""
        with self._lock:
            listing = self._list()
            kept = []
            for index_file in self.files:
                if listing.get(index_file.name) == index_file.inode and not (
                    index_file.flags() & FLAG_REMOVED
                ):
                    kept.append(index_file)
                else:
                    self._drop(index_file)
            self.files = kept
            self._bad = {n: i for n, i in self._bad.items() if listing.get(n) == i}
            known = {f.name for f in kept}
            for name in sorted(listing):
                if name not in known and self._bad.get(name) != listing[name]:
                    self._load(name, listing[name], repair=False)
            self.files.sort(key=lambda f: f.begin_offset)

    def _list(self) -> dict[str, int]:
        listing = {}
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if is_segment_name(entry.name):
                        with contextlib.suppress(FileNotFoundError):
                            listing[entry.name] = entry.stat(follow_symlinks=False).st_ino
        except FileNotFoundError:
            pass
        return listing

    def _load(self, name: str, inode: int, repair: bool) -> None:
        path = self.directory / name
        try:
            index_file, problem = _open_file(path, repair)
        except (OSError, ValueError) as error:
            index_file, problem = None, f"cannot read: {error}"
        if problem is not None and (name, inode) not in self._reported:
            self._reported.add((name, inode))
            self.problems.append(IndexProblem(path, problem))
        if index_file is not None:
            self.files.append(index_file)
        elif path.exists():
            self._bad[name] = inode

    def _drop(self, index_file: IndexFile) -> None:
        self._dirty.discard(index_file)
        index_file.close()

    def _refresh_if_stale(self) -> None:
        """Re-list when the newest known file is full, sealed or removed (or none is known)."""
        if not self.files:
            self.refresh()
            return
        newest = self.files[-1]
        _, _, _, _, count, flags = newest.state()
        if flags or count >= newest.capacity:
            self.refresh()

    # -- writing ---------------------------------------------------------------------

    def put(self, topic: str, key: str, commit_offset: int, store_ms: int) -> None:
        """Index one key of the record at ``commit_offset``."""
        self.put_many(((topic, key, commit_offset, store_ms),))

    def put_many(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        """Index ``(topic, key, commit_offset, store_ms)`` items, in commit-offset order.

        Per file touched: one pwrite of the new entries, one per run of nearby changed
        slots, and one of the header. Items before an invalid one are kept.
        """
        with self._lock:
            batch: _Batch | None = None
            last = self._last_offset()
            try:
                for topic, key, commit_offset, store_ms in items:
                    if not 0 <= commit_offset <= _MAX_U64:
                        raise ValueError(f"commit offset {commit_offset} is out of range")
                    if last is not None and commit_offset < last:
                        raise ValueError(
                            f"commit offset {commit_offset} is below the last one indexed "
                            f"({last}); keys must be indexed in commit-offset order"
                        )
                    if batch is None or not batch.fits(commit_offset, store_ms):
                        if batch is not None:
                            self._finish(batch)
                        batch = self._batch_for(commit_offset, store_ms)
                        if batch is None:
                            continue  # a record with more keys than a file holds
                    self._add(batch, key_hash(topic, key), commit_offset, store_ms)
                    last = commit_offset
            finally:
                if batch is not None:
                    self._finish(batch)

    def _last_offset(self) -> int | None:
        self._refresh_if_stale()
        for index_file in reversed(self.files):
            _, _, _, end_offset, count, _ = index_file.state()
            if count:
                return end_offset
        return None

    def _batch_for(self, commit_offset: int, store_ms: int) -> _Batch | None:
        """A batch on the file the item goes to, rolling to a new file when needed."""
        newest = self.files[-1] if self.files else None
        if newest is not None:
            batch = self._writer_batch(newest)
            if batch.fits(commit_offset, store_ms):
                return batch
        self.refresh()  # another process may have rolled already
        newest = self.files[-1] if self.files else None
        if newest is not None:
            batch = self._writer_batch(newest)
            if batch.fits(commit_offset, store_ms):
                return batch
            if batch.count == 0:  # left empty by a crash: start again
                self._remove(newest)
                newest = self.files[-1] if self.files else None
            elif newest.begin_offset >= commit_offset:
                return None
        created = self._create(commit_offset, store_ms)
        if newest is not None:
            newest.write_flags(newest.flags() | FLAG_SEALED)
            self._dirty.add(newest)
        return _Batch(created)

    def _writer_batch(self, index_file: IndexFile) -> _Batch:
        """A batch on ``index_file``, once entries a crashed put left past its count are gone.

        Such an entry may be the head of its slot: it is unlinked before being overwritten.
        """
        batch = _Batch(index_file)
        if batch.count < index_file.capacity and index_file.entry(batch.count + 1)[0]:
            self._pop(index_file, batch.count, batch.count)
            self._dirty.add(index_file)
        return batch

    def _pop(self, index_file: IndexFile, kept: int, count: int) -> None:
        """Unlink entries past ``kept`` from their slots, then zero them.

        Entries past ``count`` that are not zero (left by a crashed put) go too.
        """
        top = count
        while top < index_file.capacity and index_file.entry(top + 1)[0]:
            top += 1
        heads: dict[int, int] = {}
        rebuild = False
        for number in range(top, kept, -1):
            hashed, _, _, previous = index_file.entry(number)
            if not hashed:
                rebuild = True
                continue
            slot = hashed % index_file.slots
            head = heads.get(slot)
            if head is None:
                head = index_file.slot(slot)
            if head is None:
                rebuild = True
            elif head == number:
                heads[slot] = previous
        if rebuild:
            index_file.rebuild_slots(kept)
        else:
            index_file.write_slots(heads)
        if top > kept:
            index_file.zero_entries(kept + 1, top)

    def _add(self, batch: _Batch, hashed: int, commit_offset: int, store_ms: int) -> None:
        index_file = batch.file
        slot = hashed % index_file.slots
        head = batch.heads.get(slot)
        if head is None:
            head = self._head(index_file, slot, batch.start)
        batch.count += 1
        batch.data += pack_entry(hashed, commit_offset, store_ms - batch.begin_ms, head)
        batch.heads[slot] = batch.count
        batch.end_offset = commit_offset
        batch.end_ms = max(batch.end_ms, store_ms)

    @staticmethod
    def _head(index_file: IndexFile, slot: int, count: int) -> int:
        """The newest entry of ``slot`` among entries 1..count.

        A slot may point past the count after a crash between a put's slot write and its
        header write; such an entry's ``previous`` leads back to the older chain.
        """
        number = index_file.slot(slot)
        if number is None:  # the slot fails its check: found again from the entries
            index_file.rebuild_slots(count)
            number = index_file.slot(slot) or 0
        while number > count:
            hashed, _, _, previous = (
                index_file.entry(number) if number <= index_file.capacity else (0, 0, 0, 0)
            )
            if not hashed or previous >= number:
                index_file.rebuild_slots(count)
                return index_file.slot(slot)
            number = previous
        return number

    def _finish(self, batch: _Batch) -> None:
        """Write a batch: entries, then slots, then the header (readers trust its count)."""
        if not batch.data:
            return
        index_file = batch.file
        fileio.pwrite_all(
            index_file.fd, batch.data, index_file.entries_at + batch.start * ENTRY_SIZE
        )
        index_file.write_slots(batch.heads)
        index_file.write_tail(batch.end_ms, batch.end_offset, batch.count, 0)
        self._dirty.add(index_file)
        batch.data = bytearray()
        batch.heads = {}
        batch.start = batch.count

    def _create(self, commit_offset: int, store_ms: int) -> IndexFile:
        for leftover in self.directory.glob(".*.tmp"):
            fileio.unlink(leftover)
        name = segment_name(commit_offset)
        path = self.directory / name
        temp = self.directory / f".{name}.tmp"
        header = head_bytes(self.slots, self.entries, store_ms, commit_offset) + tail_bytes(
            store_ms, commit_offset, 0, 0
        )
        fd = fileio.create_file(temp, truncate=True)
        try:
            fileio.ftruncate(fd, file_size(self.slots, self.entries))
            fileio.pwrite_all(fd, header, 0)
            fileio.fsync(fd)
            fileio.unlink(path)  # only ever a skipped (damaged or removed) file
            fileio.rename(temp, path)
            fileio.fsync_dir(self.directory)
            index_file = IndexFile(path, fd, self.slots, self.entries)
        except BaseException:
            os.close(fd)
            fileio.unlink(temp)
            raise
        self._bad.pop(name, None)
        self.files.append(index_file)
        self.files.sort(key=lambda f: f.begin_offset)
        return index_file

    def _remove(self, index_file: IndexFile) -> None:
        """Delete a file; its header is flagged first so other processes stop using it."""
        index_file.write_flags(index_file.flags() | FLAG_REMOVED)
        fileio.unlink(index_file.path)
        self.files.remove(index_file)
        self._drop(index_file)

    # -- reading ---------------------------------------------------------------------

    def query(
        self, topic: str, key: str, begin_ms: int | None, end_ms: int | None, limit: int
    ) -> list[int]:
        """Commit offsets of entries whose 32-bit hash equals the key's, newest first.

        Only entries stored within ``[begin_ms, end_ms]`` (inclusive; None = open) count.
        Hash collisions are possible: the caller checks each record's keys.
        """
        if limit <= 0:
            return []
        hashed = key_hash(topic, key)
        low = -(1 << 63) if begin_ms is None else begin_ms
        high = (1 << 63) - 1 if end_ms is None else end_ms
        found: list[int] = []
        seen: set[int] = set()
        with self._lock:
            self._refresh_if_stale()
            for index_file in reversed(self.files):
                file_begin, _, file_end, _, count, flags = index_file.state()
                if not count or flags & FLAG_REMOVED or file_end < low or file_begin > high:
                    continue
                window = (hashed, file_begin, low, high)
                want = limit - len(found)
                offsets = self._walk(index_file, window, count, want)
                if offsets is None:  # the slot or an entry of its chain fails its check
                    offsets = self._scan(index_file, window, count, topic, key)
                for offset in offsets:
                    if offset not in seen:
                        seen.add(offset)
                        found.append(offset)
                        if len(found) >= limit:
                            return found
        return found

    @staticmethod
    def _walk(
        index_file: IndexFile, window: tuple[int, int, int, int], count: int, want: int
    ) -> list[int] | None:
        """The offsets of the entries of the key's slot chain in the window, newest first,
        up to ``want``; None when the chain meets a counted entry that fails its check
        (it cannot be followed past it), or when the slot itself fails its check."""
        hashed, file_begin, low, high = window
        number = index_file.slot(hashed % index_file.slots)
        if number is None:
            return None
        while number > count:  # written, but not yet (or no longer) counted
            if number > index_file.capacity:
                number = 0
                break
            previous = index_file.entry(number)[3]
            number = previous if previous < number else 0
        offsets: list[int] = []
        while number:
            if not index_file.intact(number):
                return None
            entry_hash, offset, diff, previous = index_file.entry(number)
            if entry_hash == hashed and low <= file_begin + diff <= high:
                offsets.append(offset)
                if len(offsets) >= want:
                    return offsets
            if previous >= number:
                break
            number = previous
        return offsets

    def _scan(
        self,
        index_file: IndexFile,
        window: tuple[int, int, int, int],
        count: int,
        topic: str,
        key: str,
    ) -> list[int]:
        """The key's offsets found by reading every counted entry of the file, for a
        chain that cannot be followed: the intact entries of its hash, and the records
        carrying the key between the intact entries around each run of damaged ones (a
        damaged entry's own fields are not to be trusted); the damage is reported."""
        hashed, file_begin, low, high = window
        data = index_file.map[index_file.entries_at : index_file.entries_at + count * ENTRY_SIZE]
        offsets = []
        damaged = []
        gaps: list[list[int]] = []  # [first, last] commit offsets around damaged runs
        below = index_file.begin_offset
        for number in range(1, count + 1):
            at = (number - 1) * ENTRY_SIZE
            if not entry_intact(data, at):
                damaged.append(number)
                if gaps and gaps[-1][1] < 0:
                    continue
                gaps.append([below, -1])
                continue
            entry_hash, offset, diff, _previous = _ENTRY_BODY.unpack_from(data, at)
            if gaps and gaps[-1][1] < 0:
                gaps[-1][1] = offset
            below = offset
            if entry_hash == hashed and low <= file_begin + diff <= high:
                offsets.append(offset)
        if gaps and gaps[-1][1] < 0:
            gaps[-1][1] = index_file.state()[3]  # the file's end offset
        if self.records_with_key is not None:
            for first, last in gaps:
                offsets.extend(self.records_with_key(topic, key, first, last, low, high))
        offsets.sort(reverse=True)
        if self.on_damage is not None:
            if damaged:
                shown = ", ".join(map(str, sorted(damaged)[:5]))
                what = f"has {len(damaged)} entries failing their check ({shown})"
            else:
                what = f"has a hash slot failing its check (slot {hashed % index_file.slots})"
            self.on_damage(
                index_file.begin_offset,
                f"key index file {index_file.path} {what}; lookups there read every entry",
            )
        return offsets

    @property
    def end_offset(self) -> int | None:
        """The highest commit offset indexed + 1, or None when nothing is indexed."""
        with self._lock:
            self._refresh_if_stale()
            for index_file in reversed(self.files):
                _, _, _, end_offset, count, _ = index_file.state()
                if count:
                    return end_offset + 1
        return None

    # -- upkeep ----------------------------------------------------------------------

    def truncate_from(self, commit_offset: int) -> int:
        """Remove every entry at or past ``commit_offset``; return how many were removed.

        Entries are in commit-offset order, so this is a suffix: newer files go whole,
        and at most one file is cut, its slots fixed so every chain stays valid.
        """
        with self._lock:
            self.refresh()
            removed = 0
            changed_directory = False
            for name in [n for n in self._bad if int(n) >= commit_offset]:
                changed_directory |= self._unlink_bad(name)
            while self.files:
                index_file = self.files[-1]
                _, _, end_ms, _, count, _ = index_file.state()
                if index_file.begin_offset >= commit_offset:
                    removed += count
                    self._remove(index_file)
                    changed_directory = True
                    continue
                cut = self._cut(index_file, commit_offset, end_ms, count)
                if cut is None:
                    break
                removed += cut
                if index_file.count():
                    break
                self._remove(index_file)
                changed_directory = True
            if self.files and self.files[-1].flags() & FLAG_SEALED:
                self.files[-1].write_flags(0)
                self._dirty.add(self.files[-1])
            if changed_directory:
                fileio.fsync_dir(self.directory)
            return removed

    def _cut(self, index_file: IndexFile, commit_offset: int, end_ms: int, count: int):
        """Cut one file's entries at or past ``commit_offset``: how many, or None if none."""
        kept = count
        while kept:
            hashed, offset, _, _ = index_file.entry(kept)
            if hashed and offset < commit_offset:
                break
            kept -= 1
        if kept == count:
            return None
        # Count first (readers then ignore the cut entries), then slots, then the bytes.
        end_offset = index_file.entry(kept)[1] if kept else index_file.begin_offset
        index_file.write_tail(end_ms, end_offset, kept, 0)
        self._pop(index_file, kept, count)
        self._dirty.add(index_file)
        return count - kept

    def delete_below(self, commit_offset: int) -> int:
        """Delete the oldest files whose entries are all below ``commit_offset``.

        Never the newest file. Returns how many files were deleted.
        """
        with self._lock:
            self.refresh()
            ordered: list[tuple[int, IndexFile | None, str]] = [
                (f.begin_offset, f, f.name) for f in self.files
            ] + [(int(n), None, n) for n in self._bad]
            ordered.sort(key=lambda item: item[0])
            newest = self.files[-1] if self.files else None
            deleted = 0
            for position in range(len(ordered) - 1):
                _, index_file, name = ordered[position]
                next_begin = ordered[position + 1][0]
                if index_file is None:
                    # Damaged: its entries are at most the next file's first offset.
                    if next_begin >= commit_offset or not self._unlink_bad(name):
                        break
                else:
                    if index_file is newest:
                        break
                    _, _, _, end_offset, count, _ = index_file.state()
                    if count and end_offset >= commit_offset:
                        break
                    self._remove(index_file)
                deleted += 1
            if deleted:
                fileio.fsync_dir(self.directory)
            return deleted

    def skipped_from(self) -> int | None:
        """The first commit offset of the oldest file skipped as damaged, if any: keys
        from there on must be indexed again for lookups to find them all."""
        with self._lock:
            return min((int(name) for name in self._bad), default=None)

    def _unlink_bad(self, name: str) -> bool:
        """Delete a skipped (damaged or half-removed) file; False if it cannot be."""
        try:
            fileio.unlink(self.directory / name)
        except OSError:
            return False
        del self._bad[name]
        return True

    def files_to_sync(self, since: int) -> list[IndexFile]:
        """The files a flush fsyncs before its checkpoint claims the index durable: those
        this process wrote since the last call, and every file with entries at or past
        ``since`` (the last checkpoint's), which other processes may have written and
        rolled without this one seeing them."""
        with self._lock:
            self.refresh()
            pending, self._dirty = set(self._dirty), set()
            for index_file in self.files:
                _, _, _, end_offset, count, _ = index_file.state()
                if index_file.begin_offset >= since or (count and end_offset >= since):
                    pending.add(index_file)
            if self.files:
                pending.add(self.files[-1])
            return sorted(pending, key=lambda f: f.begin_offset)

    def take_dirty(self) -> list[IndexFile]:
        """Files written since the last call: fsync each (``sync()``, or its ``fd``)."""
        with self._lock:
            pending, self._dirty = list(self._dirty), set()
            return pending

    def close(self) -> None:
        with self._lock:
            for index_file in self.files:
                index_file.close()
            self.files.clear()
            self._dirty.clear()
            self._bad.clear()
