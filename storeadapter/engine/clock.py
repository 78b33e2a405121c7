"""The store's clock: store times come from here (tests may replace ``now_ms``, or pin
it with ``pin``, which pins the native append's clock too)."""

from __future__ import annotations

import time

from .seam import watch_module

_pinned: int | None = None


def now_ms() -> int:
    """Milliseconds since the epoch (or the pinned time)."""
    if _pinned is not None:
        return _pinned
    return time.time_ns() // 1_000_000


def pin(ms: int | None) -> None:
    """Tests: store times are ``ms`` from now on (None: the wall clock again), on the
    long way and in the native append (``_native.pin_clock``) alike, so that two runs of
    one workload write the same bytes. ``now_ms`` stays the genuine function: the
    native append keeps running."""
    global _pinned
    from . import dataplane  # the one door to _native; imported late (as seam.py)

    _pinned = ms
    dataplane.pin_clock(ms)


watch_module(__name__)  # replacing a function here moves the seam generation (seam.py)
