"""The store's clock: store times come from here (tests may replace ``now_ms``)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
