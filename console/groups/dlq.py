"""A group's dead letters (its ``%DLQ%<group>`` topic), for the DLQ page and the API alike.

A message that fails its last try is copied to the DLQ; redriven, it is appended to its
topic again as a new message, and if that fails too a second copy arrives, whose origin is
the redriven message. So the DLQ holds *copies*; the page and the API show *dead
messages*: the copies grouped by the original message, found by following each redrive
(``RedrivenLetter``: which copy was sent, where it landed) back to the first origin.
"Redrive all" sends each dead message's latest copy unless it was already redriven; a
redriven copy is marked with when, by whom, and where it was sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from django.db import transaction

from console.audit.log import record
from console.audit.models import RedrivenLetter
from console.operations import groups as operations
from storeadapter.engine import (
    LAST_ERROR,
    ORIGIN_MESSAGE_ID,
    ORIGIN_QUEUE,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_TOPIC,
    RETRY_COUNT,
    MessageStore,
    StoredMessage,
    StoreError,
    TopicNotFoundError,
    dlq_topic,
)

BODY_PREVIEW_CHARS = 80
#: The most message ids one redrive takes, on the DLQ page and through the API; more at
#: once is a redrive of all.
MAX_REDRIVE_IDS = 500


def dlq_exists(store: MessageStore, group: str) -> bool:
    """Whether the group's DLQ topic exists (False for a name that is not a group name)."""
    try:
        store.topic(dlq_topic(group))
    except StoreError:
        return False
    return True


class DlqMessages:
    """The DLQ topic's messages as a sequence a paginator slices; reads only a page."""

    def __init__(self, store: MessageStore, topic: str) -> None:
        self.store = store
        self.topic = topic
        try:
            queues = store.topic(topic).queues
        except TopicNotFoundError:
            queues = 0
        self.ranges = [(q, *store.queue_range(topic, q)) for q in range(queues)]
        self.total = sum(high - low for _, low, high in self.ranges)

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, wanted: slice) -> list[StoredMessage]:
        if not isinstance(wanted, slice):
            raise TypeError("DLQ messages are read by page")
        start, stop, _ = wanted.indices(self.total)
        found: list[StoredMessage] = []
        skip = start
        for queue, low, high in self.ranges:
            if len(found) >= stop - start:
                break
            if skip >= high - low:
                skip -= high - low
                continue
            offset, skip = low + skip, 0
            while offset < high and len(found) < stop - start:
                result = self.store.read_result(
                    self.topic, queue, offset, stop - start - len(found)
                )
                found.extend(result.messages)
                if result.next_offset <= offset:
                    break
                offset = result.next_offset
        return found


def dlq_row(message: StoredMessage) -> dict:
    """A dead letter for the DLQ page: its origin and retry properties as stored (text)."""
    props = message.properties
    body = message.body.decode("utf-8", errors="replace")
    return {
        "message_id": message.message_id,
        "queue": message.queue,
        "offset": message.queue_offset,
        "store_time_ms": message.store_time_ms,
        "origin_topic": props.get(ORIGIN_TOPIC),
        "origin_queue": props.get(ORIGIN_QUEUE),
        "origin_offset": props.get(ORIGIN_QUEUE_OFFSET),
        "last_error": props.get(LAST_ERROR, ""),
        "retry_count": props.get(RETRY_COUNT),
        "keys": message.keys,
        "body_preview": body[:BODY_PREVIEW_CHARS] + ("…" if len(body) > BODY_PREVIEW_CHARS else ""),
    }


def dead_letter_origin(message: StoredMessage) -> dict:
    """Where a dead letter came from and why it died, numbers as numbers (None when the
    property is missing or not a number)."""
    props = message.properties
    return {
        "origin_topic": props.get(ORIGIN_TOPIC),
        "origin_queue": _number(props.get(ORIGIN_QUEUE)),
        "origin_offset": _number(props.get(ORIGIN_QUEUE_OFFSET)),
        "origin_message_id": props.get(ORIGIN_MESSAGE_ID),
        "retry_count": _number(props.get(RETRY_COUNT)),
        "last_error": props.get(LAST_ERROR, ""),
    }


