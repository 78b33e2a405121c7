"""The worlds the console, API and browser tests start from, built through the engine.

`billing` consumes `orders`; what a test needs of it (two queues of five messages with
commits, or one consumed message before dead letters) is one function here. Dead letters
are made as a consumer with retries makes them: copied to billing's DLQ with their
origin; a redriven copy that fails again is copied again, with the redriven message as
its origin."""

from __future__ import annotations

from storeadapter.engine import MessageStore, dlq_topic

DLQ = dlq_topic("billing")


def billing_on_orders(
    store: MessageStore, committed: tuple[int, int] = (3, 4), who: tuple[str, str] | None = None
) -> MessageStore:
    """`orders`, 2 queues of 5 messages ("m0".."m4"); `billing` committed at `committed`
    (queue 0, queue 1), by the consumers `who` names when it names them."""
    store.create_topic("orders", 2)
    for queue in (0, 1):
        for n in range(5):
            store.append("orders", f"m{n}".encode(), queue=queue)
    for queue, offset in enumerate(committed):
        extra = {"who": who[queue]} if who else {}
        store.commit_offset("billing", "orders", queue, offset, **extra)
    return store


def billing_before_dead_letters(store: MessageStore) -> MessageStore:
    """`orders`, 1 queue holding "first", consumed by `billing`; no dead letters yet."""
    store.create_topic("orders", 1)
    store.append("orders", b"first")
    store.commit_offset("billing", "orders", 0, 1)
    return store


def dead_letter(
    store: MessageStore,
    origin_offset: int,
    body: bytes = b"dead",
    origin_queue: int = 0,
    origin_id: str = "0" * 24,
) -> str:
    """A dead letter of `billing` from `orders` `origin_queue`/`origin_offset` (that
    message need not exist); its id. The DLQ topic must exist."""
    return store.append(
        DLQ,
        body,
        key="k1",
        properties={
            "ORIGIN_TOPIC": "orders",
            "ORIGIN_QUEUE": str(origin_queue),
            "ORIGIN_QUEUE_OFFSET": str(origin_offset),
            "ORIGIN_MESSAGE_ID": origin_id,
            "RETRY_COUNT": "3",
            "LAST_ERROR": "ValueError: bad total",
        },
    ).message_id


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
    """The bodies of `orders` queue 0, in order."""
    return [m.body for m in store.read("orders", 0, 0, 100)]
