"""The store's clock: store times come from here (tests may replace ``now_ms``)."""

from __future__ import annotations

import time

from .seam import watch_module


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


watch_module(__name__)  # replacing a function here moves the seam generation (seam.py)