def _number(text: str | None) -> int | None:
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    return int(text)


# ------------------------------------------------------------------ dead messages


class Place(NamedTuple):
    """Where a message sits."""

    topic: str
    queue: int
    queue_offset: int


@dataclass(frozen=True)
class DeadCopy:
    """A copy of a dead message in the DLQ, and its redrive (None: not redriven)."""

    message_id: str
    store_time_ms: int
    redriven: RedrivenLetter | None


@dataclass
class DeadMessage:
    """One original message and every copy of it in the DLQ, oldest first."""

    original: Place | None
    copies: list[StoredMessage] = field(default_factory=list)
    redrives: dict[str, RedrivenLetter] = field(default_factory=dict)

    @property
    def latest(self) -> StoredMessage:
        return self.copies[-1]

    @cached_property
    def origin(self) -> dict:
        """Where its latest copy came from and why it died (``dead_letter_origin``)."""
        return dead_letter_origin(self.latest)

    @property
    def marked_copies(self) -> list[DeadCopy]:
        """Its copies, oldest first, each with its redrive."""
        return [
            DeadCopy(copy.message_id, copy.store_time_ms, self.redrives.get(copy.message_id))
            for copy in self.copies
        ]

    @property
    def waiting(self) -> bool:
        """Whether its latest copy can be redriven: it has an origin and was not sent yet."""
        latest = self.latest
        return (
            latest.properties.get(ORIGIN_TOPIC) is not None
            and latest.message_id not in self.redrives
        )


def _origin(message: StoredMessage) -> Place | None:
    props = message.properties
    queue, offset = _number(props.get(ORIGIN_QUEUE)), _number(props.get(ORIGIN_QUEUE_OFFSET))
    topic = props.get(ORIGIN_TOPIC)
    if topic is None or queue is None or offset is None:
        return None
    return Place(topic, queue, offset)


def dead_letter_copies(store: MessageStore, group: str) -> list[StoredMessage]:
    """Every copy in the group's DLQ, in DLQ order (queue, then offset), as the redrive
    reads them."""
    listing = DlqMessages(store, dlq_topic(group))
    return listing[0 : len(listing)]


def dead_messages(store: MessageStore, group: str) -> list[DeadMessage]:
    """The group's dead messages, in the order they first died."""
    copies = dead_letter_copies(store, group)
    redrives = list(RedrivenLetter.objects.filter(group=group))
    by_copy = {r.dlq_message_id: r for r in redrives}
    # A message a redrive sent → the place the copy it was sent from came from.
    came_from: dict[Place, Place] = {
        (r.sent_topic, r.sent_queue, r.sent_offset): Place(
            r.origin_topic, r.origin_queue, r.origin_offset
        )
        for r in redrives
    }
    found: dict[Any, DeadMessage] = {}
    for copy in sorted(copies, key=lambda m: (m.store_time_ms, m.queue, m.queue_offset)):
        place = _origin(copy)
        seen: set[Place] = set()
        while place in came_from and place not in seen:
            seen.add(place)
            place = came_from[place]
        key: Any = place if place is not None else copy.message_id
        dead = found.setdefault(key, DeadMessage(original=place))
        dead.copies.append(copy)
        if copy.message_id in by_copy:
            dead.redrives[copy.message_id] = by_copy[copy.message_id]
    return list(found.values())  # in the order they first died


def redriven_mark(letter: RedrivenLetter | None) -> dict | None:
    """A redriven copy's mark (when, by whom, where it went), for the page and the API."""
    if letter is None:
        return None
    return {
        "at": letter.redriven_at,
        "by": letter.who,
        "message_id": letter.sent_message_id,
        "topic": letter.sent_topic,
        "queue": letter.sent_queue,
        "queue_offset": letter.sent_offset,
    }


