"""How full the store's disk is: one figure for every page, endpoint and check.

It is the figure retention acts on (storeadapter.engine: used = total − free of the file
system holding the store, over its total; the warn, force and reject ratios compare it),
read now rather than as the engine last noted it, so /storage/, the dashboard, /readyz
and the API say the same as ``df``'s used + reserved over size at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass

from storeadapter.engine import MessageStore, fileio


@dataclass(frozen=True)
class DiskUse:
    used_bytes: int
    total_bytes: int
    warn_ratio: float
    force_ratio: float
    reject_ratio: float

    @property
    def ratio(self) -> float:
        return self.used_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def percent(self) -> float:
        """The ratio in percent, to one decimal."""
        return round(self.ratio * 100, 1)

    def thresholds(self) -> list[tuple[str, float, str]]:
        """(name, ratio, what happens at it) of each threshold, lowest first."""
        return [
            ("Warning", self.warn_ratio, "the oldest expired segments go first"),
            ("Force", self.force_ratio, "segments go even before they expire"),
            ("Reject", self.reject_ratio, "appends are refused"),
        ]

    def over(self) -> list[str]:
        """The names of the thresholds reached."""
        return [name for name, ratio, _ in self.thresholds() if self.ratio >= ratio]


def disk_use(store: MessageStore) -> DiskUse:
    """The store's disk use now (OSError if the file system cannot be asked)."""
    used, total = fileio.disk_usage(store.path)
    config = store.config
    return DiskUse(
        used, total, config.disk_warn_ratio, config.disk_force_ratio, config.disk_reject_ratio
    )
