"""Fixtures the console page tests share."""

import pytest

from console.monitoring import current
from storeadapter.engine import clock
from tests.worlds import billing_on_orders


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (2 queues of 5 messages): committed 3 on queue 0, 4 on 1."""
    return billing_on_orders(store)


@pytest.fixture
def now(monkeypatch):
    """The engine's clock frozen at ``now["ms"]`` (set it to move time), with the
    monitoring's cached figures dropped."""
    time = {"ms": 1_800_000_000_000}
    monkeypatch.setattr(clock, "now_ms", lambda: time["ms"])
    current._cache.update(token=None, groups=None)
    return time