def dead_message_row(dead: DeadMessage) -> dict:
    """A dead message for the DLQ page: its latest copy's row, its original, its copies."""
    topic, queue, offset = dead.original or (None, None, None)
    return {
        **dlq_row(dead.latest),
        "original_topic": topic,
        "original_queue": queue,
        "original_offset": offset,
        "copy_count": len(dead.copies),
        "waiting": dead.waiting,
        "copies": [
            {
                "message_id": copy.message_id,
                "store_time_ms": copy.store_time_ms,
                "redriven": redriven_mark(dead.redrives.get(copy.message_id)),
            }
            for copy in dead.copies
        ],
    }


# ------------------------------------------------------------------ redrive, purge


class NothingWaiting(Exception):
    """Redrive all found no dead message whose latest copy was not redriven already; the
    message says so in the operator's words."""


def redrive(
    user: Any, store: MessageStore, group: str, message_ids: Iterable[str] | None
) -> operations.Redriven:
    """Send copies back to their topics and mark them: the given ids, or for all (None)
    each dead message's latest copy not yet redriven (NothingWaiting when there is none,
    or no dead letter at all)."""
    if message_ids is None:
        dead = dead_messages(store, group)
        chosen = [d.latest.message_id for d in dead if d.waiting]
        if not dead:
            raise NothingWaiting("There were no dead letters to redrive.")
        if not chosen:
            raise NothingWaiting(
                "Every dead message was redriven since it last failed; nothing was sent."
            )
    else:
        chosen = list(dict.fromkeys(message_ids))
    outcome = operations.redrive(user, group, chosen)
    wanted = set(chosen)
    # The engine sends the copies with an origin, in DLQ order, one result each.
    sent_copies = [
        m
        for m in dead_letter_copies(store, group)
        if m.message_id in wanted and m.properties.get(ORIGIN_TOPIC) is not None
    ]
    marked = set(
        RedrivenLetter.objects.filter(group=group, dlq_message_id__in=wanted).values_list(
            "dlq_message_id", flat=True
        )
    )
    who = user.get_username() if user is not None and user.is_authenticated else ""
    letters = []
    for copy, result in zip(sent_copies, outcome.results, strict=False):
        place = _origin(copy)
        if place is None or copy.message_id in marked:
            continue
        letters.append(
            RedrivenLetter(
                group=group,
                dlq_message_id=copy.message_id,
                origin_topic=place[0],
                origin_queue=place[1],
                origin_offset=place[2],
                sent_message_id=result.message_id,
                sent_topic=result.topic,
                sent_queue=result.queue,
                sent_offset=result.queue_offset,
                who=who,
            )
        )
    RedrivenLetter.objects.bulk_create(letters)
    return outcome


@dataclass(frozen=True)
class Purged:
    messages: int
    copies: int

    def sentence(self, group: str) -> str:
        noun = "dead message" if self.messages == 1 else "dead messages"
        copies = "copy" if self.copies == 1 else "copies"
        return f"Purged {self.messages:,} {noun} ({self.copies:,} {copies}) of {group}."


def purge_sentence_refused(group: str) -> str:
    return f"Type the group's name, {group}, to purge its dead letters. Nothing was deleted."


def purge(user: Any, store: MessageStore, group: str) -> Purged:
    """Delete the group's DLQ topic (every copy) and its redrive marks; audited."""
    dead = dead_messages(store, group)
    purged = Purged(messages=len(dead), copies=sum(len(d.copies) for d in dead))
    topic = dlq_topic(group)
    if dlq_exists(store, group):
        store.delete_topic(topic)
    with transaction.atomic():
        RedrivenLetter.objects.filter(group=group).delete()
        record(
            user,
            "dlq.purge",
            f"group {group}",
            before={"messages": purged.messages, "copies": purged.copies},
            detail=purged.sentence(group),
        )
    return purged
