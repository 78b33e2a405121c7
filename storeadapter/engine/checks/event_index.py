"""``check_event_index``: is every stream topic's event index whole, and does it agree
with the commit log?

Read-only, for ``verify`` (and for a store no process has open, or one that is open:
entries past the log's tail are what a writer under way, or one that died before
publishing, left; they are not reported). Each problem is a dict::

    {"check": "event_index", "topic": ..., "file": <path inside the store>,
     "entry": <entry number or None>, "commit_offset": <offset or None>, "reason": ...}

What is checked (docs/FORMAT.md, "The event index: file"):

1. the file: present, its header (magic, version, entry size, slots, the topic's
   created offset, each part passing its check), ``count`` within the file;
2. each entry 1..count: unwritten or failing its CRC32C; commit offsets increasing;
   links (previous, jump, next in its slots) pointing at older entries; ``previous``
   at the same stream one version down, ``jump`` at the same stream's version
   ``v - lowbit(v)``; the next entry of a slot chain in the same slot;
3. each slot: it passes its check and holds the newest entry hashing to it (as a rebuild
   would make it);
4. against the log: every event of the topic in the log has its entry, with its stream,
   version and command; every entry whose record the log still holds points at one of
   the topic's events.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

from ..checkpoint import read_checkpoint
from ..commitlog import CommitLog
from ..errors import CorruptRecordError, StoreFormatError
from ..eventindex import (
    FILE_NAME,
    EventEntry,
    EventIndex,
    EventIndexDamage,
    command_hash,
    lowest_bit,
    stream_hash,
)
from ..eventrecords import event_of
from ..metadata import StoreIdentity, TopicInfo, TopicTable
from ..record import HEADER_SIZE, TOPIC_LEN, decode_record
from ..scan import RECORD, scan_segment

Problem = dict
# Problems reported per topic before the rest are only counted.
MAX_PROBLEMS_PER_TOPIC = 1000


def check_event_index(store_path: str | Path) -> list[Problem]:
    """Every problem found in the event indexes of the store at ``store_path``."""
    root = Path(store_path)
    try:
        table = TopicTable(root / "topics.json")
    except StoreFormatError as error:
        return [_problem("", None, None, None, f"topics.json cannot be read: {error}")]
    topics = [info for info in table.topics.values() if info.streams]
    if not topics:
        return []
    problems: list[Problem] = []
    indexes: dict[str, EventIndex] = {}
    for info in topics:
        index, found = _open(root, info)
        problems.extend(found)
        if index is not None:
            indexes[info.name] = index
    try:
        for info in topics:
            index = indexes.get(info.name)
            if index is None:
                continue
            found = _check_entries(root, info, index) + _check_slots(root, info, index)
            problems.extend(_limited(found, root, info))
        if indexes:
            problems.extend(_check_against_log(root, [t for t in topics if t.name in indexes],
                                               indexes))  # fmt: skip
    finally:
        for index in indexes.values():
            index.close()
    return problems


def _problem(file: str, topic: str | None, entry: int | None, offset: int | None, reason: str):
    return {
        "check": "event_index",
        "topic": topic,
        "file": file,
        "entry": entry,
        "commit_offset": offset,
        "reason": reason,
    }


def _relative(root: Path, info: TopicInfo) -> str:
    return f"consumequeue/{info.name}/{FILE_NAME}"


def _limited(found: list[Problem], root: Path, info: TopicInfo) -> list[Problem]:
    if len(found) <= MAX_PROBLEMS_PER_TOPIC:
        return found
    more = len(found) - MAX_PROBLEMS_PER_TOPIC
    return found[:MAX_PROBLEMS_PER_TOPIC] + [
        _problem(_relative(root, info), info.name, None, None, f"and {more} more problems")
    ]


def _open(root: Path, info: TopicInfo) -> tuple[EventIndex | None, list[Problem]]:
    file = _relative(root, info)
    try:
        index = EventIndex.open(root / file)
    except FileNotFoundError:
        return None, [_problem(file, info.name, None, None, "the event index is missing")]
    except EventIndexDamage as error:
        return None, [_problem(file, info.name, None, None, f"unusable header: {error}")]
    except OSError as error:
        return None, [_problem(file, info.name, None, None, f"cannot be read: {error}")]
    problems = []
    if index.created_offset != info.created_offset:
        problems.append(
            _problem(file, info.name, None, None,
                     f"made for a topic created at offset {index.created_offset}, not "
                     f"{info.created_offset} (an older topic of the same name)")
        )  # fmt: skip
        index.close()
        return None, problems
    room = index.entries_in_file()
    if index.count > room:
        problems.append(
            _problem(file, info.name, None, None,
                     f"the header counts {index.count} entries; the file holds {room}")
        )  # fmt: skip
        index.count = room
    return index, problems


def _check_entries(root: Path, info: TopicInfo, index: EventIndex) -> list[Problem]:
    file = _relative(root, info)
    read, unmap = index.mapped_reader()
    try:
        return _check_each(index, read, file, info)
    finally:
        unmap()


def _check_each(
    index: EventIndex, read: Callable[[int], EventEntry | None], file: str, info: TopicInfo
) -> list[Problem]:
    """Each entry's own checks and its links' (``read`` fetches the entries linked to)."""
    problems: list[Problem] = []
    slots = index.slots
    previous_offset = -1
    for number, entry in enumerate(index.entries(1, index.count), 1):
        if entry is None:
            problems.append(
                _problem(file, info.name, number, None, "unwritten, or fails its CRC32C check")
            )
            continue

        def report(reason: str, entry: EventEntry = entry) -> None:
            problems.append(_problem(file, info.name, entry.number, entry.commit_offset, reason))

        if entry.commit_offset <= previous_offset:
            report(f"its commit offset does not follow the entry before's ({previous_offset})")
        previous_offset = max(previous_offset, entry.commit_offset)
        if entry.version < 1:
            report("version 0")
        for name in ("previous", "jump", "stream_next", "command_next"):
            if getattr(entry, name) >= number:
                report(f"its {name} link ({getattr(entry, name)}) is not an older entry")
        if 0 < entry.previous < number:
            before = read(entry.previous)
            if before is None or before.stream_hash != entry.stream_hash:
                report(f"its previous entry {entry.previous} is not of its stream")
            elif before.version != entry.version - 1:
                report(
                    f"its previous entry {entry.previous} is version {before.version}, "
                    f"not {entry.version - 1}"
                )
        if 0 < entry.jump < number:
            target = read(entry.jump)
            wanted = entry.version - lowest_bit(entry.version)
            if target is None or target.stream_hash != entry.stream_hash:
                report(f"its jump entry {entry.jump} is not of its stream")
            elif target.version != wanted:
                report(f"its jump entry {entry.jump} is version {target.version}, not {wanted}")
        if 0 < entry.stream_next < number:
            following = read(entry.stream_next)
            if following is None or following.stream_hash % slots != entry.stream_hash % slots:
                report(f"the next entry of its stream slot ({entry.stream_next}) is in another")
        if 0 < entry.command_next < number:
            following = read(entry.command_next)
            if following is None or following.command_hash % slots != entry.command_hash % slots:
                report(f"the next entry of its command slot ({entry.command_next}) is in another")
    return problems


def _check_slots(root: Path, info: TopicInfo, index: EventIndex) -> list[Problem]:
    """Each slot must hold the newest entry hashing to it (the linked last of its append)."""
    file = _relative(root, info)
    slots = index.slots
    newest = (array("I", bytes(4 * slots)), array("I", bytes(4 * slots)))
    for entry in index.entries(1, index.count):
        if entry is not None:
            newest[0][entry.stream_hash % slots] = entry.number
            if entry.command_hash:
                newest[1][entry.command_hash % slots] = entry.number
    problems = []
    for table, (name, wanted) in enumerate(zip(("stream", "command"), newest, strict=True)):
        for slot in index.damaged_slots(commands=table == 1):
            problems.append(
                _problem(file, info.name, None, None, f"{name} slot {slot} fails its check")
            )
        held = index.slot_table(commands=table == 1)
        if held == wanted:
            continue
        for slot in range(slots):
            if held[slot] != wanted[slot]:
                problems.append(
                    _problem(
                        file,
                        info.name,
                        held[slot] or None,
                        None,
                        f"{name} slot {slot} holds entry {held[slot]}; the newest entry "
                        f"hashing to it is {wanted[slot]}",
                    )
                )
    return problems


def _check_against_log(
    root: Path, topics: list[TopicInfo], indexes: dict[str, EventIndex]
) -> list[Problem]:
    """Merge each topic's entries (in commit-offset order) with its events in the log."""
    try:
        identity = StoreIdentity.load_or_create(root / "store.json", 1, 1 << 30)
    except StoreFormatError as error:
        return [_problem("store.json", None, None, None, f"cannot be read: {error}")]
    checkpoint = read_checkpoint(root / "checkpoint")
    log = CommitLog(root / "commitlog", identity.segment_bytes)
    log.open(repair=False)
    by_bytes = {info.name.encode(): info for info in topics}
    entries = {info.name: _valid_entries(indexes[info.name]) for info in topics}
    pending: dict[str, EventEntry | None] = {name: next(it, None) for name, it in entries.items()}
    problems: dict[str, list[Problem]] = {info.name: [] for info in topics}
    durable_end = checkpoint.commitlog_flushed if checkpoint else 0
    tail = log.min_offset
    try:
        for position, segment in enumerate(log.segments):
            sealed = position < len(log.segments) - 1
            for event in scan_segment(segment, 0, sealed, durable_end):
                if event.kind != RECORD:
                    continue
                offset = event.offset
                tail = offset + event.length
                pos = offset - segment.base
                topic = bytes(
                    segment.view[pos + HEADER_SIZE : pos + HEADER_SIZE + event.header[TOPIC_LEN]]
                )
                info = by_bytes.get(topic)
                if info is None or offset < info.created_offset:
                    continue
                try:
                    message = decode_record(segment.view, pos, segment.size, offset, "")
                except CorruptRecordError:
                    continue
                stored = event_of(message)
                if stored is None:
                    continue
                name = info.name
                file = _relative(root, info)
                entry = pending[name]
                while entry is not None and entry.commit_offset < offset:
                    if entry.commit_offset >= log.min_offset:
                        problems[name].append(_no_event(file, name, entry))
                    entry = pending[name] = next(entries[name], None)
                if entry is None or entry.commit_offset != offset:
                    problems[name].append(
                        _problem(file, name, None, offset,
                                 f"version {stored.version} of stream {stored.stream_id!r} "
                                 "has no entry")
                    )  # fmt: skip
                    continue
                wanted_command = (
                    command_hash(stored.stream_id, stored.command_id)
                    if stored.command_id is not None
                    else 0
                )
                if (
                    entry.stream_hash != stream_hash(stored.stream_id)
                    or entry.version != stored.version
                    or entry.command_hash != wanted_command
                ):
                    problems[name].append(
                        _problem(file, name, entry.number, offset,
                                 f"does not match its event (stream {stored.stream_id!r}, "
                                 f"version {stored.version})")
                    )  # fmt: skip
                pending[name] = next(entries[name], None)
        for info in topics:
            entry = pending[info.name]
            while entry is not None and entry.commit_offset < tail:
                if entry.commit_offset >= log.min_offset:
                    problems[info.name].append(_no_event(_relative(root, info), info.name, entry))
                entry = next(entries[info.name], None)
    finally:
        log.close()
    found = []
    for info in topics:
        found.extend(_limited(problems[info.name], root, info))
    return found


def _no_event(file: str, topic: str, entry: EventEntry) -> Problem:
    return _problem(
        file, topic, entry.number, entry.commit_offset, "no event of the topic starts there"
    )


def _valid_entries(index: EventIndex) -> Iterator[EventEntry]:
    for entry in index.entries(1, index.count):
        if entry is not None:
            yield entry


__all__ = ["check_event_index"]
