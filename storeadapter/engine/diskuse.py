"""The disk use of the file system holding a store, as last measured.

A part of ``MessageStore``: appends are refused while the last measure is past
``disk_reject_ratio``; each flush, retention run and ``stats()`` measures again.
"""

from __future__ import annotations

from pathlib import Path

from . import fileio


class DiskUse:
    """The used share of the store's file system (0 to 1), as last measured."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ratio = 0.0

    def measure(self) -> float:
        """Measure the file system's use now, keep it and return it."""
        used, total = fileio.disk_usage(self.path)
        self.ratio = used / total if total else 0.0
        return self.ratio


__all__ = ["DiskUse"]
