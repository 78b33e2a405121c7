"""What a read's offsets mean in one store at one moment: ``startingOffsets`` and
``endingOffsets`` turned into commit-log positions and per-queue bounds, data loss
(offsets retention has deleted) found and measured, and the per-queue offsets a
stream's position covers (for its checkpoint, readable by a person).
"""

from __future__ import annotations

import logging

from .errors import DataLossError
from .logview import LogSnapshot, TopicView
from .options import EARLIEST, JSON_EARLIEST, JSON_LATEST, LATEST, OffsetSpec
from .planning import RecordFilter
from .queueindex import QueueIndex

log = logging.getLogger(__name__)

#: A stream's offsets list per-queue offsets for reads of at most this many queues.
MAX_LISTED_QUEUES = 1024
_LOSS_HINT = (
    'set .option("failOnDataLoss", "false") to go on from the oldest record the store still has'
)


def _queue_topic(spec: OffsetSpec, snap: LogSnapshot, chosen: dict[str, TopicView], what: str):
    for name in spec.queues:
        if name not in snap.topics:
            raise ValueError(f"{what} names topic {name!r}, which the store at {snap.path} lacks")
        if name not in chosen:
            raise ValueError(
                f"{what} names topic {name!r}, which the read does not include (see the "
                "topics option)"
            )
        topic = chosen[name]
        if not QueueIndex.supported(topic):
            raise ValueError(
                f"{what} gives offsets per queue for topic {name!r}, whose queues share block "
                "files (a topic of very many queues): give a commit-log position instead"
            )
        for queue in spec.queues[name]:
            if queue >= topic.queues:
                raise ValueError(
                    f"{what} names queue {queue} of topic {name!r}, which has {topic.queues}"
                )
        yield topic


def resolve_start(
    spec: OffsetSpec,
    snap: LogSnapshot,
    index: QueueIndex,
    chosen: dict[str, TopicView],
    fail_on_data_loss: bool,
    what: str = "startingOffsets",
) -> tuple[int, dict[str, dict[int, int]]]:
    """The position to read from, and the first queue offset to keep per named queue.
    ``DataLossError`` when the offsets ask for records retention deleted (unless
    ``fail_on_data_loss`` is false: then the read starts at the oldest left)."""
    if spec.kind == EARLIEST:
        return snap.min_offset, {}
    if spec.kind == LATEST:
        return snap.end, {}
    if spec.kind == "position":
        position = int(spec.position or 0)
        if position > snap.end:
            raise ValueError(
                f"{what} {position} is past the end of the log at {snap.path} ({snap.end})"
            )
        if position < snap.min_offset:
            _lost(
                f"{what} {position} is below the log's first offset {snap.min_offset}: "
                "retention deleted the records between",
                fail_on_data_loss,
            )
            position = snap.min_offset
        return position, {}
    starts: dict[str, dict[int, int]] = {}
    positions: list[int] = []
    named = 0
    for topic in _queue_topic(spec, snap, chosen, what):
        for queue, asked in spec.queues[topic.name].items():
            low = index.offset_at(topic, queue, snap.min_offset)
            high = index.range_of(topic, queue)[1]
            offset = {JSON_EARLIEST: low, JSON_LATEST: high}.get(asked, asked)
            if offset > high:
                raise ValueError(
                    f"{what} asks for offset {offset} of queue {queue} of topic "
                    f"{topic.name!r}, past its end {high}"
                )
            if offset < low:
                _lost(
                    f"{what} asks for offset {offset} of queue {queue} of topic "
                    f"{topic.name!r}, but retention deleted its records below {low} "
                    f"({low - offset} messages)",
                    fail_on_data_loss,
                )
                offset = low
            starts.setdefault(topic.name, {})[queue] = offset
            found = index.position_of(topic, queue, offset)
            positions.append(snap.end if found is None else found)
            named += 1
    every = sum(t.queues for t in chosen.values())
    start = min(positions) if named == every and positions else snap.min_offset
    return start, starts


def resolve_end(
    spec: OffsetSpec,
    snap: LogSnapshot,
    index: QueueIndex,
    chosen: dict[str, TopicView],
) -> tuple[int, dict[str, dict[int, int]]]:
    """The position to read up to, and the first queue offset not read per named queue."""
    what = "endingOffsets"
    if spec.kind == LATEST:
        return snap.end, {}
    if spec.kind == EARLIEST:
        raise ValueError('endingOffsets cannot be "earliest" (it would read nothing)')
    if spec.kind == "position":
        position = int(spec.position or 0)
        if position > snap.end:
            raise ValueError(
                f"endingOffsets {position} is past the end of what the read can see in "
                f"{snap.path} ({snap.end})"
            )
        return position, {}
    ends: dict[str, dict[int, int]] = {}
    positions: list[int] = []
    named = 0
    for topic in _queue_topic(spec, snap, chosen, what):
        for queue, asked in spec.queues[topic.name].items():
            high = index.range_of(topic, queue)[1]
            if asked == JSON_EARLIEST:
                raise ValueError("endingOffsets cannot give -2 (earliest) for a queue")
            offset = high if asked == JSON_LATEST else asked
            if offset > high:
                raise ValueError(
                    f"endingOffsets asks for offset {offset} of queue {queue} of topic "
                    f"{topic.name!r}, past its end {high}"
                )
            ends.setdefault(topic.name, {})[queue] = offset
            found = index.position_of(topic, queue, offset)
            positions.append(snap.end if found is None else found)
            named += 1
    every = sum(t.queues for t in chosen.values())
    end = max(positions) if named == every and positions else snap.end
    return end, ends


def _lost(sentence: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"{sentence}; {_LOSS_HINT}")
    log.warning("failOnDataLoss is false: %s; going on", sentence)


def covered(
    snap: LogSnapshot, index: QueueIndex, wanted: RecordFilter, position: int
) -> dict[str, dict[str, int]] | None:
    """Per topic and queue of ``wanted``, the last queue offset whose record starts below
    ``position`` (-1: none); None when the read has too many queues to list, or queues
    that share block files."""
    if wanted.member_count() > MAX_LISTED_QUEUES:
        return None
    queues = wanted.member_queues(snap.topics)
    if not all(index.supported(t) for t, _ in queues):
        return None
    listed: dict[str, dict[str, int]] = {}
    for topic, queue in queues:
        listed.setdefault(topic.name, {})[str(queue)] = index.offset_at(topic, queue, position) - 1
    return listed


def skipped_by_retention(
    snap: LogSnapshot, index: QueueIndex, listed: dict[str, dict[str, int]] | None
) -> int | None:
    """How many messages retention deleted past the per-queue offsets ``listed`` (a
    stream's last ``covered``); None when they are not listed."""
    if listed is None:
        return None
    skipped = 0
    for name, per_queue in listed.items():
        topic = snap.topics.get(name)
        if topic is None or not index.supported(topic):
            continue
        for queue, last in per_queue.items():
            if int(queue) < topic.queues:
                first = index.offset_at(topic, int(queue), snap.min_offset)
                skipped += max(0, first - (int(last) + 1))
    return skipped


__all__ = [
    "MAX_LISTED_QUEUES",
    "covered",
    "resolve_end",
    "resolve_start",
    "skipped_by_retention",
]
