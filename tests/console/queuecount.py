"""Count the queues a request touches: every per-queue read of the store, by queue."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from storeadapter.engine import MessageStore

PER_QUEUE_READS = ("offset_for_time", "read_result", "queue_range")


@contextmanager
def queues_touched(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[int]]:
    """The set of queues read through MessageStore while the block runs."""
    touched: set[int] = set()
    for name in PER_QUEUE_READS:
        real = getattr(MessageStore, name)

        def counting(self, topic, queue, *args, _real=real, **kwargs):
            touched.add(queue)
            return _real(self, topic, queue, *args, **kwargs)

        monkeypatch.setattr(MessageStore, name, counting)
    yield touched
