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


def our_sentence(error: BaseException) -> str | None:
    """When ``error`` is, or a Spark job failed because a task raised, one of the errors
    above: its ``Name: sentence`` line (out of Spark's long text); else None."""
    for line in str(error).splitlines():
        for kind in _KINDS:
            at = line.find(f"{kind}: ")
            if at >= 0:
                return line[at:].strip()
    if isinstance(error, TidemarkSparkError):
        return f"{type(error).__name__}: {error}"
    return None


def sentence_of(error: BaseException) -> str:
    """The sentence to show for ``error``: ``our_sentence``, else its first line."""
    found = our_sentence(error)
    if found is not None:
        return found
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


__all__ = [
    "ArchiveVerificationError",
    "DataLossError",
    "PlanMismatchError",
    "SegmentNotVisibleError",
    "TidemarkSparkError",
    "our_sentence",
    "sentence_of",
]

_KINDS = [
    "SegmentNotVisibleError",
    "PlanMismatchError",
    "DataLossError",
    "ArchiveVerificationError",
]
