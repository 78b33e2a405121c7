"""The key index (``index/<first offset>``): each file's header, entries and hash chains,
every entry against the record it names, and every key in the log against the index."""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..keyindex import (
    ENTRY,
    ENTRY_SIZE,
    FLAG_REMOVED,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    SLOT,
    SLOT_SIZE,
    VERSION,
    entry_intact,
    file_size,
    header_problem,
    slot_valid,
)
from ..metadata import TopicInfo
from .commit_log import LogFacts
from .problems import DAMAGE, NOTE, REWRITTEN, EntryRuns, Findings
from .readonly import numbered_files, relative

KIND = "index"
COMPLETE = ".complete"
_SHOWN_SLOTS = 5
_FAILING = 0xFFFFFFFF  # a slot failing its check, already reported


class _Entries:
    """The counted entries of every file, in file order: (commit offset, key hash) and
    where each is (file position in ``names``, entry number)."""

    def __init__(self) -> None:
        self.offsets = array("Q")
        self.hashes = array("I")
        self.files = array("I")
        self.numbers = array("I")
        self.names: list[str] = []


def check_key_index(
    store: Path, log: LogFacts, topics: Mapping[str, TopicInfo], index_dispatched: int = 0
) -> Findings:
    """Check every file of ``store``'s key index, and the index against the log's keys.

    Past the checkpoint's ``index_dispatched`` the index need not be durable yet: keys
    missing there, or entries past the log's end, the next open mends (notes)."""
    findings = Findings(KIND)
    directory = store / "index"
    entries = _Entries()
    end_offset = None  # one past the newest counted entry of the newest usable file
    for path in numbered_files(directory):
        findings.count("files")
        end = _check_file(store, path, entries, findings)
        if end is not None:
            end_offset = end
    in_order = _check_order(entries, findings)
    complete = (directory / COMPLETE).exists()
    if not complete and (directory.is_dir() or log.key_offsets):
        findings.note(
            "index/.complete",
            "missing: the next open deletes the key index and builds it again from the log",
        )
    bounds = (end_offset if complete else None, index_dispatched)
    _compare_with_log(entries, in_order, log, topics, bounds, findings)
    findings.counts["entries"] = len(entries.offsets)
    return findings


