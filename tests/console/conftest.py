"""Fixtures the console page tests share."""

import pytest

from console.monitoring import current
from storeadapter.engine import clock


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


@pytest.fixture
def now(monkeypatch):
    """The engine's clock frozen at ``now["ms"]`` (set it to move time), with the
    monitoring's cached figures dropped."""
    time = {"ms": 1_800_000_000_000}
    monkeypatch.setattr(clock, "now_ms", lambda: time["ms"])
    current._cache.update(token=None, groups=None)
    return time
