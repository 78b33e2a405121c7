"""Consume queues for a topic with very many queues: every queue's entries in blocks of a
few shared files, instead of files of its own.

One file per queue breaks down at a million queues (a million files to create, open and
fsync, and random I/O over all of them). A *shared* topic keeps the entries of all its
queues in ``consumequeue/<topic>/blocks/<20-digit first block number>`` files of
``blocks_per_file`` blocks each. A block holds ``entries_per_block`` consecutive entries of
one queue, the same 20-byte entries as a queue file (commit-log offset, size, tag hash),
after a 16-byte header naming its owner:

    queue u32 | seq u64 | crc32c(queue, seq) u32 | entries_per_block × 20-byte entries

Block ``seq`` of a queue holds its offsets ``seq × E`` to ``seq × E + E - 1``. Blocks are
handed out in order (under the store's write lock) and their headers are written together
with their first entries, so the allocated blocks are the run of valid headers from block
0: a process learns of blocks others allocated by reading headers past the last it knew.
In memory, a native ``BlockIndex`` maps (queue, seq) to the block number (and keeps each
queue's first and last seq): about 50 bytes per block. It keeps each queue's ends too
(minimum, maximum, change count, loaded; 32 bytes a queue): the one place they are held,
which the shared batch moves without a Python object per queue and a ``BlockQueue``
reads and sets when asked.

A queue whose blocks are all below its minimum offset (retention) leaves them unused; a
file goes when none of its blocks is in use. A removed queue's headers are erased, so a
queue added again under the same number does not take them over.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from . import fileio
from .dataplane import (
    BlockIndex,
    QueueEnd,
    drop_block_pages,
    refault_block_pages,
    unmap_block_file,
)
from .queuebase import ENTRY_SIZE, QueueBase, seal_entries, unpack_entry
from .seam import Watched, WatchedABC
from .segment import is_segment_name, segment_name

BLOCK_HEADER = struct.Struct("<IQI")
BLOCK_HEADER_SIZE = BLOCK_HEADER.size
_OWNER = struct.Struct("<IQ")
#: The owner written over a removed queue's block headers: allocated, but no one's.
ERASED = 0xFFFFFFFF
#: Blocks read at a time when a store is opened.
_LOAD_BLOCKS = 256
#: ``blocks/allocated``: two slots (seq, allocation end, commit-log tail, CRC32C).
ALLOCATED_FILE = "allocated"
#: A block sync lets go of its file's mapped pages and begins their writeback this many
#: bytes at a time (``drop_block_pages``), so that few pages are stored into, mapped
#: again, between their let-go and their writeback (each a TLB shootdown, then a fault
#: under the thread lock: docs/PERFORMANCE.md, put33-s55).
SYNC_PART = 1 << 20
END_SLOT = struct.Struct("<QQQI")


def header_bytes(queue: int, seq: int) -> bytes:
    owner = _OWNER.pack(queue, seq)
    return owner + struct.pack("<I", crc32c(owner))


def parse_header(data: bytes | memoryview) -> tuple[int, int] | None:
    """(queue, seq) of a valid block header, or None (never allocated, erased or torn)."""
    if len(data) < BLOCK_HEADER_SIZE:
        return None  # past the end of a file cut short
    queue, seq, crc = BLOCK_HEADER.unpack_from(data)
    if crc != crc32c(bytes(data[:12])):
        return None
    return queue, seq


class BlockFile:
    """One file of blocks. A shared topic has few of them (each holds tens of MB), so each
    keeps its descriptor open instead of going through the store's handle cache."""

    __slots__ = ("_path", "first_block", "blocks", "block_bytes", "_fd", "_base")

    def __init__(self, path: Path, first_block: int, blocks: int, block_bytes: int) -> None:
        self._path = os.fspath(path)
        self.first_block = first_block
        self.blocks = blocks
        self.block_bytes = block_bytes
        self._fd = -1
        self._base = first_block * block_bytes  # subtracted from a block's absolute position

    @property
    def path(self) -> Path:
        return Path(self._path)

    @classmethod
    def create(cls, directory: Path, first_block: int, blocks: int, block_bytes: int) -> BlockFile:
        """A new, empty file of blocks, its space reserved (writes to a sparse file's new
        pages cost the file system an allocation each), made durable with its directory
        entry."""
        path = directory / segment_name(first_block)
        fd = fileio.create_file(path, exclusive=True)
        try:
            fileio.preallocate(fd, blocks * block_bytes)
            fileio.fsync(fd)
            fileio.fsync_dir(directory)
        except BaseException:
            os.close(fd)
            fileio.unlink(path)
            raise
        block_file = cls(path, first_block, blocks, block_bytes)
        block_file._fd = fd
        return block_file

    @property
    def fd(self) -> int:
        if self._fd < 0:
            self._fd = fileio.open_file(self._path)
        return self._fd

    def pread(self, block: int, offset: int, size: int) -> bytes:
        return fileio.pread(self.fd, size, block * self.block_bytes - self._base + offset)

    def pwrite(self, block: int, offset: int, data) -> None:
        fileio.pwrite_all(self.fd, data, block * self.block_bytes - self._base + offset)

    def read_all(self) -> bytes:
        return fileio.pread(self.fd, self.blocks * self.block_bytes, 0)

    def sync(self) -> None:
        if self._fd >= 0:
            # The pages of the batches' mapping let go first: the writeback
            # write-protects each page still mapped, a TLB shootdown each
            # (docs/PERFORMANCE.md, mill33b-s50); a part at a time, each part's
            # writeback begun right after it (put33-s55). Then, in one go, the pages
            # the batches mapped again meanwhile (stored into after their part was let
            # go): the fdatasync write-protects each page still mapped, a shootdown each
            # (put33-s57).
            drop_block_pages(self, SYNC_PART)
            drop_block_pages(self)
            fileio.fdatasync(self._fd)

    def map_stored_pages(self) -> int:
        """After a sync, map writable again the pages stored into before it, so that the
        next stores into them take no page fault (the flush thread takes them instead:
        docs/PERFORMANCE.md, put33-s51). Each is dirty again: the next sync writes it
        back, stored into since or not. How many pages."""
        return refault_block_pages(self) if self._fd >= 0 else 0

    def close(self) -> None:
        if self._fd >= 0:
            # The batches' mapping let go with the file: a deleted file's space is in
            # use while any mapping of it lives.
            unmap_block_file(self)
            os.close(self._fd)
            self._fd = -1


