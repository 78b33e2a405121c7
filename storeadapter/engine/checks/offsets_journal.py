"""Consumer offsets (``offsets/``): the snapshot, every frame of every journal, and the
committed offsets they add up to against the topics and their queues' ends."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from ..metadata import TopicInfo
from ..offsets import next_frame as next_valid_frame
from ..offsetsnapshot import decode_snapshot
from .problems import Findings

KIND = "offsets"
SNAPSHOT = "snapshot.json"
_FRAME = struct.Struct("<II")  # payload length, CRC32C of the payload
_JOURNAL_PREFIX = "journal-"


@dataclass
class Offsets:
    """The committed offsets the journals add up to, and the queues they say were removed
    (their records stay in the log past the topic's queue count)."""

    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    removed_queues: set[tuple[str, int]] = field(default_factory=set)

    def apply(self, entry: object) -> None:
        """Apply one journal entry, as the engine replays it; ValueError if it is none."""
        if not isinstance(entry, dict):
            raise ValueError("not a JSON object")
        op = entry.get("op")
        if op == "drop_topic":
            (topic,) = _fields(entry, "topic")
            self._drop(lambda key: key[1] == topic)
        elif op == "drop_group":
            (group,) = _fields(entry, "group")
            self._drop(lambda key: key[0] == group)
        elif op == "drop_queue":
            topic, queue = _fields(entry, "topic", "queue")
            queue = _integer(queue)
            self._drop(lambda key: key[1] == topic and key[2] == queue)
            self.removed_queues.add((topic, queue))
        elif op == "touch":
            _fields(entry, "group", "topic", "queue", "time_ms")
        else:
            group, topic, queue, new = _fields(entry, "group", "topic", "queue", "new")
            _fields(entry, "old", "time_ms", "who", "reason")
            self.committed[(group, topic, _integer(queue))] = _integer(new)

    def _drop(self, doomed: Callable[[tuple[str, str, int]], bool]) -> None:
        for key in [key for key in self.committed if doomed(key)]:
            del self.committed[key]


def _fields(entry: dict, *names: str) -> list:
    missing = [name for name in names if name not in entry]
    if missing:
        raise ValueError(f"no {', '.join(missing)}")
    return [entry[name] for name in names]


def _integer(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    return value


def check_offsets(
    store: Path,
    topics: Mapping[str, TopicInfo] | None,
    queue_ends: Mapping[tuple[str, int], int],
) -> tuple[Findings, Offsets]:
    """Check ``store``'s offsets snapshot and journals; then each committed offset
    against ``topics`` (None: unknown) and ``queue_ends`` ((topic, queue) -> end)."""
    findings = Findings(KIND)
    offsets = Offsets()
    directory = store / "offsets"
    generation = _load_snapshot(directory / SNAPSHOT, offsets, findings)
    for number, path in _journals(directory):
        name = f"offsets/{path.name}"
        if number < generation:
            findings.note(
                name,
                f"older than the snapshot's generation ({generation}): a compaction's leftover, "
                "which the next open deletes",
            )
            continue
        findings.count("journals")
        _check_journal(path.read_bytes(), name, offsets, findings)
    findings.counts["offsets"] = len(offsets.committed)
    _check_committed(offsets, topics, queue_ends, findings)
    return findings, offsets


def _journals(directory: Path) -> list[tuple[int, Path]]:
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    prefix = len(_JOURNAL_PREFIX)
    return sorted(
        (int(name[prefix:]), directory / name)
        for name in names
        if name.startswith(_JOURNAL_PREFIX) and len(name) == prefix + 8 and name[prefix:].isdigit()
    )


def _load_snapshot(path: Path, offsets: Offsets, findings: Findings) -> int:
    """Load the snapshot into ``offsets``; return its generation (0 without one)."""
    try:
        snapshot = decode_snapshot(path.read_bytes())
        for column in snapshot.columns:
            group, topic = column.group, column.topic
            offsets.committed.update(
                ((group, topic, queue), offset)
                for queue, offset in zip(column.queues, column.offsets, strict=True)
            )
    except FileNotFoundError:
        return 0
    except (ValueError, KeyError, TypeError) as error:
        findings.damage(
            f"offsets/{SNAPSHOT}", f"cannot be read ({error}): the store refuses to open"
        )
        return 0
    return snapshot.generation


def _check_journal(data: bytes, name: str, offsets: Offsets, findings: Findings) -> None:
    """Check every frame; apply the valid ones. After a bad frame, the check goes on at
    the next valid frame, where replay goes on: damage is reported with its byte
    position."""
    pos = 0
    while pos < len(data):
        length, reason = _frame_at(data, pos)
        if reason is None:
            payload = data[pos + _FRAME.size : pos + _FRAME.size + length]
            try:
                offsets.apply(json.loads(payload))
            except (ValueError, TypeError) as error:
                findings.damage(
                    name,
                    f"a frame passes its CRC32C but holds no offset change ({error})",
                    pos,
                    "byte",
                )
            findings.count("frames")
            pos += _FRAME.size + length
            continue
        resume = next_valid_frame(data, pos + 1)
        if resume is not None:
            findings.damage(
                name,
                f"a bad frame ({reason}): {resume - pos} bytes up to the next valid frame",
                pos,
                "byte",
            )
            pos = resume
            continue
        if _torn(data, pos, length):
            findings.note(
                name,
                f"a torn tail: its last {len(data) - pos} bytes are a frame cut short (a commit "
                "a crash interrupted, never acknowledged; the next open cuts it)",
                pos,
                "byte",
            )
        else:
            findings.damage(name, f"a bad last frame ({reason})", pos, "byte")
        return


def _frame_at(data: bytes, pos: int) -> tuple[int, str | None]:
    """The frame's payload length, and what is wrong with it (None: it is valid)."""
    if pos + _FRAME.size > len(data):
        return 0, f"{len(data) - pos} bytes, shorter than a frame header"
    length, crc = _FRAME.unpack_from(data, pos)
    if length == 0:
        return 0, "length 0"
    if pos + _FRAME.size + length > len(data):
        return length, f"length {length} runs past the end of the file"
    if crc32c(data[pos + _FRAME.size : pos + _FRAME.size + length]) != crc:
        return length, "CRC32C mismatch"
    return length, None


def _torn(data: bytes, pos: int, length: int) -> bool:
    """Whether the bad bytes at ``pos`` look like an append cut short: a header or a
    payload that runs past the end, or zeros to the end."""
    return (
        pos + _FRAME.size > len(data)
        or pos + _FRAME.size + length > len(data)
        or not any(data[pos:])
    )


def _check_committed(
    offsets: Offsets,
    topics: Mapping[str, TopicInfo] | None,
    queue_ends: Mapping[tuple[str, int], int],
    findings: Findings,
) -> None:
    for (group, topic, queue), offset in sorted(offsets.committed.items()):
        where = f"group {group} on {topic}/{queue}"
        info = topics.get(topic) if topics is not None else None
        if topics is not None and info is None:
            findings.damage(
                "offsets",
                f"{where}: an offset on a topic topics.json does not have (a topic created "
                "again under the name would start from it)",
            )
        elif info is not None and queue >= info.queues:
            findings.damage(
                "offsets",
                f"{where}: an offset on a queue {topic} does not have (it has {info.queues})",
            )
        elif (topic, queue) in queue_ends and offset > queue_ends[(topic, queue)]:
            findings.damage(
                "offsets",
                f"{where}: committed offset {offset} is past the queue's end "
                f"({queue_ends[(topic, queue)]}): the messages that take the offsets between "
                "never reach the group",
            )
