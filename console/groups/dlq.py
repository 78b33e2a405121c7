"""A group's dead letters (its ``%DLQ%<group>`` topic), for the DLQ page and the API alike."""

from __future__ import annotations

from storeadapter.engine import (
    MessageStore,
    StoredMessage,
    StoreError,
    TopicNotFoundError,
    dlq_topic,
)
from storeadapter.engine.consumer import (
    LAST_ERROR,
    ORIGIN_MESSAGE_ID,
    ORIGIN_QUEUE,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_TOPIC,
    RETRY_COUNT,
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
