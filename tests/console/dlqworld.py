"""Dead letters as a consumer with retries makes them: a message of `orders` that failed its
last try is copied to billing's DLQ with its origin; a redriven copy that fails again is
copied again, with the redriven message as its origin. Shared by the DLQ page and API tests."""

from __future__ import annotations

from storeadapter.engine import MessageStore, dlq_topic

DLQ = dlq_topic("billing")


def dies(store: MessageStore, queue_offset: int, error: str = "ValueError: poison") -> str:
    """Dead-letter the message at `orders` 0/`queue_offset`; the copy's id."""
    [message] = store.read("orders", 0, queue_offset, 1)
    return store.append(
        DLQ,
        message.body,
        key=list(message.keys) or None,
        properties={
            "ORIGIN_TOPIC": "orders",
            "ORIGIN_QUEUE": "0",
            "ORIGIN_QUEUE_OFFSET": str(queue_offset),
            "ORIGIN_MESSAGE_ID": message.message_id,
            "RETRY_COUNT": "3",
            "LAST_ERROR": error,
        },
    ).message_id


def poison_world(store: MessageStore) -> list[str]:
    """`orders` holds "first" (consumed) and three poison orders (offsets 1-3), each
    dead-lettered once; returns the three copies' ids."""
    store.create_topic("orders", 1)
    store.append("orders", b"first")
    for n in range(3):
        store.append("orders", f"poison-{n}".encode(), key=f"order-{n}")
    store.commit_offset("billing", "orders", 0, 4)
    store.create_topic(DLQ, 1)
    return [dies(store, offset) for offset in (1, 2, 3)]


def orders_bodies(store: MessageStore) -> list[bytes]:
    return [m.body for m in store.read("orders", 0, 0, 100)]
