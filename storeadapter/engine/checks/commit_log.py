"""The commit log: every record checked, the log's end against the checkpoint, and what
the other checks need to know of the records (where each queue's records are, which
keys each record carries)."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ..keyindex import key_hash
from ..names import DEDUP_KEY_PREFIX, DEDUP_PROPERTY
from ..record import (
    HEADER,
    HEADER_SIZE,
    KEY_SEPARATOR,
    LENGTH,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    QUEUE_ID,
    QUEUE_OFFSET,
    TOPIC_LEN,
)
from ..results import Corruption
from ..scan import CORRUPT, GARBAGE_TAIL, RECORD, TAIL, ScanEvent, scan_segment
from ..tags import tag_hash
from .problems import Findings, Progress
from .readonly import ReadOnlySegment, numbered_files, relative

KIND = "commitlog"
_PROGRESS_STEP = 64 << 20


class QueueRecords:
    """The intact records of one (topic, queue id), in log order: commit offset, queue
    offset, length and tag hash of each."""

    __slots__ = ("offsets", "queue_offsets", "lengths", "tags")

    def __init__(self) -> None:
        self.offsets = array("Q")
        self.queue_offsets = array("Q")
        self.lengths = array("I")
        self.tags = array("Q")

    def start_at(self, offset: int) -> int:
        """The position of the first record at or past commit ``offset``."""
        return bisect.bisect_left(self.offsets, offset)


class LogFacts:
    """What the scan of the commit log found. Keeps the segments mapped (read-only) for
    the checks that look at the records entries point at; ``close()`` unmaps them."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.findings = Findings(KIND)
        self.segments: list[ReadOnlySegment] = []
        self.first_offset = 0
        self.end = 0  # where the intact log ends (the tail recovery would find)
        self.durable_end = 0
        self.records = 0
        self.record_bytes = 0
        self.corruptions: list[Corruption] = []
        self.starts = array("Q")  # commit offset of every intact record, ascending
        self.queues: dict[tuple[str, int], QueueRecords] = {}
        # One item per key a record carries (its DEDUP_ID too), in log order.
        self.key_offsets = array("Q")
        self.key_hashes = array("I")
        self.key_owners = array("I")  # position in ``owners``
        self.owners: list[tuple[str, int]] = []
        self._bases: list[int] = []
        self._topics: dict[bytes, str] = {}
        self._owner_ids: dict[tuple[str, int], int] = {}

    # -- what other checks ask -------------------------------------------------------

    def is_record(self, offset: int) -> bool:
        """Whether an intact record starts at commit ``offset``."""
        at = bisect.bisect_left(self.starts, offset)
        return at < len(self.starts) and self.starts[at] == offset

    def header_at(self, offset: int) -> tuple[tuple, str] | None:
        """The header and topic of the intact record at ``offset``, or None."""
        if not self.is_record(offset):
            return None
        segment = self.segments[bisect.bisect_right(self._bases, offset) - 1]
        pos = offset - segment.base
        header = HEADER.unpack_from(segment.view, pos)
        topic = bytes(segment.map[pos + HEADER_SIZE : pos + HEADER_SIZE + header[TOPIC_LEN]])
        return header, self._topic(topic)

    def describe(self, offset: int) -> str:
        """What the log holds at ``offset``, for a sentence about an entry naming it."""
        if offset >= self.end:
            return f"offset {offset} is past the log's end ({self.end})"
        if offset < self.first_offset:
            return f"offset {offset} is below the log's first offset ({self.first_offset})"
        found = self.header_at(offset)
        if found is None:
            return f"no intact record starts at offset {offset}"
        header, topic = found
        return (
            f"offset {offset} holds a record of {topic}/{header[QUEUE_ID]} at queue offset "
            f"{header[QUEUE_OFFSET]}, {header[LENGTH]} bytes"
        )

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments.clear()

    def __enter__(self) -> LogFacts:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- gathering -------------------------------------------------------------------

    def _topic(self, data: bytes) -> str:
        name = self._topics.get(data)
        if name is None:
            name = self._topics[data] = data.decode("utf-8", "replace")
        return name

    def _owner(self, topic: str, queue: int) -> int:
        key = (topic, queue)
        owner = self._owner_ids.get(key)
        if owner is None:
            owner = self._owner_ids[key] = len(self.owners)
            self.owners.append(key)
        return owner

    def _add(self, segment: ReadOnlySegment, offset: int, header: tuple) -> None:
        length, _, _, queue_offset, _, _, queue_id, _, _, topic_len, tag_len, keys, props = header
        data = segment.map
        pos = offset - segment.base + HEADER_SIZE
        topic = self._topic(data[pos : pos + topic_len])
        records = self.queues.get((topic, queue_id))
        if records is None:
            records = self.queues[(topic, queue_id)] = QueueRecords()
        pos += topic_len
        records.offsets.append(offset)
        records.queue_offsets.append(queue_offset)
        records.lengths.append(length)
        records.tags.append(tag_hash(data[pos : pos + tag_len]) if tag_len else 0)
        self.starts.append(offset)
        self.records += 1
        self.record_bytes += length
        if keys or props:
            pos += tag_len
            owner = self._owner(topic, queue_id)
            for key in _index_keys(data[pos : pos + keys], data[pos + keys : pos + keys + props]):
                self.key_offsets.append(offset)
                self.key_hashes.append(key_hash(topic, key))
                self.key_owners.append(owner)