class NoTimeIndex:
    """A shared topic's queues keep no time marks: ``offset_for_time`` binary-searches
    the records' store times over the whole queue (a few more reads per lookup)."""

    __slots__ = ()

    def write(self, marks: list[tuple[int, int]]) -> None:
        pass

    def write_run(self, queue_offset: int, packed: bytes) -> None:
        pass

    def bracket(self, timestamp_ms: int, low: int, high: int) -> tuple[int, int]:
        return low, high

    def truncate_from(self, queue_offset: int) -> None:
        pass

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


NO_TIME_INDEX = NoTimeIndex()


class BlockStore(metaclass=Watched):
    """The blocks of one shared topic: where each queue's entries live, and their I/O.

    It stands in the store's set of things to fsync at the next flush for all its queues
    (one object, where a million queues would be a million): ``take_dirty``,
    ``time_index`` and ``closed`` are what the flush asks of it.
    """

    time_index = NO_TIME_INDEX

    def __init__(
        self,
        directory: Path,
        entries_per_block: int,
        blocks_per_file: int,
    ) -> None:
        self.directory = Path(directory)
        self.entries_per_block = entries_per_block
        self.blocks_per_file = blocks_per_file
        self.block_bytes = BLOCK_HEADER_SIZE + entries_per_block * ENTRY_SIZE
        self.files: dict[int, BlockFile] = {}  # by first block number
        self.dirty: set[BlockFile] = set()
        self.closed = False
        # (queue, seq) -> block number, and each queue's seq range (native: the shared
        # batch looks blocks up and remembers them without a Python call).
        self.index = BlockIndex()
        self.end = 0  # blocks below this are allocated (or erased); the next goes here
        # Whether another process may have allocated blocks since this one last looked
        # (the store says so when it follows others' appends): until then a writer that
        # misses a block allocates it without reading the header at ``end`` first.
        self.stale = False
        # The commit-log tail this process has followed to (set by the store): blocks
        # are taken in only up to the allocation end published with a tail at or below
        # it, never a dead writer's unpublished ones.
        self.tail_source: Callable[[], int] | None = None
        self._ends_fd = -1
        self._published = -1  # the allocation end this process last published
        # Blocks below the published allocation end whose headers are unreadable (their
        # file cut short or overwritten): their entries are lost until rebuilt.
        self.damaged: list[int] = []
        # Set while recovery rebuilds the topic's entries: a queue's first block may be
        # one still to be rebuilt, so its start is not known from the blocks found.
        self.rebuilding = False
        self._load()

    # -- finding blocks -----------------------------------------------------------------

    def _load(self, limit: int | None = None) -> None:
        """Read the headers of the allocated run (up to ``limit`` blocks if given)."""
        fileio.make_dir(self.directory, parents=True, exist_ok=True)
        for name in sorted(os.listdir(self.directory)):
            if is_segment_name(name) and int(name) not in self.files:
                first = int(name)
                self.files[first] = BlockFile(
                    self.directory / name, first, self.blocks_per_file, self.block_bytes
                )
        self.index.clear()
        self.damaged = []
        self.end = min(self.files, default=0)
        allocated = self._newest_published_end() if limit is None else 0
        size = self.block_bytes
        for first, block_file in sorted(self.files.items()):
            if first != self.end:
                break  # a gap: nothing allocated past it
            # Read a few blocks at a time, and stop at the end of the allocated run:
            # reading the file's never-written pages would put them in the page cache as
            # clean pages, and a later small write into such a page costs ext4 several
            # times a write into an untouched one.
            # Each run's headers checked and remembered natively (``take_headers``): a
            # valid one's block remembered, an invalid one below the published end
            # damaged, the first invalid one past it (or ``limit``) the run's end.
            for start in range(0, block_file.blocks, _LOAD_BLOCKS):
                count = min(_LOAD_BLOCKS, block_file.blocks - start)
                data = block_file.pread(first + start, 0, count * size)
                self.end, damaged, stopped = self.index.take_headers(
                    data, size, first + start, count, self.end, allocated, limit
                )
                self.damaged.extend(damaged)
                if stopped:
                    return

    def _newest_published_end(self) -> int:
        """The allocation end last published (0 when none can be read)."""
        if self._ends_fd < 0 and not (self.directory / ALLOCATED_FILE).exists():
            return 0
        slots = self._read_slots()
        return max(slots)[1] if slots else 0

    def erase_damaged(self) -> int:
        """Mark the damaged blocks as no one's (recovery rebuilds their entries into new
        blocks), so later opens do not count them again. Only while no other process is
        writing. Returns how many there were."""
        for block in self.damaged:
            block_file = self._file_of(block)
            if block_file is not None:
                block_file.pwrite(block, 0, header_bytes(ERASED, 0))
                self.dirty.add(block_file)
        count, self.damaged = len(self.damaged), []
        self.rebuilding = self.rebuilding or bool(count)
        return count

    def create_first_file(self) -> None:
        """Give a new topic its first (empty) file of blocks, so that a topic without
        block files later means they were lost."""
        if not self.files:
            self.files[0] = BlockFile.create(
                self.directory, 0, self.blocks_per_file, self.block_bytes
            )

    def lost(self) -> bool:
        """Whether block files are missing: none at all, or a gap between them (files
        go only from the front, with retention)."""
        firsts = sorted(self.files)
        if not firsts:
            return True
        return firsts != list(range(firsts[0], firsts[-1] + 1, self.blocks_per_file))

    # -- the published allocation end --------------------------------------------------

    def _ends(self) -> int:
        if self._ends_fd < 0:
            self._ends_fd = fileio.create_file(self.directory / ALLOCATED_FILE)
        return self._ends_fd

    def _read_slots(self) -> list[tuple[int, int, int]]:
        """The valid (seq, end, tail) slots of ``blocks/allocated``."""
        data = fileio.pread(self._ends(), 2 * END_SLOT.size, 0)
        slots = []
        for at in (0, END_SLOT.size):
            if len(data) < at + END_SLOT.size:
                break
            seq, end, tail, crc = END_SLOT.unpack_from(data, at)
            if seq and crc == crc32c(data[at : at + END_SLOT.size - 4]):
                slots.append((seq, end, tail))
        return slots

    def published_end(self, tail: int) -> int | None:
        """The allocation end published with a commit-log tail at or below ``tail`` (the
        newest such), or None when there is none to go by."""
        fitting = [slot for slot in self._read_slots() if slot[2] <= tail]
        return max(fitting)[1] if fitting else None

    def publish_end(self, tail: int) -> None:
        """Say, before the store publishes ``tail``, how far blocks are allocated (under
        the store's write lock; not fsynced: recovery finds the allocated run anew)."""
        if self.end == self._published:
            return
        seq = max((slot[0] for slot in self._read_slots()), default=0) + 1
        body = END_SLOT.pack(seq, self.end, tail, 0)[:-4]
        at = (seq % 2) * END_SLOT.size
        fileio.pwrite_all(self._ends(), body + struct.pack("<I", crc32c(body)), at)
        self._published = self.end

    def republish_end(self, tail: int) -> None:
        """After recovery: the allocated run as found is the published end at ``tail``."""
        self._published = -1
        self.publish_end(tail)

    def discard_unpublished(self, tail: int) -> int:
        """Erase the headers a writer that died before publishing left past the published
        allocation end (under the store's write lock); return how many."""
        limit = self.published_end(tail)
        if limit is None or limit < self.end:
            return 0
        self.refresh(limit)
        erased = 0
        block = self.end
        while True:
            block_file = self._file_of(block) or self._find_file(block)
            if block_file is None:
                break
            data = block_file.pread(block, 0, BLOCK_HEADER_SIZE)
            if len(data) < BLOCK_HEADER_SIZE or parse_header(data) is None:
                break
            block_file.pwrite(block, 0, bytes(BLOCK_HEADER_SIZE))
            self.dirty.add(block_file)
            erased += 1
            block += 1
        self.republish_end(tail)
        return erased

    def refresh(self, limit: int | None = None) -> None:
        """Take in the blocks allocated (by any process) since this one last looked, up to
        ``limit`` (default: the published allocation end, else the run's end)."""
        if limit is None and self.tail_source is not None:
            limit = self.published_end(self.tail_source())
        if limit is not None and limit < self.end:
            # This process took in blocks a writer left unpublished when it died; they
            # were erased since, and their places may hold other blocks now.
            self._load(limit)
        while limit is None or self.end < limit:
            block_file = self._file_of(self.end)
            if block_file is None:
                block_file = self._find_file(self.end)
                if block_file is None:
                    return
            data = block_file.pread(self.end, 0, BLOCK_HEADER_SIZE)
            owner = parse_header(data) if len(data) == BLOCK_HEADER_SIZE else None
            if owner is None:
                return
            self._remember(owner[0], owner[1], self.end)
            self.end += 1

    def _find_file(self, block: int) -> BlockFile | None:
        """The file holding ``block`` if another process created it since this one looked."""
        first = block - block % self.blocks_per_file
        path = self.directory / segment_name(first)
        if not path.exists():
            return None
        block_file = BlockFile(path, first, self.blocks_per_file, self.block_bytes)
        self.files[first] = block_file
        return block_file

    def _remember(self, queue: int, seq: int, block: int) -> None:
        self.index.remember(queue, seq, block)  # nothing for an ERASED owner

    def _file_of(self, block: int) -> BlockFile | None:
        return self.files.get(block - block % self.blocks_per_file)

    def _block_for_write(self, queue: int, seq: int) -> int | None:
        block = self.index.get(queue, seq)
        if block is None and self.stale:
            self.refresh()
            self.stale = False
            block = self.index.get(queue, seq)
        return block

    def block_of(self, queue: int, seq: int) -> int | None:
        block = self.index.get(queue, seq)
        if block is None:
            self.refresh()  # perhaps another process allocated it
            block = self.index.get(queue, seq)
        return block

    def mark_dirty(self, queue: int, seq: int) -> None:
        """Have the next flush fsync the file of the queue's block ``seq``."""
        block = self.block_of(queue, seq)
        block_file = None if block is None else self._file_of(block)
        if block_file is not None:
            self.dirty.add(block_file)

    def queues_with_blocks(self) -> list[int]:
        """The ids of the queues that have blocks."""
        return self.index.queues()

    def seq_range(self, queue: int) -> tuple[int, int] | None:
        """(first, last) block seq the queue has, or None."""
        return self.index.seq_range(queue)

    # -- entries ------------------------------------------------------------------------

    def _new_block(self, queue: int, seq: int, entries_at: int, entries) -> tuple[int, bytes]:
        """Take the next block for the queue's block ``seq`` (creating its file if need
        be); return it and the whole block's bytes to write: header, ``entries`` from
        slot ``entries_at``, zeros elsewhere (a dead writer's entries may be there)."""
        block = self.end
        if self._file_of(block) is None:
            self.files[block] = BlockFile.create(
                self.directory, block, self.blocks_per_file, self.block_bytes
            )
        before = BLOCK_HEADER_SIZE + entries_at * ENTRY_SIZE
        data = bytearray(self.block_bytes)
        data[:BLOCK_HEADER_SIZE] = header_bytes(queue, seq)
        data[before : before + len(entries)] = entries
        self.end = block + 1
        self._remember(queue, seq, block)
        return block, bytes(data)

    def write_many(self, writes: list[tuple[int, int, bytes]]) -> None:
        """``write`` for many (queue, index, packed entries), in file order, adjacent
        writes (blocks allocated one after another) joined into one pwrite."""
        per = self.entries_per_block
        size = self.block_bytes
        per_file = self.blocks_per_file
        known = self.index
        pieces: list[tuple[int, int, bytes]] = []  # (block, position in the block, data)
        add = pieces.append
        for queue, index, entries in writes:
            seq, slot = divmod(index, per)
            if slot + len(entries) // ENTRY_SIZE <= per:
                block = known.get(queue, seq)
                if block is not None:
                    add((block, BLOCK_HEADER_SIZE + slot * ENTRY_SIZE, entries))
                    continue
            view = memoryview(entries)
            while view:
                seq, slot = divmod(index, per)
                n = min(len(view) // ENTRY_SIZE, per - slot)
                chunk = view[: n * ENTRY_SIZE]
                block = self._block_for_write(queue, seq)
                if block is None:
                    block, data = self._new_block(queue, seq, slot, chunk)
                    add((block, 0, data))
                else:
                    add((block, BLOCK_HEADER_SIZE + slot * ENTRY_SIZE, bytes(chunk)))
                view = view[n * ENTRY_SIZE :]
                index += n
        pieces.sort()
        files = self.files
        pwrite = fileio.pwrite_all
        run_file = None
        run_fd = -1
        run_base = run_at = 0
        run_end = -1
        run: list[bytes] = []
        for block, at, data in pieces:
            position = block * size + at
            if position == run_end and run_file is files.get(block - block % per_file):
                run.append(data)
                run_end += len(data)
                continue
            if run:
                pwrite(run_fd, run[0] if len(run) == 1 else b"".join(run), run_at - run_base)
            block_file = files[block - block % per_file]
            if block_file is not run_file:
                run_file = block_file
                run_fd = block_file.fd
                run_base = block_file.first_block * size
                self.dirty.add(block_file)
            run_at = position
            run_end = position + len(data)
            run = [data]
        if run:
            pwrite(run_fd, run[0] if len(run) == 1 else b"".join(run), run_at - run_base)

    def write(self, queue: int, index: int, entries) -> None:
        """Write packed entries of ``queue`` from offset ``index`` (allocating blocks)."""
        per = self.entries_per_block
        seq, slot = divmod(index, per)
        if slot + len(entries) // ENTRY_SIZE <= per:  # the common case: one known block
            block = self.index.get(queue, seq)
            if block is not None:
                block_file = self.files[block - block % self.blocks_per_file]
                block_file.pwrite(block, BLOCK_HEADER_SIZE + slot * ENTRY_SIZE, entries)
                self.dirty.add(block_file)
                return
        self.write_many([(queue, index, entries)])  # spans blocks, or allocates

    def read(self, queue: int, index: int, count: int) -> bytes:
        """Up to ``count`` packed entries of ``queue`` from ``index`` (stops at a gap)."""
        per = self.entries_per_block
        parts = []
        while count > 0:
            seq, slot = divmod(index, per)
            block = self.block_of(queue, seq)
            if block is None:
                break
            n = min(count, per - slot)
            block_file = self._file_of(block)
            if block_file is None:
                break
            at = BLOCK_HEADER_SIZE + slot * ENTRY_SIZE
            parts.append(block_file.pread(block, at, n * ENTRY_SIZE))
            index += n
            count -= n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def entry(self, queue: int, index: int) -> tuple[int, int, int] | None:
        data = self.read(queue, index, 1)
        if len(data) != ENTRY_SIZE:
            return None
        value = unpack_entry(data)
        return value if value[1] else None

    def written_end(self, queue: int) -> int:
        """The offset after the queue's last written entry (0 when it has none)."""
        seqs = self.seq_range(queue)
        if seqs is None:
            return 0
        per = self.entries_per_block
        for seq in range(seqs[1], seqs[0] - 1, -1):
            data = self.read(queue, seq * per, per)
            written = data.rstrip(b"\0")
            if written:
                # An entry's last bytes (the tag hash) may be zero: round up to an entry.
                return seq * per + -(-len(written) // ENTRY_SIZE)
        return seqs[0] * per

    # -- upkeep -------------------------------------------------------------------------

    def forget_queue(self, queue: int) -> None:
        """Erase the headers of every block of ``queue`` (it is being removed)."""
        seqs = self.seq_range(queue)
        if seqs is None:
            return
        for seq in range(seqs[0], seqs[1] + 1):
            block = self.index.pop(queue, seq)
            if block is None:
                continue
            block_file = self._file_of(block)
            if block_file is not None:
                block_file.pwrite(block, 0, header_bytes(ERASED, 0))
                self.dirty.add(block_file)
        self.index.set_range(queue, None)

    def recheck_queue(self, queue: int) -> None:
        """Forget the blocks this process knows of ``queue`` whose headers no longer name
        it: another process removed the queue (erasing them), perhaps adding it back since.
        Headers are read, not assumed, as this process may already know the new blocks."""
        seqs = self.seq_range(queue)
        if seqs is None:
            return
        kept = []
        for seq in range(seqs[0], seqs[1] + 1):
            block = self.index.get(queue, seq)
            if block is None:
                continue
            block_file = self._file_of(block)
            header = b"" if block_file is None else block_file.pread(block, 0, BLOCK_HEADER_SIZE)
            if parse_header(header) == (queue, seq):
                kept.append(seq)
            else:
                self.index.pop(queue, seq)
        self.index.set_range(queue, (kept[0], kept[-1]) if kept else None)

    def erase_unallocated(self) -> int:
        """Zero the headers past the allocated run (left there by a writer that crashed,
        perhaps after a torn header), so no later scan takes them for allocated blocks.
        Only while no other process is writing. Returns how many were erased."""
        erased = 0
        size = self.block_bytes
        for first, block_file in sorted(self.files.items()):
            if first + block_file.blocks <= self.end:
                continue
            data = block_file.read_all()
            for slot in range(max(0, self.end - first), block_file.blocks):
                if any(data[slot * size : slot * size + BLOCK_HEADER_SIZE]):
                    block_file.pwrite(first + slot, 0, bytes(BLOCK_HEADER_SIZE))
                    self.dirty.add(block_file)
                    erased += 1
        return erased

    def drop_files(self, in_use: Callable[[int, int], bool]) -> int:
        """Delete the files none of whose blocks is in use; ``in_use(queue, seq)`` says
        whether a queue still needs its block (it must for a queue's last block: that
        marks where the queue ends). The file blocks are allocated in stays."""
        per_file = self.blocks_per_file
        # A file holding a queue's last block is in use (``in_use`` says so for a last
        # block): only the blocks of the other whole files are asked about, not every
        # block of the topic (a million at a million queues) at every open.
        needed = set(self.index.files_with_last_blocks(per_file))
        candidates = [
            first
            for first in sorted(self.files)
            if first not in needed and first + per_file <= self.end
        ]
        if not candidates:
            return 0
        for queue, seq, block in self.index.items_in_files(candidates, per_file):
            first = block - block % per_file
            if first not in needed and in_use(queue, seq):
                needed.add(first)
        doomed = [first for first in candidates if first not in needed]
        if not doomed:
            return 0
        self.index.drop_files(doomed, per_file)
        for first in doomed:
            block_file = self.files.pop(first)
            self.dirty.discard(block_file)
            block_file.close()
            fileio.unlink(block_file.path)
        return len(doomed)

    def take_dirty(self) -> list[BlockFile]:
        pending, self.dirty = list(self.dirty), set()
        return pending

    def close(self) -> None:
        self.closed = True
        for block_file in self.files.values():
            block_file.close()
        if self._ends_fd >= 0:
            os.close(self._ends_fd)
            self._ends_fd = -1
        self.dirty.clear()


class BlockQueue(QueueBase, metaclass=WatchedABC):
    """One queue of a shared topic, with the interface of ``ConsumeQueue``.

    Its entries live in the topic's ``BlockStore``; like a ``ConsumeQueue`` it is loaded
    lazily (its ends are found on first use) and then checked by ``on_load``.

    Its ends (``_min_offset``, ``_max_offset``, ``changes``, ``_loaded``) are kept in the
    topic's native block index, not in the object (block_index.rs): the shared batch
    moves them there without making or touching an object per queue, and an object,
    made before or after, reads and sets them there. Several objects of one queue (a
    closed one still held, and its successor) read the same ends.
    """

    __slots__ = ("blocks", "queue_id", "_ends")

    time_index = NO_TIME_INDEX

    @property
    def flush_target(self) -> BlockStore:
        """What the flush must fsync for this queue: its topic's block store."""
        return self.blocks

    def __init__(
        self,
        blocks: BlockStore,
        queue_id: int,
        on_load: Callable[[BlockQueue], None] | None = None,
    ) -> None:
        self.blocks = blocks
        self.queue_id = queue_id
        self._ends = blocks.index
        super().__init__(on_load)
        self.owner = (b"", queue_id)

    def _start_ends(self) -> None:
        """The queue's ends stay as its topic's index has them (loaded or not)."""

    # Native data descriptors (block_index.rs): each reads and sets its field in
    # ``self._ends`` at ``self.queue_id``, without a Python frame (dearer than a slot).
    _loaded = QueueEnd("loaded")  # type: ignore[assignment]
    _min_offset = QueueEnd("min")  # type: ignore[assignment]
    _max_offset = QueueEnd("max")  # type: ignore[assignment]
    changes = QueueEnd("changes")  # type: ignore[assignment]

    @property
    def directory(self) -> Path:
        return self.blocks.directory

    def _load(self) -> None:
        seqs = self.blocks.seq_range(self.queue_id)
        if seqs is not None:
            self._min_offset = (
                0 if self.blocks.rebuilding else seqs[0] * self.blocks.entries_per_block
            )
            self._max_offset = max(self.blocks.written_end(self.queue_id), self._min_offset)
        if self.on_load is not None:
            self.on_load(self)

    @staticmethod
    def write_many(blocks: BlockStore, writes: list[tuple[BlockQueue, int, bytes]]) -> None:
        """``write`` for many queues of one block store at once: (queue, index, entries)."""
        for queue, _index, _entries in writes:
            if not queue._loaded:
                queue._ensure_loaded()
        blocks.write_many(
            [(queue.queue_id, index, seal_entries(entries)) for queue, index, entries in writes]
        )
        for queue, index, entries in writes:
            end = index + len(entries) // ENTRY_SIZE
            if end > queue._max_offset:
                queue._max_offset = end
            queue.changes += 1

    def write(self, index: int, entries: bytes) -> None:
        if not self._loaded:
            self._ensure_loaded()
        self.blocks.write(self.queue_id, index, seal_entries(entries))
        end = index + len(entries) // ENTRY_SIZE
        if end > self._max_offset:
            self._max_offset = end
        self.changes += 1

    def read(self, index: int, count: int) -> bytes:
        count = min(count, self.max_offset - index)
        per = self.blocks.entries_per_block
        parts = []
        while count > 0:
            data = self.blocks.read(self.queue_id, index, count)
            n = len(data) // ENTRY_SIZE
            if not n:  # a block never allocated, lost or cut short: entries read as unwritten
                n = min(count, per - index % per)
                data = bytes(n * ENTRY_SIZE)
            parts.append(data[: n * ENTRY_SIZE])
            index += n
            count -= n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def entry(self, index: int) -> tuple[int, int, int] | None:
        if not self.min_offset <= index < self.max_offset:
            return None
        return self.blocks.entry(self.queue_id, index)

    def rewrite(self, index: int, entries: bytes) -> None:
        """Write back entries read from the queue (some given their checks) as they are."""
        self.blocks.write(self.queue_id, index, entries)

    def truncate(self, index: int) -> None:
        """Erase every entry from ``index`` on (they point past the commit log's tail)."""
        if index >= self.max_offset:
            return
        self.blocks.write(self.queue_id, index, bytes((self._max_offset - index) * ENTRY_SIZE))
        self._max_offset = index
        self.changes += 1

    def mark_dirty(self, start: int, end: int) -> None:
        """Another process wrote entries ``start`` to ``end - 1``: have the next flush
        fsync the files holding them."""
        per = self.blocks.entries_per_block
        for seq in range(start // per, (end - 1) // per + 1):
            self.blocks.mark_dirty(self.queue_id, seq)

    def take_dirty(self) -> list[BlockFile]:
        return self.blocks.take_dirty()

    def create_first_file(self) -> None:
        """A shared topic's queues have no files of their own: nothing to create."""
        self._loaded = True

    def close(self) -> None:
        self.closed = True
