"""Was this message consumed by group X? (issue 34, item 3): each group's state for one
message from its committed offsets, and the group's retry and dead-letter copies of it."""

from __future__ import annotations

from storeadapter.engine import dlq_topic, retry_topic
from storeadapter.message_track import (
    CONSUMED,
    DEAD_LETTERED,
    LOST,
    NOT_YET,
    consuming_groups,
    position,
    track,
)


def orders(store, count: int = 6, key: str | None = None):
    store.create_topic("orders", 2)
    return [store.append("orders", f"m{n}".encode(), key=key, queue=0) for n in range(count)]


def message_at(store, offset: int):
    [message] = store.read("orders", 0, offset, 1)
    return message


def copy_of(store, topic: str, message, retries: int = 1) -> str:
    """A copy of ``message`` as the consumer makes one (its origin in the properties)."""
    if topic not in {info.name for info in store.topics()}:
        store.create_topic(topic, 1)
    properties = {
        "ORIGIN_TOPIC": message.topic,
        "ORIGIN_QUEUE": str(message.queue),
        "ORIGIN_QUEUE_OFFSET": str(message.queue_offset),
        "ORIGIN_MESSAGE_ID": message.message_id,
        "RETRY_COUNT": str(retries),
    }
    key = list(message.keys) or None
    return store.append(topic, message.body, key=key, properties=properties).message_id


def test_a_message_below_the_committed_offset_is_consumed(store):
    orders(store)
    store.commit_offset("billing", "orders", 0, 3)

    [billing] = track(store, message_at(store, 2))

    assert (billing.group, billing.state, billing.committed) == ("billing", CONSUMED, 3)


def test_a_message_at_the_committed_offset_is_not_yet_with_nothing_before_it(store):
    orders(store)
    store.commit_offset("billing", "orders", 0, 3)

    [billing] = track(store, message_at(store, 3))

    assert (billing.state, billing.before) == (NOT_YET, 0)


def test_not_yet_says_how_many_messages_before_it_remain(store):
    orders(store)
    store.commit_offset("billing", "orders", 0, 1)

    [billing] = track(store, message_at(store, 4))

    assert (billing.state, billing.before) == (NOT_YET, 3)


def test_a_group_that_never_committed_on_the_queue_starts_from_its_first_offset(store):
    orders(store)
    store.commit_offset("billing", "orders", 1, 0)  # on the topic, another queue

    [billing] = track(store, message_at(store, 2))

    assert (billing.state, billing.committed, billing.before) == (NOT_YET, None, 2)


def test_a_message_retention_deleted_before_the_group_got_to_it_is_lost():
    assert position(committed=1, low=5, offset=3).state == LOST
    assert position(committed=None, low=5, offset=3).state == LOST
    assert position(committed=4, low=5, offset=3).state == CONSUMED


def test_not_yet_counts_only_the_messages_retention_kept():
    assert position(committed=1, low=5, offset=8).before == 3


def test_only_the_groups_consuming_the_topic_are_tracked(store):
    orders(store)
    store.create_topic("other", 1)
    store.commit_offset("billing", "orders", 0, 1)
    store.commit_offset("shipping", "orders", 1, 0)
    store.commit_offset("audit", "other", 0, 0)

    assert consuming_groups(store, "orders") == ["billing", "shipping"]
    assert [t.group for t in track(store, message_at(store, 0))] == ["billing", "shipping"]


def test_a_dead_lettered_copy_is_found_by_its_origin_with_its_state(store):
    orders(store, key="order-7")
    store.commit_offset("billing", "orders", 0, 6)
    message = message_at(store, 2)
    copy_id = copy_of(store, dlq_topic("billing"), message, retries=3)
    copy_of(store, dlq_topic("billing"), message_at(store, 3), retries=3)  # another message

    [billing] = track(store, message)

    assert [(c.message_id, c.state, c.retries) for c in billing.copies] == [
        (copy_id, DEAD_LETTERED, 3)
    ]


def test_a_retry_copy_of_a_message_without_keys_is_found_and_its_consumption_told(store):
    orders(store)
    store.commit_offset("billing", "orders", 0, 6)
    message = message_at(store, 1)
    first = copy_of(store, retry_topic("billing"), message, retries=1)
    second = copy_of(store, retry_topic("billing"), message, retries=2)
    store.commit_offset("billing", retry_topic("billing"), 0, 1)

    [billing] = track(store, message)

    assert [(c.message_id, c.state, c.retries) for c in billing.copies] == [
        (first, CONSUMED, 1),
        (second, NOT_YET, 2),
    ]


def test_a_group_without_copies_has_none(store):
    orders(store)
    store.commit_offset("billing", "orders", 0, 6)

    [billing] = track(store, message_at(store, 1))

    assert billing.copies == []
