"""Dead letters: the properties a retried or dead-lettered copy carries, and the redrive.

A handler that raises sends the message to its group's retry topic ``%RETRY%<group>``
with the properties in ``RETRY_PROPERTIES`` (the consumer, ``consumer.py``); after its
last retry it goes to ``%DLQ%<group>``, from where ``redrive_dlq`` sends it back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from .errors import MessageNotFoundError, TopicNotFoundError
from .names import DEDUP_PROPERTY, dlq_topic
from .results import AppendResult, StoredMessage
from .store import MessageStore

log = logging.getLogger(__name__)

ORIGIN_TOPIC = "ORIGIN_TOPIC"
ORIGIN_QUEUE = "ORIGIN_QUEUE"
ORIGIN_QUEUE_OFFSET = "ORIGIN_QUEUE_OFFSET"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RETRY_COUNT = "RETRY_COUNT"
RETRY_AT_MS = "RETRY_AT_MS"
LAST_ERROR = "LAST_ERROR"
RETRY_PROPERTIES = (
    ORIGIN_TOPIC,
    ORIGIN_QUEUE,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_MESSAGE_ID,
    RETRY_COUNT,
    RETRY_AT_MS,
    LAST_ERROR,
)


def redrive_dlq(
    store: MessageStore | str | os.PathLike,
    group: str,
    message_ids: Iterable[str] | None = None,
) -> list[AppendResult]:
    """Send dead-lettered messages of ``group`` back to their original topics.

    All of ``%DLQ%<group>``, or only the messages with ``message_ids`` (ids in the DLQ;
    MessageNotFoundError, before anything is sent, for one that is not there). Each goes
    back with its original key, tag and properties (the retry bookkeeping removed), as
    ``dedup_id="redrive:<dlq message id>"``: redriving a message twice sends it once.
    Messages stay in the DLQ. Returns the append results, in DLQ order.
    """
    if not isinstance(store, MessageStore):
        with MessageStore.open(store) as opened:
            return redrive_dlq(opened, group, message_ids)
    topic = dlq_topic(group)
    wanted = None if message_ids is None else set(message_ids)
    try:
        queue_count = store.topic(topic).queues
    except TopicNotFoundError:
        queue_count = 0
    picked: list[StoredMessage] = []
    for queue in range(queue_count):
        offset, end = store.queue_range(topic, queue)
        while offset < end:
            result = store.read_result(topic, queue, offset, 256)
            picked.extend(m for m in result.messages if wanted is None or m.message_id in wanted)
            if result.next_offset <= offset:
                break
            offset = result.next_offset
    if wanted is not None:
        missing = wanted - {m.message_id for m in picked}
        if missing:
            raise MessageNotFoundError(
                f"not in {topic}: {', '.join(sorted(missing))} (already deleted by "
                "retention, or not a dead-lettered message of this group)"
            )
    results = []
    for message in picked:
        origin = message.properties.get(ORIGIN_TOPIC)
        if origin is None:
            log.warning("%s in %s has no %s; skipped", message.message_id, topic, ORIGIN_TOPIC)
            continue
        properties = {
            k: v
            for k, v in message.properties.items()
            if k not in RETRY_PROPERTIES and k != DEDUP_PROPERTY
        }
        results.append(
            store.append(
                origin,
                message.body,
                key=list(message.keys) or None,
                tag=message.tag,
                properties=properties or None,
                dedup_id=f"redrive:{message.message_id}",
            )
        )
    return results


__all__ = [
    "LAST_ERROR",
    "ORIGIN_MESSAGE_ID",
    "ORIGIN_QUEUE",
    "ORIGIN_QUEUE_OFFSET",
    "ORIGIN_TOPIC",
    "RETRY_AT_MS",
    "RETRY_COUNT",
    "RETRY_PROPERTIES",
    "redrive_dlq",
]
