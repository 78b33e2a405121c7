"""One queue's entries against its records in the log, whatever file layout holds them.

Every entry from the queue's first live one (those before it name records retention
deleted) to its last written one must point at the intact record of this topic, queue
and queue offset, with the record's size and tag hash, and pass its check (an entry an
engine before checks wrote, whose last 8 bytes are its record's 64-bit tag hash, is
taken as it is: the next open alone gives it its check); and every record of the queue
in the log (from the queue's ``since`` offset) must have its entry.

Entries of records at or past the checkpoint's ``dispatched`` offset need not be there
yet (a crash may have kept some of their writes and not others): the next open
rewrites them from the log, so what is wrong with them is a note, not damage.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import NamedTuple

from ..queuebase import (
    CHECKED_ENTRY,
    ENTRY,
    ENTRY_SIZE,
    entry_checked,
    entry_not_written,
    entry_tag,
)
from .commit_log import LogFacts, QueueRecords
from .problems import DAMAGE, NOTE, EntryRuns, Findings

_SHOWN_REPEATS = 10


class EntryChunk(NamedTuple):
    """Packed entries from queue offset ``first_index``, as stored in the file ``path``."""

    first_index: int
    data: bytes
    path: str


class QueueLog:
    """The records of one queue in the log from its ``since`` offset, by queue offset.

    ``settled_end`` is one past the highest queue offset of its records below
    ``dispatched``: entries below it must be right, those past it the next open rewrites.
    """

    def __init__(self, records: QueueRecords | None, since: int, dispatched: int) -> None:
        self.records = records if records is not None else QueueRecords()
        self.dispatched = dispatched
        self.start = self.records.start_at(since)
        settled = self.records.queue_offsets[self.start : self.records.start_at(dispatched)]
        self.settled_end = max(settled) + 1 if settled else 0
        self.matched = bytearray(len(self.records.offsets) - self.start)
        queue_offsets = self.records.queue_offsets[self.start :]
        self.repeats = [
            (self.start + i, self.start + i + 1)
            for i in range(len(queue_offsets) - 1)
            if queue_offsets[i] >= queue_offsets[i + 1]
        ]
        self._sorted = not self.repeats
        self._where: dict[int, int] = {}
        if not self._sorted:  # later records win, as in a rebuild from the log
            self._where = {q: self.start + i for i, q in enumerate(queue_offsets)}

    def position(self, queue_offset: int) -> int | None:
        """The position in ``records`` of the record with this queue offset, or None."""
        if not self._sorted:
            return self._where.get(queue_offset)
        queue_offsets = self.records.queue_offsets
        at = bisect.bisect_left(queue_offsets, queue_offset, self.start)
        if at < len(queue_offsets) and queue_offsets[at] == queue_offset:
            return at
        return None

    def severity(self, index: int, *offsets: int) -> str:
        """DAMAGE for a problem of entry ``index`` naming (or owed to) records at
        ``offsets``, when any of them is below ``dispatched``; else NOTE."""
        if index < self.settled_end or any(o < self.dispatched for o in offsets):
            return DAMAGE
        return NOTE

    @property
    def end(self) -> int:
        """One past the highest queue offset of the queue's records (0 without any)."""
        queue_offsets = self.records.queue_offsets[self.start :]
        return max(queue_offsets) + 1 if queue_offsets else 0


def check_queue_entries(
    findings: Findings,
    where: str,
    chunks: Iterable[EntryChunk],
    last_written: int,
    queue_log: QueueLog,
    log: LogFacts,
    path_for: Callable[[int], str],
) -> int:
    """Check one queue (``where`` names it: ``consumequeue/<topic>/<queue>``); return its
    end: one past the last entry that names an intact record (or one retention deleted),
    or past its last record in the log if that is further."""
    records = queue_log.records
    _report_repeats(findings, where, queue_log)
    runs = EntryRuns(findings)
    live = False
    first_live = last_written + 1
    valid_end = 0
    checked = 0
    for chunk in chunks:
        index = chunk.first_index - 1
        data = chunk.data
        for at_byte in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            index += 1
            if index > last_written:
                break
            offset, size, tag = CHECKED_ENTRY.unpack_from(data, at_byte)[:3]
            sealed = entry_checked(data, at_byte)
            unwritten = not sealed and entry_not_written(data, at_byte)
            if not live:
                if log.first_offset and (not size or offset < log.first_offset):
                    valid_end = index + 1 if size else valid_end
                    continue  # its record was deleted by retention
                live = True
                first_live = index
            checked += 1
            at = queue_log.position(index)
            owed = () if at is None else (records.offsets[at],)
            if not size and not unwritten:
                runs.add(chunk.path, index, "fails its check", "", DAMAGE)
                continue
            if not size:
                detail = "" if at is None else f"its record is at offset {owed[0]}"
                what = f"unwritten, though entry {last_written} after it is written"
                runs.add(chunk.path, index, what, detail, queue_log.severity(index, *owed))
                continue
            severity = queue_log.severity(index, offset, *owed)
            if owed == (offset,):
                queue_log.matched[at - queue_log.start] = 1
                if records.lengths[at] != size:
                    detail = f"{size} bytes, the record {records.lengths[at]}"
                    what = "gives another size than its record's"
                    runs.add(chunk.path, index, what, detail, severity)
                elif not sealed and ENTRY.unpack_from(data, at_byte)[2] != records.tags[at]:
                    # An entry an engine before checks wrote holds the 64-bit tag hash.
                    runs.add(chunk.path, index, "fails its check", "", DAMAGE)
                elif sealed and entry_tag(records.tags[at]) != tag:
                    what = "holds another tag hash than its record's"
                    runs.add(chunk.path, index, what, "", severity)
                else:
                    valid_end = index + 1
                continue
            if owed:
                detail = f"it names offset {offset}, the record is at {owed[0]}"
            else:
                detail = log.describe(offset)
            runs.add(chunk.path, index, "does not point at its record", detail, severity)
    runs.flush()
    findings.count("entries", checked)
    _report_missing(findings, queue_log, first_live, last_written, path_for)
    return max(valid_end, queue_log.end)


def _report_repeats(findings: Findings, where: str, queue_log: QueueLog) -> None:
    records = queue_log.records
    for earlier, later in queue_log.repeats[:_SHOWN_REPEATS]:
        findings.damage(
            where,
            f"the records at offsets {records.offsets[earlier]} and {records.offsets[later]} "
            f"hold queue offsets {records.queue_offsets[earlier]} and "
            f"{records.queue_offsets[later]}: a queue offset was given out twice",
        )
    if len(queue_log.repeats) > _SHOWN_REPEATS:
        findings.damage(
            where, f"{len(queue_log.repeats) - _SHOWN_REPEATS:,} more queue offsets given out twice"
        )


def _report_missing(
    findings: Findings,
    queue_log: QueueLog,
    first_live: int,
    last_written: int,
    path_for: Callable[[int], str],
) -> None:
    """Report the queue's records in the log that no entry names, outside the entries
    checked one by one (those were reported as unwritten or pointing elsewhere)."""
    records = queue_log.records
    runs = EntryRuns(findings, noun="queue offset")
    what = "in the log, but without an entry in the queue's files"
    for i, matched in enumerate(queue_log.matched):
        at = queue_log.start + i
        queue_offset = records.queue_offsets[at]
        if matched or first_live <= queue_offset <= last_written:
            continue
        offset = records.offsets[at]
        severity = queue_log.severity(queue_offset, offset)
        runs.add(path_for(queue_offset), queue_offset, what, f"offset {offset}", severity)
    runs.flush()
