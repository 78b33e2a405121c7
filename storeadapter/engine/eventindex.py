"""The event index of a stream topic: from a stream to its events, and from a stream's
command id to the events the command produced (docs/FORMAT.md, "The event index: file";
docs/RECOVERY.md, "The event index: use").

One file per stream topic, ``consumequeue/<topic>/events``: a header, two tables of hash
slots (streams, commands) and fixed 48-byte entries, one per event, appended in
commit-log order. Like the key index, a slot holds the number of the newest entry linked
into it and each entry the number of the next older one, so a slot's entries form a chain;
only the last event of each append is linked (the only one that can be a stream's newest,
or a command's last). Each entry also points at its stream's previous version and at the
version ``v - lowbit(v)`` (a Fenwick jump), so any version of a stream is found from its
newest in O(log² v) steps.

Everything in it can be rebuilt from the commit log. Writes go through ``fileio``
(entries, then slots, then the header's count); reads through ``fileio.pread``. One writer
at a time (the caller holds the store's write lock); readers in other processes trust only
entries whose record lies below the tail they followed, and a chain walk that meets a bad
entry (a cut made meanwhile) starts again.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from . import fileio
from .checkedslots import SLOT, SLOT_SIZE, slot_bytes, slot_valid
from .errors import StoreFormatError

FILE_NAME = "events"
MAGIC = b"TDEV"
#: Version 2 gave every header field and every slot a check (version 1 files, without
#: them, are taken as damaged: rebuilt from the log by the first opener alone).
VERSION = 2
# magic, version, entry size, slots, reserved, created offset, CRC32C of the 24 bytes before
HEADER = struct.Struct("<4sHHIIQI")
_HEAD_CHECKED = 24
# Then three counters, each a u64 and the CRC32C of its field number and value:
# count (entries written), indexed_to (every event record below it is indexed), cuts.
COUNTER = struct.Struct("<QI")
COUNT_AT = HEADER.size  # 28
INDEXED_TO_AT = COUNT_AT + COUNTER.size  # 40
CUTS_AT = INDEXED_TO_AT + COUNTER.size  # 52
_COUNT, _INDEXED_TO, _CUTS = 1, 2, 3
_FIELD_CHECKED = struct.Struct("<BQ")
HEADER_SIZE = 64
_CRC = struct.Struct("<I")
# commit offset, stream hash, command hash, version, previous, jump, stream next,
# command next, crc32c of the 44 bytes before it
ENTRY = struct.Struct("<QQQIIIIII")
ENTRY_SIZE = ENTRY.size  # 48
_ENTRY_BODY = struct.Struct("<QQQIIIII")
_CRC_AT = ENTRY_SIZE - 4
MAX_ENTRIES = 0xFFFFFFFF
MAX_VERSION = 0xFFFFFFFF
# The two chains: (the entry field holding the hash, the one holding the next entry).
_STREAM, _COMMAND = 0, 1
_CHAIN_FIELDS = ((2, 7), (3, 8))
_READ_CHUNK = 65536  # entries read by one pread when many are read in a row
_BLOCK = 32  # entries a block reader fetches at once
_WALK_LIMIT = 1 << 20  # steps of one chain walk before it is taken for a loop


def _hash64(data: bytes) -> int:
    """Two 32-bit CRCs of different polynomials side by side, never 0."""
    return (crc32c(data) | zlib.crc32(data) << 32) or 1


def stream_hash(stream_id: str) -> int:
    """The stored 64-bit hash of a stream id."""
    return _hash64(stream_id.encode())


def command_hash(stream_id: str, command_id: str) -> int:
    """The stored 64-bit hash of a command id within its stream."""
    return _hash64(f"{stream_id}\x00{command_id}".encode())


def lowest_bit(version: int) -> int:
    return version & -version


def next_chain(chain: list[tuple[int, int]], version: int, number: int) -> list[tuple[int, int]]:
    """The jump chain of ``version`` (entry ``number``) from the chain of the version
    before it, which holds ``version - lowbit(version)`` and everything below it."""
    target = version - lowest_bit(version)
    if not target:
        return [(version, number)]
    for i, (held, _entry) in enumerate(chain):
        if held == target:
            return [(version, number), *chain[i:]]
        if held < target:
            break
    return [(version, number)]  # the target was lost (a gap): no jump


def run_jumps(
    chain: list[tuple[int, int]], first_version: int, count: int, first_number: int
) -> tuple[list[int], list[tuple[int, int]]]:
    """The jumps of ``count`` new versions from ``first_version`` (entries numbered from
    ``first_number``) of a stream whose newest version's jump chain is ``chain``, and the
    jump chain of the last of them. A version's jump target is below ``first_version``
    only if it is in ``chain`` (clearing low bits of a later version reaches no other
    version below it); one missing there was lost, and gets no jump."""
    below = dict(chain)
    jumps = []
    for version in range(first_version, first_version + count):
        target = version - (version & -version)
        if target >= first_version:
            jumps.append(first_number + target - first_version)
        else:
            jumps.append(below.get(target, 0))
    last = first_version + count - 1
    final = []
    version = last
    while version:
        number = (
            first_number + version - first_version
            if version >= first_version
            else below.get(version)
        )
        if number is None:
            break
        final.append((version, number))
        version -= version & -version
    return jumps, final


class EventEntry(NamedTuple):
    number: int
    commit_offset: int
    stream_hash: int
    command_hash: int
    version: int
    previous: int
    jump: int
    stream_next: int
    command_next: int


class NewEntry(NamedTuple):
    """An entry to append. ``previous`` and ``jump`` are entry numbers (the caller numbers
    the new entries from ``EventIndex.count + 1``); linked entries become their slot's
    newest."""

    commit_offset: int
    stream_hash: int
    command_hash: int  # 0: no command id
    version: int
    previous: int
    jump: int
    link_stream: bool
    link_command: bool


class EventIndexDamage(StoreFormatError):
    """The file cannot be used as it is (the sentence says why); it is rebuilt from the log."""


def _decode(number: int, raw: bytes) -> EventEntry | None:
    """The entry in ``raw`` (its 48 bytes), or None when unwritten or damaged."""
    if len(raw) < ENTRY_SIZE:
        return None
    fields = ENTRY.unpack(raw)
    if not fields[1] or crc32c(raw[:_CRC_AT]) != fields[8]:
        return None
    return EventEntry(number, *fields[:8])


def encode_entry(entry: EventEntry) -> bytes:
    body = _ENTRY_BODY.pack(*entry[1:])
    return body + _CRC.pack(crc32c(body))


def counter_bytes(field: int, value: int) -> bytes:
    """A header counter with its check (``field``: 1 count, 2 indexed_to, 3 cuts)."""
    return COUNTER.pack(value, crc32c(_FIELD_CHECKED.pack(field, value)))


def parse_counters(raw: bytes) -> tuple[int, int, int]:
    """(count, indexed_to, cuts) from the header's 36 counter bytes; EventIndexDamage
    names a counter that fails its check."""
    values = []
    for field, name in ((_COUNT, "count"), (_INDEXED_TO, "indexed_to"), (_CUTS, "cuts")):
        at = (field - 1) * COUNTER.size
        if len(raw) < at + COUNTER.size:
            raise EventIndexDamage(f"its header is cut short before {name}")
        value, check = COUNTER.unpack_from(raw, at)
        if check != crc32c(_FIELD_CHECKED.pack(field, value)):
            raise EventIndexDamage(f"its header's {name} fails its check")
        values.append(value)
    return values[0], values[1], values[2]


class EventIndex:
    """One stream topic's event index file, open read-write.

    ``count`` and ``cuts`` are this process's view of the header: a writer refreshes them
    (``refresh``) under the store's write lock before it looks anything up.
    """

    def __init__(self, path: Path, fd: int, slots: int, created_offset: int) -> None:
        self.path = path
        self.fd = fd
        self.slots = slots
        self.created_offset = created_offset
        self.entries_at = HEADER_SIZE + 2 * slots * SLOT_SIZE
        self._command_slots_at = HEADER_SIZE + slots * SLOT_SIZE
        self.count = 0
        self.indexed_to = 0
        self.cuts = 0
        self.synced: tuple[int, int, int] | None = None  # the counters at the last sync
        # Told (commit offset, sentence) of damage found while the index is used (a slot
        # failing its check): the store reports it as a corruption.
        self.on_damage: Callable[[int, str], None] | None = None

    # ------------------------------------------------------------ opening

    @classmethod
    def create(cls, path: Path, slots: int, created_offset: int, indexed_to: int) -> EventIndex:
        """Create the file under a temporary name, durable, then rename it into place:
        a file under its final name always has its header."""
        temp = path.with_name(f".{path.name}.tmp")
        fd = fileio.create_file(temp, truncate=True)
        try:
            fileio.ftruncate(fd, HEADER_SIZE + 2 * slots * SLOT_SIZE)
            head = HEADER.pack(MAGIC, VERSION, ENTRY_SIZE, slots, 0, created_offset, 0)
            head = head[:_HEAD_CHECKED] + _CRC.pack(crc32c(head[:_HEAD_CHECKED]))
            header = (
                head
                + counter_bytes(_COUNT, 0)
                + counter_bytes(_INDEXED_TO, indexed_to)
                + counter_bytes(_CUTS, 0)
            )
            fileio.pwrite_all(fd, header, 0)
            fileio.fsync(fd)
            fileio.rename(temp, path)
            fileio.fsync_dir(path.parent)
        except BaseException:
            os.close(fd)
            raise
        index = cls(path, fd, slots, created_offset)
        index.indexed_to = indexed_to
        return index

    @classmethod
    def open(cls, path: Path) -> EventIndex:
        """Open an existing file and check its header; raise FileNotFoundError when it is
        missing, EventIndexDamage when it cannot be used."""
        fd = fileio.open_file(path)
        try:
            size = os.fstat(fd).st_size
            raw = fileio.pread(fd, HEADER_SIZE, 0)
            if len(raw) < HEADER_SIZE:
                raise EventIndexDamage(f"{size} bytes, shorter than its {HEADER_SIZE}-byte header")
            magic, version, entry_size, slots, _, created, check = HEADER.unpack_from(raw)
            if magic != MAGIC:
                raise EventIndexDamage(f"bad magic {magic!r}")
            if version != VERSION or entry_size != ENTRY_SIZE:
                raise EventIndexDamage(f"unknown version {version} (entry size {entry_size})")
            if check != crc32c(raw[:_HEAD_CHECKED]):
                raise EventIndexDamage("its header fails its check")
            count, indexed_to, cuts = parse_counters(raw[COUNT_AT:HEADER_SIZE])
            if slots < 1 or size < HEADER_SIZE + 2 * slots * SLOT_SIZE:
                raise EventIndexDamage(f"{size} bytes, too short for its {slots} slots")
        except BaseException:
            os.close(fd)
            raise
        index = cls(path, fd, slots, created)
        index.count, index.indexed_to, index.cuts = count, indexed_to, cuts
        return index

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def closed(self) -> bool:
        return self.fd < 0

    # ------------------------------------------------------------ reading

    def read_counters(self) -> tuple[int, int, int]:
        """(count, indexed_to, cuts) as the header holds them now; EventIndexDamage
        (a StoreFormatError) when one fails its check."""
        try:
            return parse_counters(fileio.pread(self.fd, HEADER_SIZE - COUNT_AT, COUNT_AT))
        except EventIndexDamage as error:
            raise EventIndexDamage(
                f"the event index {self.path} is damaged ({error}); close every process "
                "using the store and delete the file: the first to open the store again "
                "rebuilds it from the commit log"
            ) from None

    def refresh(self) -> bool:
        """Take the header's counters; return whether another process cut the index
        since they were last taken (what was learned from it may be wrong)."""
        count, indexed_to, cuts = self.read_counters()
        cut = cuts != self.cuts
        self.count, self.indexed_to, self.cuts = count, indexed_to, cuts
        return cut

    def entries_in_file(self) -> int:
        """Entries the file's size holds room for (whole ones)."""
        return max(0, os.fstat(self.fd).st_size - self.entries_at) // ENTRY_SIZE

    def entry(self, number: int) -> EventEntry | None:
        """Entry ``number`` (from 1), or None when it is unwritten or damaged."""
        if number < 1:
            return None
        raw = fileio.pread(self.fd, ENTRY_SIZE, self.entries_at + (number - 1) * ENTRY_SIZE)
        return _decode(number, raw)

    def entries(self, first: int, last: int) -> Iterator[EventEntry | None]:
        """Entries ``first``..``last`` in order (None for each bad one), read in chunks."""
        number = max(first, 1)
        while number <= last:
            take = min(_READ_CHUNK, last - number + 1)
            raw = fileio.pread(
                self.fd, take * ENTRY_SIZE, self.entries_at + (number - 1) * ENTRY_SIZE
            )
            for i in range(take):
                yield _decode(number + i, raw[i * ENTRY_SIZE : (i + 1) * ENTRY_SIZE])
            number += take

    def stream_slot(self, hashed: int) -> int:
        return self._slot(HEADER_SIZE, hashed)

    def command_slot(self, hashed: int) -> int:
        return self._slot(self._command_slots_at, hashed)

    def _slot(self, table_at: int, hashed: int) -> int:
        slot = hashed % self.slots
        position = table_at + slot * SLOT_SIZE
        raw = fileio.pread(self.fd, SLOT_SIZE, position)
        if len(raw) < SLOT_SIZE:
            return 0
        number, check = SLOT.unpack(raw)
        if slot_valid(position, number, check):
            return number
        return self._newest_in_slot(table_at != HEADER_SIZE, slot)

    def _newest_in_slot(self, commands: bool, slot: int) -> int:
        """A slot that fails its check: its value found from the entries (the newest one
        hashing to it), at the cost of reading them all; the damage is reported. The
        next append linked into the slot writes it whole again."""
        field = 3 if commands else 2  # EventEntry.command_hash, .stream_hash
        newest = None
        for entry in self.entries(1, max(self.count, self.read_counters()[0])):
            if entry is not None and entry[field] and entry[field] % self.slots == slot:
                newest = entry
        if self.on_damage is not None:
            table = "command" if commands else "stream"
            self.on_damage(
                newest.commit_offset if newest is not None else self.created_offset,
                f"{table} slot {slot} of the event index {self.path} fails its check; "
                f"its newest entry ({newest.number if newest else 0}) was found from the "
                "entries",
            )
        return newest.number if newest is not None else 0

    def slot_table(self, commands: bool = False) -> array:
        """A whole slot table (streams, or commands), read in chunks: each slot's entry
        number, as held (whether or not it passes its check)."""
        return self._raw_slots(commands)[0::2]

    def damaged_slots(self, commands: bool = False) -> list[int]:
        """The slots of a table that fail their check."""
        raw = self._raw_slots(commands)
        table_at = self._command_slots_at if commands else HEADER_SIZE
        return [
            slot
            for slot in range(self.slots)
            if (raw[2 * slot] or raw[2 * slot + 1])
            and not slot_valid(table_at + slot * SLOT_SIZE, raw[2 * slot], raw[2 * slot + 1])
        ]

    def _raw_slots(self, commands: bool) -> array:
        table = array("I")
        at = self._command_slots_at if commands else HEADER_SIZE
        remaining = self.slots * SLOT_SIZE
        while remaining:
            take = min(remaining, _READ_CHUNK * SLOT_SIZE)
            raw = fileio.pread(self.fd, take, at)
            table.frombytes(raw + bytes(take - len(raw)))
            at += take
            remaining -= take
        if sys.byteorder == "big":
            table.byteswap()
        return table

    def stream_candidates(
        self, hashed: int, below: int, head: int | None = None
    ) -> Iterator[EventEntry]:
        """Linked entries of streams with this hash, newest first, whose records start
        below commit offset ``below``; ``head`` is the slot's value when just read.
        Raises ChainBroken at a bad entry."""
        start = self.stream_slot(hashed) if head is None else head
        return self._walk(start, hashed, below, _STREAM)

    def command_candidates(
        self, hashed: int, below: int, head: int | None = None
    ) -> Iterator[EventEntry]:
        """Linked entries of commands with this hash, newest first (see stream_candidates)."""
        start = self.command_slot(hashed) if head is None else head
        return self._walk(start, hashed, below, _COMMAND)

    def _walk(self, number: int, hashed: int, below: int, chain: int) -> Iterator[EventEntry]:
        hash_field, next_field = _CHAIN_FIELDS[chain]
        steps = 0
        while number:
            entry = self.entry(number)
            if entry is None:
                raise ChainBroken(number)
            if entry[hash_field] == hashed and entry.commit_offset < below:
                yield entry
            following = entry[next_field]
            steps += 1
            if following >= number or steps > _WALK_LIMIT:
                raise ChainBroken(number)
            number = following

    def block_reader(self) -> Callable[[int], EventEntry | None]:
        """``entry`` for many lookups near one another (one read): entries are fetched
        by blocks of ``_BLOCK`` ending at the one asked for, since a stream's events
        appended together are neighbours, and a walk goes from newer to older."""
        blocks: dict[int, bytes] = {}
        entries_at = self.entries_at

        def read(number: int) -> EventEntry | None:
            if number < 1:
                return None
            first = blocks.get(number)
            if first is None:
                first = max(1, number - _BLOCK + 1)
                raw = fileio.pread(
                    self.fd,
                    (number - first + 1) * ENTRY_SIZE,
                    entries_at + (first - 1) * ENTRY_SIZE,
                )
                for held in range(first, number + 1):
                    blocks[held] = first
                blocks[-first] = raw
            at = (number - first) * ENTRY_SIZE
            return _decode(number, blocks[-first][at : at + ENTRY_SIZE])

        return read

    def mapped_reader(self) -> tuple[Callable[[int], EventEntry | None], Callable[[], None]]:
        """``entry`` through a read-only mapping of the file as it is now, for a reader
        of very many entries in no order (``verify``); and the function that unmaps it."""
        size = os.fstat(self.fd).st_size
        if size <= self.entries_at:
            return (lambda number: None), (lambda: None)
        data = mmap.mmap(self.fd, size, access=mmap.ACCESS_READ)
        entries_at = self.entries_at
        last = (size - entries_at) // ENTRY_SIZE

        def read(number: int) -> EventEntry | None:
            if not 1 <= number <= last:
                return None
            at = entries_at + (number - 1) * ENTRY_SIZE
            return _decode(number, data[at : at + ENTRY_SIZE])

        return read, data.close

    def find_version(
        self,
        newest: EventEntry,
        version: int,
        read: Callable[[int], EventEntry | None] | None = None,
    ) -> EventEntry | None:
        """The entry of ``version`` of the stream whose newest entry is ``newest``: by
        the jumps while they stay at or above it, else by the previous one. None when
        the chain ends above it (the index lost it, or never had it). Raises ChainBroken.
        ``read`` fetches an entry (default: ``entry``)."""
        read = read or self.entry
        entry = newest
        steps = 0
        while entry.version > version:
            target = entry.version - lowest_bit(entry.version)
            number = entry.jump if target >= version and entry.jump else entry.previous
            if not number:
                return None
            following = read(number)
            steps += 1
            if (
                following is None
                or number >= entry.number
                or following.version >= entry.version
                or following.stream_hash != entry.stream_hash
                or steps > _WALK_LIMIT
            ):
                raise ChainBroken(number)
            entry = following
        return entry if entry.version == version else None

    def jump_chain(self, newest: EventEntry) -> list[tuple[int, int]]:
        """(version, entry number) of ``newest`` and of each entry its jumps lead to."""
        chain = [(newest.version, newest.number)]
        entry = newest
        while entry.jump:
            following = self.entry(entry.jump)
            if following is None or following.stream_hash != entry.stream_hash:
                raise ChainBroken(entry.jump)
            chain.append((following.version, following.number))
            entry = following
        return chain

    # ------------------------------------------------------------ writing

    def put(self, new: list[NewEntry], indexed_to: int) -> None:
        """Append ``new`` as entries ``count + 1``.. (entries, then slots, then header)."""
        if not new:
            return
        first = self.count + 1
        if first + len(new) - 1 > MAX_ENTRIES:
            raise OSError(27, "the event index is full")  # EFBIG
        stream_heads: dict[int, int] = {}
        command_heads: dict[int, int] = {}
        slots = self.slots
        parts = []
        for i, item in enumerate(new):
            number = first + i
            stream_next = command_next = 0
            if item.link_stream:
                slot = item.stream_hash % slots
                stream_next = stream_heads.get(slot)
                if stream_next is None:
                    stream_next = self.stream_slot(item.stream_hash)
                stream_heads[slot] = number
            if item.link_command:
                slot = item.command_hash % slots
                command_next = command_heads.get(slot)
                if command_next is None:
                    command_next = self.command_slot(item.command_hash)
                command_heads[slot] = number
            body = _ENTRY_BODY.pack(
                item.commit_offset,
                item.stream_hash,
                item.command_hash,
                item.version,
                item.previous,
                item.jump,
                stream_next,
                command_next,
            )
            parts.append(body)
            parts.append(_CRC.pack(crc32c(body)))
        fileio.pwrite_all(self.fd, b"".join(parts), self.entries_at + (first - 1) * ENTRY_SIZE)
        self._write_slots(HEADER_SIZE, stream_heads)
        self._write_slots(self._command_slots_at, command_heads)
        self._write_progress(first + len(new) - 1, max(indexed_to, self.indexed_to))

    def put_runs(self, entries: bytes, links: list[tuple[int, int, int]], indexed_to: int) -> None:
        """Append ``entries`` (packed, numbered from ``count + 1``: the events of one or
        more appends, each a run of one stream's versions, as ``dataplane.encode_events``
        makes them) and link the last entry of each append into its slots: ``links``
        holds (stream hash, command hash or 0, entry number) per append, no two of them
        sharing a slot (the caller holding the write lock read the slots' old values into
        the entries). Entries, then slots, then the header's count."""
        first = self.count + 1
        last = first + len(entries) // ENTRY_SIZE - 1
        if last > MAX_ENTRIES:
            raise OSError(27, "the event index is full")  # EFBIG
        fd = self.fd
        fileio.pwrite_all(fd, entries, self.entries_at + (first - 1) * ENTRY_SIZE)
        slots = self.slots
        commands_at = self._command_slots_at
        for stream_hashed, command_hashed, number in links:
            position = HEADER_SIZE + (stream_hashed % slots) * SLOT_SIZE
            fileio.pwrite_all(fd, slot_bytes(position, number), position)
            if command_hashed:
                position = commands_at + (command_hashed % slots) * SLOT_SIZE
                fileio.pwrite_all(fd, slot_bytes(position, number), position)
        self._write_progress(last, max(indexed_to, self.indexed_to))

    def _write_progress(self, count: int, indexed_to: int) -> None:
        """The header's count and indexed_to, each with its check, in one write."""
        progress = counter_bytes(_COUNT, count) + counter_bytes(_INDEXED_TO, indexed_to)
        fileio.pwrite_all(self.fd, progress, COUNT_AT)
        self.count, self.indexed_to = count, indexed_to

    def _write_slots(self, table_at: int, heads: dict[int, int]) -> None:
        for slot, number in heads.items():
            position = table_at + slot * SLOT_SIZE
            fileio.pwrite_all(self.fd, slot_bytes(position, number), position)

    def note_indexed_to(self, offset: int) -> None:
        """Every event record below ``offset`` is indexed: say so in the header (only
        raises it). Written alone, so it never undoes another process's count."""
        if offset > self.read_counters()[1]:
            fileio.pwrite_all(self.fd, counter_bytes(_INDEXED_TO, offset), INDEXED_TO_AT)
            self.indexed_to = offset

    def truncate_from(self, offset: int) -> int:
        """Remove every entry whose record starts at or past ``offset``, and entries past
        the count or damaged at the end (a writer that died mid-put); return how many.

        Steps: 1. the header (count, indexed_to lowered to ``offset``, one more cut);
        2. each slot whose newest entry goes gets that entry's next (from the newest
        removed down); if a removed entry cannot be read, every slot is rebuilt from
        the entries kept; 3. the file is cut after the last entry kept.
        """
        count, indexed_to, cuts = self.read_counters()
        kept, removed = self._from_the_end(offset, count)
        if any(entry is None for entry in removed):
            # A damaged entry is not a cut: the events from the last entry kept on (its
            # record's start, a boundary its check vouches for) are indexed again.
            last_kept = self.entry(kept) if kept else None
            offset = min(offset, last_kept.commit_offset if last_kept else self.created_offset)
        if removed or count > kept:
            cuts += 1
        elif count == kept and indexed_to <= offset:
            return 0
        indexed_to = min(indexed_to, offset)
        counters = (
            counter_bytes(_COUNT, kept)
            + counter_bytes(_INDEXED_TO, indexed_to)
            + counter_bytes(_CUTS, cuts)
        )
        fileio.pwrite_all(self.fd, counters, COUNT_AT)
        self.count, self.indexed_to, self.cuts = kept, indexed_to, cuts
        if removed:
            if any(entry is None for entry in removed):
                self.rebuild_slots(kept)
            else:
                self._unlink(removed)
            fileio.ftruncate(self.fd, self.entries_at + kept * ENTRY_SIZE)
        return len(removed)

    def kept_below(self, offset: int) -> tuple[int, bool]:
        """What ``truncate_from(offset)`` would keep: the number of its last entry kept,
        and whether an entry it would remove fails its check."""
        kept, removed = self._from_the_end(offset, self.read_counters()[0])
        return kept, any(entry is None for entry in removed)

    def _from_the_end(self, offset: int, count: int) -> tuple[int, list[EventEntry | None]]:
        """Walking back from the last entry (of the count or of the file, whichever is
        further): the newest intact entry whose record starts below ``offset``, and the
        entries after it (newest first, None for each that fails its check)."""
        removed: list[EventEntry | None] = []
        number = max(count, self.entries_in_file())
        while number > 0:
            entry = self.entry(number)
            if entry is not None and entry.commit_offset < offset:
                break
            removed.append(entry)
            number -= 1
        return number, removed

    def _unlink(self, removed: list[EventEntry]) -> None:
        """Point each slot whose newest entry is among ``removed`` (newest first) at the
        next older one."""
        stream_heads: dict[int, int] = {}
        command_heads: dict[int, int] = {}
        for entry in removed:
            slot = entry.stream_hash % self.slots
            head = stream_heads.get(slot)
            if head is None:
                head = self.stream_slot(entry.stream_hash)
            if head == entry.number:
                stream_heads[slot] = entry.stream_next
            if entry.command_hash:
                slot = entry.command_hash % self.slots
                head = command_heads.get(slot)
                if head is None:
                    head = self.command_slot(entry.command_hash)
                if head == entry.number:
                    command_heads[slot] = entry.command_next
        self._write_slots(HEADER_SIZE, stream_heads)
        self._write_slots(self._command_slots_at, command_heads)

    def rebuild_slots(self, count: int) -> None:
        """Recompute both slot tables from entries 1..count: a slot's newest entry is the
        highest-numbered one hashing to it (always the last of its append, the linked one)."""
        streams: dict[int, int] = {}
        commands: dict[int, int] = {}
        for entry in self.entries(1, count):
            if entry is None:
                continue
            streams[entry.stream_hash % self.slots] = entry.number
            if entry.command_hash:
                commands[entry.command_hash % self.slots] = entry.number
        for table_at, heads in ((HEADER_SIZE, streams), (self._command_slots_at, commands)):
            table = bytearray(self.slots * SLOT_SIZE)
            for slot, number in heads.items():
                table[slot * SLOT_SIZE : (slot + 1) * SLOT_SIZE] = slot_bytes(
                    table_at + slot * SLOT_SIZE, number
                )
            fileio.pwrite_all(self.fd, bytes(table), table_at)

    def sync(self) -> None:
        if self.fd >= 0:
            fileio.fdatasync(self.fd)


class ChainBroken(Exception):
    """A chain walk met an entry that is unwritten, damaged or out of order (a cut made
    by another process meanwhile, or damage)."""

    def __init__(self, number: int) -> None:
        super().__init__(f"entry {number}")
        self.number = number


__all__ = [
    "ChainBroken",
    "EventEntry",
    "EventIndex",
    "EventIndexDamage",
    "FILE_NAME",
    "NewEntry",
    "command_hash",
    "next_chain",
    "run_jumps",
    "stream_hash",
]