def _check_file(store: Path, path: Path, entries: _Entries, findings: Findings) -> int | None:
    """Check one file; gather its counted entries. Return one past its last entry's
    offset if the engine would use the file and it has entries, else None."""
    name = relative(store, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        raw = os.pread(fd, HEADER_SIZE, 0)
        problem = _header_problem(raw, size, int(path.name))
        if problem is not None:
            findings.damage(
                name, f"{problem}: the engine skips the file (the next open indexes its keys again)"
            )
            return None
        _, _, _, slots, capacity, _, _, _, _, end_offset, count, flags, _ = HEADER.unpack(raw)
        if flags & FLAG_REMOVED:
            findings.note(name, "flagged as being removed (a crash while deleting it): skipped")
            return None
        if size < file_size(slots, capacity):
            findings.damage(
                name,
                f"truncated: {size} of {file_size(slots, capacity)} bytes (the next open "
                "repairs the newest file; the engine skips any other)",
            )
            return None
        entries_at = HEADER_SIZE + slots * SLOT_SIZE
        data = os.pread(fd, count * ENTRY_SIZE, entries_at)
        table = _slot_table(name, os.pread(fd, slots * SLOT_SIZE, HEADER_SIZE), findings)
        heads, last_offset = _check_entries(name, data, slots, int(path.name), entries, findings)
        _check_slots(name, fd, table, heads, count, capacity, entries_at, findings)
    finally:
        os.close(fd)
    if not count:
        return None
    if last_offset is not None and last_offset != end_offset:
        findings.damage(
            name, f"its header's end offset {end_offset} is not entry {count}'s ({last_offset})"
        )
    return end_offset + 1


def _header_problem(raw: bytes, size: int, name_offset: int) -> str | None:
    """What the engine would skip the file for, or None."""
    if len(raw) < HEADER_SIZE:
        return f"{size} bytes, shorter than the {HEADER_SIZE}-byte header"
    magic, version, _, slots, capacity, _, begin_offset, _, _, _, count, _, _ = HEADER.unpack(raw)
    if magic != MAGIC:
        return f"bad magic {magic!r}"
    if version != VERSION:
        return f"unknown version {version}"
    if (problem := header_problem(raw)) is not None:
        return problem
    if slots < 1 or capacity < 1 or count > capacity:
        return f"bad header (slots {slots}, capacity {capacity}, count {count})"
    if begin_offset != name_offset:
        return f"header begin offset {begin_offset} does not match the name"
    if size > file_size(slots, capacity):
        return f"{size} bytes, expected {file_size(slots, capacity)}"
    return None


def _slot_table(name: str, raw: bytes, findings: Findings) -> array:
    """Each slot's entry number; a slot failing its check is reported and taken as
    pointing to its newest entry (lookups of its keys read every entry, and the next put
    into it writes it again)."""
    table = array("I")
    failing = []
    for slot, (number, check) in enumerate(SLOT.iter_unpack(raw)):
        position = HEADER_SIZE + slot * SLOT_SIZE
        if slot_valid(position, number, check):
            table.append(number)
        else:
            failing.append(slot)
            table.append(_FAILING)
    if failing:
        shown = ", ".join(map(str, failing[:_SHOWN_SLOTS]))
        findings.damage(
            name,
            f"{len(failing)} hash slots fail their check ({shown}): lookups of their keys "
            "read every entry",
        )
    return table


def _check_entries(
    name: str, data: bytes, slots: int, begin_offset: int, entries: _Entries, findings: Findings
) -> tuple[dict[int, int], int | None]:
    """Check entries 1..count; gather them. Return each slot's newest entry number, and
    the last entry's offset (None if it is zeros)."""
    runs = EntryRuns(findings)
    heads: dict[int, int] = {}
    last_offset = None
    position = len(entries.names)
    entries.names.append(name)
    for number, (hashed, offset, _diff, previous, _crc) in enumerate(ENTRY.iter_unpack(data), 1):
        last_offset = offset if hashed else None
        if not hashed and not any(data[(number - 1) * ENTRY_SIZE : number * ENTRY_SIZE]):
            runs.add(name, number, "zeros, below the file's count")
            continue
        if not entry_intact(data, (number - 1) * ENTRY_SIZE):
            runs.add(name, number, "fails its check (lookups there read the log)")
            last_offset = None
            continue
        slot = hashed % slots
        if previous != heads.get(slot, 0):
            detail = f"it names {previous}, the slot's entry before it is {heads.get(slot, 0)}"
            runs.add(name, number, "breaks its slot's chain (lookups miss older keys)", detail)
        if number == 1 and offset != begin_offset:
            runs.add(name, number, f"names offset {offset}, not the file's first ({begin_offset})")
        heads[slot] = number
        entries.offsets.append(offset)
        entries.hashes.append(hashed)
        entries.files.append(position)
        entries.numbers.append(number)
    runs.flush()
    return heads, last_offset


def _check_slots(
    name: str,
    fd: int,
    table: array,
    heads: dict[int, int],
    count: int,
    capacity: int,
    entries_at: int,
    findings: Findings,
) -> None:
    """Each slot must lead to its newest counted entry (through entries a crashed put
    left past the count, if it points there); a slot without entries must be 0."""
    wrong = []
    for slot, head in heads.items():
        if slot < len(table) and table[slot] == _FAILING:
            continue
        found = _resolve(fd, table[slot] if slot < len(table) else 0, count, capacity, entries_at)
        if found != head:
            at = found if isinstance(found, str) else f"entry {found}" if found else "no entry"
            wrong.append(f"slot {slot} leads to {at}, not to its newest entry {head}")
    if len(table) - table.count(0) > len(heads):
        for slot, value in enumerate(table):
            if value and value != _FAILING and slot not in heads and len(wrong) <= _SHOWN_SLOTS:
                found = _resolve(fd, value, count, capacity, entries_at)
                if isinstance(found, str):
                    wrong.append(f"slot {slot} leads to {found}")
                elif found:
                    wrong.append(f"slot {slot} leads to entry {found}, whose key is not its own")
    for sentence in wrong[:_SHOWN_SLOTS]:
        findings.damage(name, f"{sentence} (lookups of its keys miss)")
    if len(wrong) > _SHOWN_SLOTS:
        findings.damage(name, f"{len(wrong) - _SHOWN_SLOTS:,} more slots lead astray")


def _resolve(fd: int, number: int, count: int, capacity: int, entries_at: int) -> str | int:
    """Where a slot's chain enters the counted entries: an entry number, 0, or a sentence
    for a chain that leads out of the file or into zeros."""
    while number > count:
        if number > capacity:
            return f"entry {number}, outside the file"
        raw = os.pread(fd, ENTRY_SIZE, entries_at + (number - 1) * ENTRY_SIZE)
        hashed, _offset, _diff, previous, _crc = ENTRY.unpack(raw.ljust(ENTRY_SIZE, b"\0"))
        if not hashed or previous >= number:
            return f"entry {number}, past the count, which leads nowhere"
        number = previous
    return number


def _check_order(entries: _Entries, findings: Findings) -> bool:
    """Entries go in commit-offset order, within a file and across files. Report the
    first that does not; return whether all do."""
    offsets = entries.offsets
    for i in range(1, len(offsets)):
        if offsets[i] < offsets[i - 1]:
            findings.damage(
                entries.names[entries.files[i]],
                f"entry {entries.numbers[i]} names offset {offsets[i]}, below the entry before "
                f"it ({offsets[i - 1]}): entries go in commit-offset order",
            )
            return False
    return True


def _compare_with_log(
    entries: _Entries,
    in_order: bool,
    log: LogFacts,
    topics: Mapping[str, TopicInfo],
    bounds: tuple[int | None, int],
    findings: Findings,
) -> None:
    """Every entry must name a record carrying a key of its hash; every key of a record of
    a topic's queue below the index's end offset (``bounds[0]``; None: no key is
    expected) must have an entry. Past ``bounds[1]`` (the checkpoint's index position)
    misses are notes.

    Both sides are in commit-offset order: one merge walk, a group per offset.
    """
    end_offset, settled = bounds
    order: Sequence[int] = range(len(entries.offsets))
    if not in_order:
        order = sorted(order, key=entries.offsets.__getitem__)
    runs = EntryRuns(findings)
    missing: list[int] = []
    unsettled: list[int] = []
    i = j = 0
    count_a, count_e = len(order), len(log.key_offsets)
    while i < count_a or j < count_e:
        offset_a = entries.offsets[order[i]] if i < count_a else None
        offset_e = log.key_offsets[j] if j < count_e else None
        offset = min(o for o in (offset_a, offset_e) if o is not None)
        actual = []
        while i < count_a and entries.offsets[order[i]] == offset:
            actual.append(order[i])
            i += 1
        expected = []
        while j < count_e and log.key_offsets[j] == offset:
            expected.append(j)
            j += 1
        if offset < log.first_offset:
            continue  # retention deleted the record; the file goes when all its entries do
        hashes = [log.key_hashes[k] for k in expected]
        for k in actual:
            hashed = entries.hashes[k]
            if hashed in hashes:
                hashes.remove(hashed)
                continue
            name, number = entries.names[entries.files[k]], entries.numbers[k]
            if log.is_record(offset):
                runs.add(name, number, "names a record without a key of its hash", str(offset))
            elif offset >= max(log.end, settled):
                what = "names an offset past the log's end"
                runs.add(name, number, what, log.describe(offset), NOTE)
            else:
                runs.add(name, number, "names no intact record", log.describe(offset))
        if hashes and end_offset is not None and offset < end_offset:
            owner = log.owners[log.key_owners[expected[0]]]
            if _expected(owner, offset, topics):
                (missing if offset < settled else unsettled).extend([offset] * len(hashes))
    runs.flush()
    _report_missing(findings, missing, DAMAGE)
    _report_missing(findings, unsettled, NOTE)


def _report_missing(findings: Findings, missing: list[int], severity: str) -> None:
    if missing:
        where = (
            f"the record at offset {missing[0]}"
            if missing[0] == missing[-1]
            else f"records between offsets {missing[0]} and {missing[-1]}"
        )
        keys, verb = ("1 key", "is") if len(missing) == 1 else (f"{len(missing):,} keys", "are")
        reason = f"{keys} of {where} {verb} not in the key index"
        if severity == DAMAGE:
            findings.damage("index", f"{reason} (query_by_key and dedup miss them)", missing[0])
        else:
            findings.note("index", f"{reason}; {REWRITTEN}", missing[0])


def _expected(owner: tuple[str, int], offset: int, topics: Mapping[str, TopicInfo]) -> bool:
    """Whether the engine indexes a record of ``owner`` (topic, queue) at ``offset``."""
    info = topics.get(owner[0])
    return info is not None and owner[1] < info.queues and offset >= info.since(owner[1])
