"""How many examples a property test draws: the count it names is what `make test` runs;
``TIDEMARK_FUZZ_SCALE`` multiplies it (``make soak`` runs the fuzz files at 10×)."""

from __future__ import annotations

import os

SCALE = float(os.environ.get("TIDEMARK_FUZZ_SCALE", "1"))


def examples(count: int) -> int:
    """``count`` examples, scaled by ``TIDEMARK_FUZZ_SCALE``."""
    return max(1, round(count * SCALE))