def _index_keys(keys: bytes, props: bytes) -> list[str]:
    """The keys the key index holds for a record: its keys and its dedup id."""
    found = keys.decode("utf-8", "replace").split(KEY_SEPARATOR) if keys else []
    if props:
        for item in props.decode("utf-8", "replace").split(PROPERTY_SEPARATOR):
            name, _, value = item.partition(NAME_VALUE_SEPARATOR)
            if name == DEDUP_PROPERTY:
                found.append(DEDUP_KEY_PREFIX + value)
    return found


def check_commit_log(
    store: Path, durable_end: int = 0, progress: Progress | None = None
) -> LogFacts:
    """Check every record of ``store``'s commit log, and its end against ``durable_end``
    (the checkpoint's ``commitlog_flushed``): zeros below it are damage, above it the
    unwritten end; a log that ends below it lost durable records."""
    facts = LogFacts(store)
    facts.durable_end = durable_end
    findings = facts.findings
    if not (store / "commitlog").is_dir():
        findings.damage("commitlog", "missing: the store has no commit log")
    paths = numbered_files(store / "commitlog")
    sizes = [path.stat().st_size for path in paths]
    total = sum(sizes)
    done = 0
    expected_base = int(paths[0].name) if paths else 0
    facts.first_offset = facts.end = expected_base
    for position, (path, size) in enumerate(zip(paths, sizes, strict=True)):
        name = relative(store, path)
        last = position == len(paths) - 1
        base = int(path.name)
        if base != expected_base:
            findings.damage(
                name,
                f"segment does not follow the one before it (which ends at {expected_base}): "
                "the log has a gap, and the store refuses to open",
                base,
            )
        if size == 0:
            if last:
                findings.note(name, "an empty last segment (a crash while creating it)")
            else:
                findings.damage(name, "an empty segment in the middle of the log")
            expected_base = base + size
            continue
        segment = ReadOnlySegment(path, size)
        facts.segments.append(segment)
        facts._bases.append(base)
        tick = partial(_tick, progress, done - base, total) if progress else _no_tick
        facts.end = _scan(facts, segment, name, not last, durable_end, tick)
        expected_base = segment.end
        done += size
        findings.count("segments")
        tick(segment.end)
    findings.counts["records"] = facts.records
    findings.counts["bytes"] = facts.record_bytes
    if facts.end < durable_end:
        last_name = relative(store, paths[-1]) if paths else "commitlog"
        findings.damage(
            last_name,
            f"the log ends at {facts.end}, below the checkpoint's flushed offset {durable_end}: "
            "records made durable are gone (a segment cut short or deleted)",
            facts.end,
        )
    return facts


def _garbage_tail(findings: Findings, name: str, event: ScanEvent, durable_end: int) -> None:
    """Bad bytes where the log ends: damage below the durable end; past it, what a
    crash left of writes never acknowledged, which the next open erases."""
    reason = f"{event.length} bad bytes at the log's end: {event.reason}"
    if event.offset < durable_end:
        findings.damage(name, reason, event.offset)
    else:
        findings.note(
            name, f"{reason} (past the durable end: a write a crash cut short)", event.offset
        )


def _tick(progress: Progress, shift: int, total: int, offset: int) -> None:
    progress(KIND, shift + offset, total)


def _no_tick(_offset: int) -> None:
    return None


def _scan(
    facts: LogFacts,
    segment: ReadOnlySegment,
    name: str,
    sealed: bool,
    durable_end: int,
    tick: Callable[[int], None],
) -> int:
    """Scan one segment; return where its intact records end. ``tick(offset)`` is
    called every 64 MiB."""
    end = segment.end
    next_report = segment.base + _PROGRESS_STEP
    for event in scan_segment(segment, 0, sealed, durable_end):
        kind = event.kind
        if kind == RECORD:
            facts._add(segment, event.offset, event.header)
        elif kind == CORRUPT:
            facts.corruptions.append(Corruption(event.offset, event.length, event.reason))
            facts.findings.damage(name, f"{event.length} bad bytes: {event.reason}", event.offset)
        elif kind == GARBAGE_TAIL:
            facts.corruptions.append(Corruption(event.offset, event.length, event.reason))
            _garbage_tail(facts.findings, name, event, durable_end)
            end = event.offset
        elif kind == TAIL:
            end = event.offset
        if event.offset >= next_report:
            tick(event.offset)
            next_report = event.offset + _PROGRESS_STEP
    return end


__all__ = ["LogFacts", "QueueRecords", "check_commit_log"]
