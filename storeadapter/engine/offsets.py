"""Consumer offsets: durable, with the history of every change.

Each change is appended to a journal (``offsets/journal-<generation>``) as a framed
entry (length, CRC32C, JSON) and fsynced before the store's commit returns (the fsync
runs after the store's write lock is let go: ``sync``). When the journal grows past
``compact_bytes`` the current offsets and recent history are written to
``offsets/snapshot.json`` and a new journal generation begins. On open the snapshot is
loaded and newer journals replayed. A frame that fails its length or CRC check is
damage when a later frame validates: replay skips it and goes on (one bad frame loses
one change, not every later one). Bad bytes with no valid frame after them are a torn
write: replay stops there. Either way, the process alone with the store (``repair``)
copies the bad bytes into ``offsets/damaged-<journal>-<position>`` (never destroyed,
listed in ``damage``), cuts a torn tail, and after skipped damage starts a new
generation from a snapshot, so the damage is not met again.

A commit of the offset already there changes nothing, but it is news to a monitor (a
consumer that keeps committing one offset while lag grows is stalled, not stopped): at
most every TOUCH_INTERVAL_MS per queue it is journaled as a "touch", which updates the
queue's last-commit time and nothing else.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections import deque
from collections.abc import Iterator
from functools import partial
from itertools import compress
from operator import le
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from . import clock, fileio
from .errors import StoreFormatError
from .offsetsnapshot import Snapshot, decode_snapshot, encode_snapshot

_FRAME = struct.Struct("<II")
HISTORY_PER_GROUP = 1000
#: An unchanged commit is journaled at most this often per queue.
TOUCH_INTERVAL_MS = 5_000


class JournalDamage(NamedTuple):
    """Bad bytes met in a journal: where, how many, and the file they were copied to."""

    journal: str
    at: int
    length: int
    kept_in: str | None
    torn: bool

    def as_dict(self) -> dict:
        return self._asdict()


class OffsetChange(NamedTuple):
    """One change of a committed offset: ``old`` is None for a group's first commit."""

    group: str
    topic: str
    queue: int
    old: int | None
    new: int
    time_ms: int
    who: str
    reason: str


def group_position(committed: int | None, low: int) -> int:
    """Where a group stands in a queue whose offsets run from ``low``: its committed
    offset (the next message it consumes), or ``low`` where it never committed (where a
    new consumer starts)."""
    return low if committed is None else committed


def _flat(topics: dict[str, dict[int, int]] | None, topic: str | None) -> dict:
    if not topics:
        return {}
    if topic is not None:
        queues = topics.get(topic)
        return {} if queues is None else {(topic, q): o for q, o in queues.copy().items()}
    return {(t, q): o for t, queues in list(topics.items()) for q, o in queues.copy().items()}


class ChangeLog:
    """One group's latest changes (at most HISTORY_PER_GROUP), oldest first.

    Read as OffsetChange values, kept as plain tuples: a tuple of strings and numbers
    drops out of the garbage collector's walks, a named tuple never does, and a store
    keeps up to HISTORY_PER_GROUP changes per group for as long as it is open (200
    groups: 200,000 objects each full collection would otherwise walk).
    """

    __slots__ = ("_changes",)

    def __init__(self) -> None:
        self._changes: deque[tuple] = deque(maxlen=HISTORY_PER_GROUP)

    def append(self, change: OffsetChange) -> None:
        self._changes.append(tuple(change))

    def __len__(self) -> int:
        return len(self._changes)

    def __iter__(self) -> Iterator[OffsetChange]:
        return map(OffsetChange._make, self._changes)

    def __reversed__(self) -> Iterator[OffsetChange]:
        return map(OffsetChange._make, reversed(self._changes))

    def __getitem__(self, index: int) -> OffsetChange:
        return OffsetChange._make(self._changes[index])

    def newest(
        self, topic: str | None = None, queue: int | None = None, limit: int = 100
    ) -> list[OffsetChange]:
        """The changes of ``topic`` (and ``queue``) if given, newest first, at most
        ``limit``: only those returned are made into OffsetChange values."""
        picked = [  # 1 is the topic, 2 the queue (OffsetChange's field order)
            change
            for change in reversed(self._changes)
            if (topic is None or change[1] == topic) and (queue is None or change[2] == queue)
        ]
        return [OffsetChange._make(change) for change in picked[:limit]]


