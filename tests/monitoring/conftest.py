"""Fixtures for the monitoring (the small store is tests/conftest.py's): a clock the test
sets, a helper that takes samples at chosen times, and users for the chart endpoints.

The ``clock`` fixture sets the engine's clock: store times, commit times, the expiry
forecast, the sampler's default time and the charts' "now", so that scripted histories read
"commit at 5 s, sample at 10 s".
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fresh_metrics_cache():
    """current.py caches per sample token; tokens are random, but start every test clean."""
    from console.monitoring import current

    current._cache.update(token=None, groups=None)
    yield


#: Where test time starts (ms since the epoch).
BASE_MS = 1_800_000_000_000


class Clock:
    """Test time: ``clock.at(seconds)`` sets it to BASE + seconds; ``clock.ms`` reads it."""

    def __init__(self) -> None:
        self.ms = BASE_MS

    def at(self, seconds: float) -> int:
        self.ms = BASE_MS + int(seconds * 1000)
        return self.ms

    def now_ms(self) -> int:
        return self.ms


@pytest.fixture
def clock(monkeypatch) -> Clock:
    from storeadapter.engine import clock as engine_clock

    fake = Clock()
    monkeypatch.setattr(engine_clock, "now_ms", fake.now_ms)
    return fake


@pytest.fixture
def sample_at(db, clock):
    """``sample_at(seconds)``: set the clock to BASE + seconds and take a sample there."""
    from console.monitoring.sampler import take_sample

    def take(seconds: float):
        clock.at(seconds)
        report = take_sample()
        assert report.written, report.skipped
        return report

    return take
