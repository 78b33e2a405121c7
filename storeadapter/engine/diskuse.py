"""The disk use of the file system holding a store, as last measured.

A part of ``MessageStore``: appends are refused while the last measure is past
``disk_reject_ratio``; each flush, retention run and ``stats()`` measures again.
"""

from __future__ import annotations

from pathlib import Path

from . import dataplane, fileio


class DiskUse:
    """The used share of the store's file system (0 to 1), as last measured.

    Setting ``ratio`` moves the store's refusal word (``dataplane.Refusals``, which the
    native append reads) when it passes ``reject_ratio`` or falls back below it."""

    def __init__(
        self,
        path: Path,
        reject_ratio: float = 1.0,
        refusals: dataplane.Refusals | None = None,
    ) -> None:
        self.path = path
        self.reject_ratio = reject_ratio
        self._refusals = refusals
        self.ratio = 0.0

    @property
    def ratio(self) -> float:
        return self._ratio

    @ratio.setter
    def ratio(self, ratio: float) -> None:
        self._ratio = ratio
        if self._refusals is not None:
            self._refusals.set(dataplane.REFUSED_DISK_FULL, not ratio < self.reject_ratio)

    def measure(self) -> float:
        """Measure the file system's use now, keep it and return it."""
        used, total = fileio.disk_usage(self.path)
        self.ratio = used / total if total else 0.0
        return self.ratio


__all__ = ["DiskUse"]
