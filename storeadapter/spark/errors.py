"""What the Spark side raises when it cannot be exact: each message is a sentence naming
the file, the host and what the plan expected, so a failed Spark task says why."""

from __future__ import annotations


class TidemarkSparkError(RuntimeError):
    """A read, stream or archive that cannot be exact (never returns partial data)."""


class SegmentNotVisibleError(TidemarkSparkError):
    """An executor cannot open a segment file the plan expected to read."""


class PlanMismatchError(TidemarkSparkError):
    """An executor read something else than the plan expected (fewer bytes, other
    records, another store)."""


class DataLossError(TidemarkSparkError):
    """Retention deleted records a stream had not read yet (``failOnDataLoss``)."""


class ArchiveVerificationError(TidemarkSparkError):
    """An archive's files, read back, do not hold what the segment holds."""


__all__ = [
    "ArchiveVerificationError",
    "DataLossError",
    "PlanMismatchError",
    "SegmentNotVisibleError",
    "TidemarkSparkError",
]
