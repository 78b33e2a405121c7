"""``verify``: check every file of a store, without changing a byte of it.

The commit log (every record, and its end against the checkpoint), the checkpoint,
``store.json`` and ``topics.json`` (and the topics against what is on disk), the
consume queues (every entry against its record, every record against its entry), the
key index (headers, chains, every entry against its record, every key against the
index) and the consumer offsets (every journal frame, every committed offset against its
queue's end). The store is never opened: files are read directly, read-only, and
nothing is created (no lock files).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .checks.checkpoint_file import check_checkpoint, read_state
from .checks.commit_log import LogFacts, check_commit_log
from .checks.event_index import check_event_index
from .checks.key_index import check_key_index
from .checks.metadata_files import Metadata, check_metadata, check_topics_against_store
from .checks.offsets_journal import check_offsets
from .checks.problems import DAMAGE, Findings, Problem, Progress
from .checks.queue_files import check_files_topic
from .checks.shared_blocks import check_shared_topic
from .errors import StoreError
from .metadata import LAYOUT_SHARED, is_store
from .results import Corruption

#: What each kind of file is called in the summary.
LABELS = {
    "commitlog": "commit log",
    "checkpoint": "checkpoint",
    "metadata": "metadata",
    "consumequeue": "consume queues",
    "index": "key index",
    "offsets": "offsets",
    "event_index": "event indexes",
}


@dataclass
class VerifyReport:
    """The commit log's part of a ``verify`` (see ``verify_commitlog``)."""

    segments: int = 0
    records: int = 0
    record_bytes: int = 0
    tail: int = 0
    corruptions: list[Corruption] = field(default_factory=list)

    @classmethod
    def of(cls, log: LogFacts) -> VerifyReport:
        """The report of what the commit log's check found."""
        return cls(
            segments=log.findings.counts.get("segments", 0),
            records=log.records,
            record_bytes=log.record_bytes,
            tail=log.end,
            corruptions=log.corruptions,
        )

    @property
    def ok(self) -> bool:
        return not self.corruptions


@dataclass
class StoreReport(VerifyReport):
    """Every problem found, and per kind of file what was checked."""

    findings: list[Findings] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return [problem for found in self.findings for problem in found.problems]

    @property
    def ok(self) -> bool:
        """No damage (notes about a crash's leftovers do not count)."""
        return not any(problem.severity == DAMAGE for problem in self.problems)

    def summary(self) -> list[str]:
        """One line per kind of file: what was checked, and how many problems."""
        lines = []
        for found in self.findings:
            checked = ", ".join(_counted(name, value) for name, value in found.counts.items())
            damage = sum(p.severity == DAMAGE for p in found.problems)
            notes = len(found.problems) - damage
            told = f"{damage} damaged" + (f", {notes} notes" if notes else "")
            lines.append(f"{LABELS[found.kind]}: {checked or 'nothing'} checked; {told}")
        return lines

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "problems": [problem.as_dict() for problem in self.problems],
            "counts": {found.kind: dict(found.counts) for found in self.findings},
            "segments": self.segments,
            "records": self.records,
            "record_bytes": self.record_bytes,
            "tail": self.tail,
            "corruptions": [corruption._asdict() for corruption in self.corruptions],
        }


def _counted(name: str, value: int) -> str:
    if value == 1 and name.endswith("ies"):
        name = name[:-3] + "y"
    elif value == 1 and name.endswith("s"):
        name = name[:-1]
    return f"{value:,} {name}"


def verify_store(store: Path, progress: Progress | None = None) -> StoreReport:
    """Check every file of the store at ``store``; raise StoreError if it is none."""
    store = Path(store)
    if not is_store(store):
        raise StoreError(
            f"{store} is not a Tidemark store: it holds no commit log (no commitlog "
            "directory) and no store.json"
        )
    metadata, metadata_findings = check_metadata(store)
    checkpoint = read_state(store)
    with check_commit_log(store, checkpoint.commitlog_flushed, progress) as log:
        report = StoreReport.of(log)
        queues, ends = _check_queues(store, metadata, log, checkpoint.dispatched, progress)
        index = check_key_index(store, log, metadata.topics, checkpoint.index_dispatched)
        _tick(progress, "index")
        topics = metadata.topics if metadata.topics_readable else None
        offsets_findings, offsets = check_offsets(store, topics, ends)
        _tick(progress, "offsets")
        metadata_findings.absorb(
            check_topics_against_store(store, metadata.topics, log, offsets.removed_queues)
        )
        report.findings = [
            log.findings,
            check_checkpoint(store, log.end, log.records),
            metadata_findings,
            queues,
            index,
            offsets_findings,
            _check_event_indexes(store, metadata),
        ]
    return report


def _check_event_indexes(store: Path, metadata: Metadata) -> Findings:
    """The stream topics' event indexes (``checks.event_index``), as findings."""
    findings = Findings("event_index")
    streams = [info for info in metadata.topics.values() if info.streams]
    findings.counts["stream topics"] = len(streams)
    if streams:
        for problem in check_event_index(store):
            findings.damage(problem["file"], problem["reason"], problem["commit_offset"])
    return findings


def _check_queues(
    store: Path, metadata: Metadata, log: LogFacts, dispatched: int, progress: Progress | None
) -> tuple[Findings, dict[tuple[str, int], int]]:
    findings = Findings("consumequeue")
    ends: dict[tuple[str, int], int] = {}
    topics = list(metadata.topics.values())
    for done, info in enumerate(topics, 1):
        if info.layout == LAYOUT_SHARED:
            found, topic_ends = check_shared_topic(store, info, log, dispatched)
        else:
            entries_per_file = metadata.queue_file_entries
            found, topic_ends = check_files_topic(store, info, entries_per_file, log, dispatched)
        findings.absorb(found)
        ends.update({(info.name, queue): end for queue, end in topic_ends.items()})
        if progress is not None:
            progress("consumequeue", done, len(topics))
    return findings, ends


def _tick(progress: Progress | None, kind: str) -> None:
    if progress is not None:
        progress(kind, 1, 1)


def verify_commitlog(
    directory: Path,
    segment_bytes: int = 0,
    durable_end: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """Scan every segment under ``directory`` (a store's ``commitlog``) and report its
    bad stretches; never modifies a file. ``segment_bytes`` is not needed (each file
    keeps its size) and is accepted for older callers.

    ``durable_end`` (the checkpoint's flushed offset) tells zeros that are damage from
    zeros that are the unwritten end of the log. ``progress(done_bytes, total_bytes)``
    is called after each segment and every 64 MiB within one.
    """

    def by_bytes(_kind: str, done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)

    with check_commit_log(Path(directory).parent, durable_end, by_bytes) as log:
        return VerifyReport.of(log)
