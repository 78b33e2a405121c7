"""What a check finds: problems (damage, or notes about a crash's harmless leftovers) and
counts of what was checked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: Damage: bytes that are wrong, or files that disagree; ``verify`` exits 1.
DAMAGE = "damage"
#: What a crash leaves and the next open tidies away; reported, but the store is healthy.
NOTE = "note"

#: ``progress(kind, done, total)``: how far the check of one kind of file has got.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one file. ``path`` is relative to the store directory;
    ``offset`` is a commit-log offset (``unit`` "offset") or a position in the file
    (``unit`` "byte")."""

    kind: str
    path: str
    reason: str
    offset: int | None = None
    unit: str = "offset"
    severity: str = DAMAGE

    def line(self) -> str:
        label = "corrupt" if self.severity == DAMAGE else "note"
        where = self.path if self.offset is None else f"{self.path} ({self.unit} {self.offset})"
        return f"{label}: {where}: {self.reason}"

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "path": self.path,
            "offset": self.offset,
            "unit": self.unit,
            "reason": self.reason,
            "severity": self.severity,
        }


@dataclass
class Findings:
    """The problems found in the files of one kind, and how much was checked."""

    kind: str
    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def damage(
        self, path: str, reason: str, offset: int | None = None, unit: str = "offset"
    ) -> None:
        self.problems.append(Problem(self.kind, path, reason, offset, unit, DAMAGE))

    def note(self, path: str, reason: str, offset: int | None = None, unit: str = "offset") -> None:
        self.problems.append(Problem(self.kind, path, reason, offset, unit, NOTE))

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount

    def absorb(self, other: Findings) -> None:
        self.problems.extend(other.problems)
        for name, amount in other.counts.items():
            self.count(name, amount)

    @property
    def damaged(self) -> bool:
        return any(p.severity == DAMAGE for p in self.problems)


#: Added to notes about entries the next open mends from the log.
REWRITTEN = "past the checkpoint: the next open mends them from the log"


class EntryRuns:
    """Problems of consecutive entries, reported as one per run: a zeroed file is one
    line, not one line per entry.

    A run goes on while entries follow one another in the same file with the same
    ``what`` and severity; ``detail`` is kept from the run's first entry. Notes (damage
    past the checkpoint, which recovery repairs) say so.
    """

    def __init__(self, findings: Findings, noun: str = "entry") -> None:
        self.findings = findings
        self.noun = noun
        # path, what, severity, detail, first, last
        self._run: tuple[str, str, str, str, int, int] | None = None

    def add(
        self, path: str, index: int, what: str, detail: str = "", severity: str = DAMAGE
    ) -> None:
        run = self._run
        if run is not None and run[:3] == (path, what, severity) and run[5] + 1 == index:
            self._run = (*run[:5], index)
            return
        self.flush()
        self._run = (path, what, severity, detail, index, index)

    def flush(self) -> None:
        if self._run is None:
            return
        path, what, severity, detail, first, last = self._run
        self._run = None
        if first == last:
            reason = f"{self.noun} {first}: {what}" + (f" ({detail})" if detail else "")
        else:
            plural = "entries" if self.noun == "entry" else f"{self.noun}s"
            reason = f"{plural} {first} to {last} ({last - first + 1:,}): {what}"
            reason += f" (first: {detail})" if detail else ""
        if severity == DAMAGE:
            self.findings.damage(path, reason)
        else:
            self.findings.note(path, f"{reason}; {REWRITTEN}")
