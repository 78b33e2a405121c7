"""Rounds of the long fault loops: ``make test`` runs the smaller count, ``make soak``
(``TIDEMARK_SOAK=1``) the full one. The small count still runs every kind of round the
loop has (each kill moment, pair, copy, retention); the full one runs more of them."""

from __future__ import annotations

import os

SOAK = os.environ.get("TIDEMARK_SOAK", "") not in ("", "0")


def rounds(test: int, soak: int) -> int:
    """``test`` rounds under ``make test``, ``soak`` under ``make soak``."""
    return soak if SOAK else test
