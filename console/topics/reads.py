"""What the topic pages read from the store beyond ``storeadapter.summaries``.

``latest_messages`` is a private helper of this app: storeadapter has no "newest messages
of a topic" function yet.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from storeadapter.engine import MessageStore, StoredMessage
from storeadapter.summaries import QueueRow

PREVIEW_CHARS = 80


@dataclass(frozen=True)
class MessagePreview:
    message_id: str
    queue: int
    offset: int
    keys: list[str]
    tag: str | None
    store_time_ms: int
    body_preview: str
    body_bytes: int


def body_preview(body: bytes, limit: int = PREVIEW_CHARS) -> str:
    """The body as one line of text, cut to ``limit`` characters; binary bodies say so."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"(binary, {len(body)} bytes)"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def latest_messages(
    store: MessageStore, topic: str, rows: list[QueueRow], limit: int = 20
) -> list[MessagePreview]:
    """The newest ``limit`` messages across the topic's queues, newest store time first.

    Queues are visited newest last write first, reading each one's last ``limit``
    messages; the walk stops at a queue whose last write is older than the oldest message
    kept so far, as nothing in it or after it can make the list.
    """
    candidates = sorted(
        (row for row in rows if row.messages > 0 and row.last_write_ms is not None),
        key=lambda row: row.last_write_ms,
        reverse=True,
    )
    kept: list[tuple[int, int, StoredMessage]] = []  # a min-heap of (store ms, log offset, m)
    for row in candidates:
        if len(kept) >= limit and row.last_write_ms < kept[0][0]:
            break
        low, high = store.queue_range(topic, row.queue)
        if high <= low:
            continue
        for message in store.read(topic, row.queue, max(low, high - limit), limit):
            item = (message.store_time_ms, message.commit_offset, message)
            if len(kept) < limit:
                heapq.heappush(kept, item)
            elif item[:2] > kept[0][:2]:
                heapq.heapreplace(kept, item)
    newest = sorted(kept, key=lambda item: item[:2], reverse=True)
    return [
        MessagePreview(
            m.message_id,
            m.queue,
            m.queue_offset,
            list(m.keys),
            m.tag,
            m.store_time_ms,
            body_preview(m.body),
            len(m.body),
        )
        for _, _, m in newest
    ]