class OffsetStore:
    """Offsets of every group, as this process last read them from disk.

    Several processes may share the directory: changes are written only under the
    store's write lock, after ``catch_up`` has read what the others wrote. Only a
    process alone with the store (``repair=True``) cuts a torn journal tail; the others
    stop before it, since it may be an entry still being written.
    """

    def __init__(self, directory: Path, compact_bytes: int = 4 << 20, repair: bool = True) -> None:
        self.directory = directory
        self.compact_bytes = compact_bytes
        fileio.make_dir(directory, parents=True, exist_ok=True)
        self.dropped_bytes = 0  # bad bytes replay could not apply (skipped or cut)
        self.damage: list[JournalDamage] = []
        self._fd = -1
        # Held while the journal's descriptor is synced or swapped (by a compaction).
        self._fd_lock = threading.Lock()
        self._skipped_damage = False
        self._rows_snapshot = False  # written by an older engine: rewritten as columns
        self._load_all(repair)
        if repair and (self._skipped_damage or self._rows_snapshot):
            self.compact()

    def _load_all(self, repair: bool) -> None:
        # group → topic → queue → committed offset. Changed only through _set and
        # _unset; read through the methods below (a million queues of a group are one
        # dict, read by C loops: no tuple key a position).
        self._positions: dict[str, dict[str, dict[int, int]]] = {}
        #: group → topic → queue → time of its latest commit, changed or not (touches);
        #: only for positions that exist.
        self._times: dict[str, dict[str, dict[int, int]]] = {}
        self.history: dict[str, ChangeLog] = {}
        self.generation = 0
        self._size = 0
        self._load(repair)
        if self._fd >= 0:
            os.close(self._fd)
        # Its name must survive a power loss as much as its frames: a compaction killed
        # before fsyncing the directory left it there, or this process creates it now.
        self._fd = fileio.create_file(self._journal_path(self.generation))
        fileio.adopt(self._fd, self.directory)

    def catch_up(self) -> None:
        """Read what other processes appended (or reload after their compaction)."""
        journals = self._journals()
        if (journals and journals[-1] > self.generation) or not self._journal_path(
            self.generation
        ).exists():
            self._load_all(repair=False)
            return
        self._size = self._replay(self._journal_path(self.generation), self._size, False)

    def _journal_path(self, generation: int) -> Path:
        return self.directory / f"journal-{generation:08d}"

    def _journals(self) -> list[int]:
        return sorted(
            int(p.name[8:])
            for p in self.directory.glob("journal-*")
            if p.name[8:].isdigit() and len(p.name) == 16
        )

    def _load(self, repair: bool) -> None:
        snapshot = self.directory / "snapshot.json"
        if snapshot.exists():
            try:
                loaded = decode_snapshot(snapshot.read_bytes())
                self.generation = loaded.generation
                self._rows_snapshot = not loaded.as_columns
                self._load_snapshot(loaded)
            except (ValueError, KeyError, TypeError) as error:
                raise StoreFormatError(
                    f"{snapshot} cannot be read ({error}); restore it from a backup or "
                    "remove it to start every group from scratch"
                ) from None
        for generation in self._journals():
            path = self._journal_path(generation)
            if generation < self.generation:
                if repair:
                    fileio.unlink(path)
                continue
            self._size = self._replay(path, 0, repair)
            self.generation = generation

    def _load_snapshot(self, snapshot: Snapshot) -> None:
        """A snapshot's positions, commit times and history: what ``_set``,
        ``_committed_at`` and ``_remember`` would make of each row, a column at a time (a
        group on a million queues is a million positions, filled by C loops)."""
        for column in snapshot.columns:
            group, topic, queues, times = (
                column.group,
                column.topic,
                column.queues,
                column.committed_at,
            )
            self._positions.setdefault(group, {}).setdefault(topic, {}).update(
                zip(queues, column.offsets, strict=True)
            )
            known = dict(compress(zip(queues, times, strict=True), map(partial(le, 0), times)))
            if known:
                self._times.setdefault(group, {}).setdefault(topic, {}).update(known)
        for item in snapshot.history:
            self._remember(OffsetChange(*item))

    def _replay(self, path: Path, start: int, repair: bool) -> int:
        """Apply the journal's entries from byte ``start``; return where they end."""
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read()
        except FileNotFoundError:
            return start
        pos = 0
        while pos + _FRAME.size <= len(data):
            entry = _frame_at(data, pos)
            if entry is None:
                resume = next_frame(data, pos + 1)
                if resume is None:
                    break
                self._note_damage(path, start + pos, data[pos:resume], repair, torn=False)
                self._skipped_damage = True
                pos = resume
                continue
            self._apply(entry[0])
            pos = entry[1]
        if pos < len(data) and repair:
            self._note_damage(path, start + pos, data[pos:], repair, torn=True)
            fd = fileio.open_file(path)
            try:
                fileio.ftruncate(fd, start + pos)
                fileio.fsync(fd)
            finally:
                os.close(fd)
        return start + pos

    def _note_damage(self, path: Path, at: int, data: bytes, repair: bool, torn: bool) -> None:
        """Report bad journal bytes; a repairing opener copies them aside first."""
        kept_in = None
        if repair or not torn:
            self.dropped_bytes += len(data)
        if repair and any(data):
            kept = self.directory / f"damaged-{path.name}-{at:012d}"
            fileio.write_atomic(kept, data)
            kept_in = kept.name
        if repair or not torn:
            self.damage.append(JournalDamage(path.name, at, len(data), kept_in, torn))

    def _apply(self, entry: dict) -> None:
        if entry.get("op") == "drop_topic":
            self._drop_topic(entry["topic"])
            return
        if entry.get("op") == "drop_group":
            self._drop_group(entry["group"])
            return
        if entry.get("op") == "drop_queue":
            self._drop_queue(entry["topic"], int(entry["queue"]))
            return
        if entry.get("op") == "touch":
            group, topic, queue = entry["group"], entry["topic"], int(entry["queue"])
            self._committed_at(group, topic, queue, int(entry["time_ms"]))
            return
        change = OffsetChange(
            entry["group"],
            entry["topic"],
            int(entry["queue"]),
            entry["old"],
            int(entry["new"]),
            int(entry["time_ms"]),
            entry["who"],
            entry["reason"],
        )
        self._set(change.group, change.topic, change.queue, change.new)
        self._committed_at(change.group, change.topic, change.queue, change.time_ms)
        self._remember(change)

    def _committed_at(self, group: str, topic: str, queue: int, time_ms: int) -> None:
        if self.get(group, topic, queue) is not None:
            self._times.setdefault(group, {}).setdefault(topic, {})[queue] = time_ms

    def _set(self, group: str, topic: str, queue: int, offset: int) -> None:
        self._positions.setdefault(group, {}).setdefault(topic, {})[queue] = offset

    def _unset(self, group: str, topic: str, queue: int) -> None:
        for held in (self._positions, self._times):
            topics = held.get(group)
            queues = None if topics is None else topics.get(topic)
            if queues is None:
                continue
            queues.pop(queue, None)
            if not queues:
                del topics[topic]
                if not topics:
                    del held[group]

    def _remember(self, change: OffsetChange) -> None:
        history = self.history.get(change.group)
        if history is None:
            history = self.history[change.group] = ChangeLog()
        history.append(change)

    def _drop_group(self, group: str) -> None:
        self._positions.pop(group, None)
        self._times.pop(group, None)
        self.history.pop(group, None)

    def drop_group(self, group: str) -> bool:
        """Forget a group's offsets and history; False if it had none."""
        if group not in self._positions and group not in self.history:
            return False
        self._append({"op": "drop_group", "group": group})
        self._drop_group(group)
        self._compact_if_large()
        return True

    def _drop_queue(self, topic: str, queue: int) -> None:
        for group in self.groups_on(topic, queue):
            self._unset(group, topic, queue)

    def drop_queue(self, topic: str, queue: int) -> None:
        """Forget every group's offset on a removed queue."""
        if self.groups_on(topic, queue):
            self._append({"op": "drop_queue", "topic": topic, "queue": queue})
            self._drop_queue(topic, queue)
            self._compact_if_large()

    def drop_queues(self, topic: str, queues: range) -> None:
        """Forget every group's offset on the queues ``queues`` of ``topic`` (one look
        at the offsets, one journal write, however many queues)."""
        held = sorted(
            {
                queue
                for topics in self._positions.values()
                for queue in topics.get(topic, ())
                if queue in queues
            }
        )
        if held:
            self._append(*({"op": "drop_queue", "topic": topic, "queue": q} for q in held))
            for queue in held:
                self._drop_queue(topic, queue)
            self._compact_if_large()

    def _drop_topic(self, topic: str) -> None:
        for group in self.groups_on(topic):
            for held in (self._positions, self._times):
                topics = held.get(group)
                if topics is not None and topics.pop(topic, None) is not None and not topics:
                    del held[group]

    def _append(self, *entries: dict, durable: bool = True) -> None:
        """Write entries to the journal: together, or (after a crash cut the write short)
        a prefix of them. ``durable``: fsync now; else the caller calls ``sync`` (after
        letting go of the store's write lock)."""
        frames = []
        for entry in entries:
            payload = json.dumps(entry, separators=(",", ":")).encode()
            frames.append(_FRAME.pack(len(payload), crc32c(payload)) + payload)
        data = b"".join(frames)
        fileio.pwrite_all(self._fd, data, self._size)
        if durable:
            fileio.fdatasync(self._fd)
        self._size += len(data)

    def sync(self) -> None:
        """Make every entry written so far durable. A compaction since then made them
        durable in its snapshot already; the journal it started is synced then."""
        with self._fd_lock:
            fileio.fdatasync(self._fd)

    def get(self, group: str, topic: str, queue: int) -> int | None:
        topics = self._positions.get(group)
        queues = None if topics is None else topics.get(topic)
        return None if queues is None else queues.get(queue)

    def groups(self) -> list[str]:
        """The groups with a committed offset, in no order."""
        return list(self._positions)

    def groups_on(self, topic: str, queue: int | None = None) -> list[str]:
        """The groups with a committed offset on ``topic`` (on its ``queue`` if given)."""
        return [
            group
            for group, topics in list(self._positions.items())
            if (queues := topics.get(topic)) is not None and (queue is None or queue in queues)
        ]

    def group_positions(self, group: str, topic: str | None = None) -> dict[tuple[str, int], int]:
        """The group's committed offsets by (topic, queue), ``topic``'s only if given: a
        copy, each topic's taken in one step (a commit in another thread may run)."""
        return _flat(self._positions.get(group), topic)

    def group_commit_times(self, group: str) -> dict[tuple[str, int], int]:
        """When the group last committed on each (topic, queue), in ms: a copy."""
        return _flat(self._times.get(group), None)

    def topic_positions(self) -> Iterator[tuple[str, str, dict[int, int]]]:
        """(group, topic, queue → offset) for every group and topic: the live dicts, to
        read at once without changing them (the open's look at a million positions)."""
        for group, topics in list(self._positions.items()):
            for topic, queues in list(topics.items()):
                yield group, topic, queues

    def positions(self) -> dict[tuple[str, str, int], int]:
        """Every committed offset by (group, topic, queue): a copy."""
        return {
            (group, topic, queue): offset
            for group, topic, queues in self.topic_positions()
            for queue, offset in queues.copy().items()
        }

    def commit_times(self) -> dict[tuple[str, str, int], int]:
        """Every position's last commit time by (group, topic, queue), in ms: a copy."""
        return {
            (group, topic, queue): ms
            for group, topics in list(self._times.items())
            for topic, queues in list(topics.items())
            for queue, ms in queues.copy().items()
        }

    def commit(
        self,
        group: str,
        topic: str,
        queue: int,
        offset: int,
        who: str,
        reason: str,
        durable: bool = True,
    ) -> OffsetChange | None:
        """Record a new committed offset (durably, or with ``sync`` to follow); None when
        it equals the current one."""
        old = self.get(group, topic, queue)
        if old == offset:
            return None
        change = OffsetChange(group, topic, queue, old, offset, clock.now_ms(), who, reason)
        self._append(change._asdict(), durable=durable)
        self._set(group, topic, queue, offset)
        self._committed_at(group, topic, queue, change.time_ms)
        self._remember(change)
        self._compact_if_large()
        return change

    def commit_many(
        self,
        group: str,
        topic: str,
        offsets: dict[int, int],
        who: str,
        reason: str,
        durable: bool = True,
    ) -> list[OffsetChange]:
        """Record several queues' offsets with one journal write and one fsync (now, or
        with ``sync`` to follow)."""
        now = clock.now_ms()
        held = self._positions.get(group, {}).get(topic, {})
        changes = [
            OffsetChange(group, topic, queue, held.get(queue), offset, now, who, reason)
            for queue, offset in sorted(offsets.items())
            if held.get(queue) != offset
        ]
        if not changes:
            return []
        self._append(*(change._asdict() for change in changes), durable=durable)
        for change in changes:
            self._set(group, topic, change.queue, change.new)
            self._committed_at(group, topic, change.queue, change.time_ms)
            self._remember(change)
        self._compact_if_large()
        return changes

    def touch(self, group: str, topic: str, queue: int, durable: bool = True) -> bool:
        """Note a commit of the offset already there; journaled (True) only when the
        queue's last commit is TOUCH_INTERVAL_MS old or more."""
        if self.get(group, topic, queue) is None:
            return False
        now = clock.now_ms()
        last = self._times.get(group, {}).get(topic, {}).get(queue, 0)
        if now - last < TOUCH_INTERVAL_MS:
            return False
        self._append(
            {"op": "touch", "group": group, "topic": topic, "queue": queue, "time_ms": now},
            durable=durable,
        )
        self._committed_at(group, topic, queue, now)
        self._compact_if_large()
        return True

    def drop_topic(self, topic: str) -> None:
        """Forget every group's offsets on ``topic`` (the topic was deleted)."""
        if self.groups_on(topic):
            self._append({"op": "drop_topic", "topic": topic})
            self._drop_topic(topic)
            self._compact_if_large()

    def _compact_if_large(self) -> None:
        if self._size > self.compact_bytes:
            self.compact()

    def compact(self) -> None:
        """Start a new journal generation from a snapshot of the current state."""
        new_generation = self.generation + 1
        new_fd = fileio.create_file(self._journal_path(new_generation), truncate=True)
        fileio.fsync_dir(self.directory)
        snapshot = encode_snapshot(
            new_generation,
            self._positions,
            self._times,
            (change for changes in self.history.values() for change in changes),
        )
        fileio.write_atomic(self.directory / "snapshot.json", snapshot)
        with self._fd_lock:
            os.close(self._fd)
            self._fd = new_fd
        fileio.unlink(self._journal_path(self.generation))
        fileio.fsync_dir(self.directory)
        self._size, self.generation = 0, new_generation

    def close(self) -> None:
        with self._fd_lock:
            os.close(self._fd)


def _frame_at(data: bytes, pos: int) -> tuple[dict, int] | None:
    """The entry of the frame at ``pos`` and where the frame ends, or None if it fails
    its length, CRC or JSON check."""
    if pos + _FRAME.size > len(data):
        return None
    length, crc = _FRAME.unpack_from(data, pos)
    end = pos + _FRAME.size + length
    if length == 0 or end > len(data):
        return None
    payload = data[pos + _FRAME.size : end]
    if crc32c(payload) != crc:
        return None
    try:
        entry = json.loads(payload)
    except ValueError:
        return None
    return (entry, end) if isinstance(entry, dict) else None


def next_frame(data: bytes, start: int) -> int | None:
    """Where the first frame that validates after ``start`` begins (entries are JSON
    objects: a frame's payload starts with ``{"``), or None."""
    search = start + _FRAME.size
    while True:
        hit = data.find(b'{"', search)
        if hit < 0:
            return None
        if _frame_at(data, hit - _FRAME.size) is not None:
            return hit - _FRAME.size
        search = hit + 1
