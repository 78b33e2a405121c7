"""Fixtures the console page tests share."""

import pytest


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (2 queues of 5 messages): committed 3 on queue 0, 4 on 1."""
    store.create_topic("orders", 2)
    for queue in (0, 1):
        for n in range(5):
            store.append("orders", f"m{n}".encode(), queue=queue)
    store.commit_offset("billing", "orders", 0, 3)
    store.commit_offset("billing", "orders", 1, 4)
    return store
