"""Was this message consumed by group X? (issue 34, item 3: RocketMQ Dashboard's message
track, from the committed offsets alone, so it is instant).

For every group with committed offsets on the message's topic, its state in the message's
queue, by the group's committed offset (the next offset it reads; a queue it never
committed on is read from its first offset, storeadapter/lagrule.py):

- ``CONSUMED``: the committed offset is past the message;
- ``NOT_YET``: it is not; ``before`` says how many of the queue's messages before this one
  the group still has to consume;
- ``LOST_TO_RETENTION``: retention deleted the message before the group got to it.

And the group's retry and dead-letter copies of it (``%RETRY%<group>``, ``%DLQ%<group>``,
made by the engine's consumer with the message's id in ``ORIGIN_MESSAGE_ID``): found
among the copies' topic's messages with the message's first key (the key index) or, for a
message without keys, among the first ``COPY_SCAN`` stored from the message's store time
on. A retry copy is ``CONSUMED`` or ``NOT_YET`` by the group as above; a dead-lettered
copy is ``DEAD_LETTERED``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storeadapter.engine import (
    ORIGIN_MESSAGE_ID,
    RETRY_COUNT,
    MessageStore,
    QueueNotFoundError,
    StoredMessage,
    TopicNotFoundError,
    dlq_topic,
    retry_topic,
)

CONSUMED = "CONSUMED"
NOT_YET = "NOT_YET"
LOST = "LOST_TO_RETENTION"
DEAD_LETTERED = "DEAD_LETTERED"
STATES = (CONSUMED, NOT_YET, LOST, DEAD_LETTERED)

#: How many messages of a copies' topic are read to find the copies of a message without
#: keys (per topic), and how many with its key are looked at.
COPY_SCAN = 1000


@dataclass(frozen=True)
class Position:
    """Where a group stands with one message of one of its queues."""

    state: str
    #: The group's committed offset in the queue; None: it never committed there.
    committed: int | None
    #: NOT_YET: the queue's messages before this one the group has still to consume.
    before: int = 0


@dataclass(frozen=True)
class Copy:
    """A retry or dead-letter copy of the message, and its state."""

    message_id: str
    topic: str
    queue: int
    queue_offset: int
    state: str
    #: How many times the message was retried when the copy was made.
    retries: int | None


@dataclass(frozen=True)
class GroupTrack:
    group: str
    state: str
    committed: int | None
    before: int
    copies: list[Copy] = field(default_factory=list)


def position(committed: int | None, low: int, offset: int) -> Position:
    """The state of the message at ``offset`` of a queue whose first kept offset is ``low``
    for a group that committed ``committed`` there (None: never)."""
    if committed is not None and offset < committed:
        return Position(CONSUMED, committed)
    if offset < low:
        return Position(LOST, committed)
    start = low if committed is None else max(committed, low)
    return Position(NOT_YET, committed, offset - start)


def consuming_groups(store: MessageStore, topic: str) -> list[str]:
    """The groups with committed offsets on ``topic``, by name."""
    return sorted(g for g in store.groups() if store.committed_offsets(g, topic))


def _queue_position(store: MessageStore, group: str, topic: str, queue: int, offset: int):
    try:
        low, _ = store.queue_range(topic, queue)
    except (TopicNotFoundError, QueueNotFoundError):
        low = offset  # the queue is gone: what the group committed says it all
    return position(store.committed_offset(group, topic, queue), low, offset)


def _candidates(store: MessageStore, topic: str, message: StoredMessage) -> list[StoredMessage]:
    if message.keys:
        return store.query_by_key(
            topic, message.keys[0], begin_ms=message.store_time_ms, limit=COPY_SCAN
        )
    found: list[StoredMessage] = []
    for queue in range(store.topic(topic).queues):
        start = store.offset_for_time(topic, queue, message.store_time_ms)
        found += store.read(topic, queue, start, max_messages=COPY_SCAN - len(found))
        if len(found) >= COPY_SCAN:
            break
    return found


def copies_of(store: MessageStore, group: str, message: StoredMessage) -> list[Copy]:
    """The group's retry and dead-letter copies of ``message``, oldest first."""
    names = {info.name for info in store.topics()}
    copies = []
    for topic in (retry_topic(group), dlq_topic(group)):
        if topic not in names:
            continue
        for copy in _candidates(store, topic, message):
            if copy.properties.get(ORIGIN_MESSAGE_ID) != message.message_id:
                continue
            if topic == retry_topic(group):
                state = _queue_position(store, group, topic, copy.queue, copy.queue_offset).state
            else:
                state = DEAD_LETTERED
            retries = copy.properties.get(RETRY_COUNT, "")
            copies.append(
                Copy(
                    copy.message_id,
                    topic,
                    copy.queue,
                    copy.queue_offset,
                    state,
                    int(retries) if retries.isdigit() else None,
                )
            )
    return sorted(copies, key=lambda c: (c.topic.startswith("%DLQ%"), c.queue_offset))


def track(
    store: MessageStore, message: StoredMessage, groups: list[str] | None = None
) -> list[GroupTrack]:
    """Each group consuming the message's topic (or each of ``groups``), by name, with its
    state for ``message`` and its copies of it."""
    names = consuming_groups(store, message.topic) if groups is None else groups
    tracks = []
    for group in names:
        where = _queue_position(store, group, message.topic, message.queue, message.queue_offset)
        copies = copies_of(store, group, message)
        tracks.append(GroupTrack(group, where.state, where.committed, where.before, copies))
    return tracks
