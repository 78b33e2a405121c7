"""Fixtures for the background tasks: a patchable store clock and users for /tasks/.

The small store, the real Redis and the real worker come from tests/conftest.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest


class Clock:
    """The store's clock (``storeadapter.engine.clock.now_ms``), set by the test."""

    def __init__(self, when: datetime) -> None:
        self.set(when)

    def set(self, when: datetime) -> None:
        self.ms = int(when.astimezone(UTC).timestamp() * 1000)

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock(monkeypatch):
    from storeadapter.engine import clock as engine_clock

    fake = Clock(datetime(2030, 1, 10, 0, 0, tzinfo=UTC))
    monkeypatch.setattr(engine_clock, "now_ms", fake)
    return fake
