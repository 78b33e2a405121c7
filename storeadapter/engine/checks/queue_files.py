"""Consume queues with files of their own (``consumequeue/<topic>/<queue>/<first index>``):
the files of each queue, their entries against the log, the time marks, and the
``queue-ends`` witness of the topic."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..metadata import TopicInfo
from ..queuebase import ENTRY_SIZE
from ..queueends import FILE_NAME as QUEUE_ENDS
from ..queueends import QueueEnds
from ..record import STORE_MS
from ..segment import segment_name
from ..timeindex import FILE_NAME as TIME_INDEX
from ..timeindex import MARK, MARK_SIZE
from .commit_log import LogFacts
from .problems import EntryRuns, Findings
from .queue_entries import EntryChunk, QueueLog, check_queue_entries
from .readonly import numbered_files, relative, written_bytes

KIND = "consumequeue"
_MARK_INTERVAL = 128  # consumequeue.TIME_INDEX_INTERVAL


def check_files_topic(
    store: Path,
    info: TopicInfo,
    entries_per_file: int | None,
    log: LogFacts,
    dispatched: int = 0,
) -> tuple[Findings, dict[int, int]]:
    """Check every queue of a topic with files per queue; return the findings and each
    queue's end (see ``check_queue_entries``). ``dispatched`` is the checkpoint's: what
    is wrong past it the next open rewrites (notes)."""
    findings = Findings(KIND)
    ends = {
        queue: check_queue_directory(
            store, info, queue, entries_per_file, log, dispatched, findings
        )
        for queue in range(info.queues)
    }
    _check_witness(store, info, ends, log, findings)
    return findings, ends


def check_queue_directory(
    store: Path,
    info: TopicInfo,
    queue: int,
    entries_per_file: int | None,
    log: LogFacts,
    dispatched: int,
    findings: Findings,
) -> int:
    """Check one queue's files (``entries_per_file`` from ``store.json``; None: taken
    from the first file's size); return the queue's end."""
    directory = store / "consumequeue" / info.name / str(queue)
    where = relative(store, directory)
    queue_log = QueueLog(log.queues.get((info.name, queue)), info.since(queue), dispatched)
    if not directory.is_dir():
        return queue_log.end  # the metadata check reports the missing directory
    findings.count("queues")
    files = numbered_files(directory)
    if not files:
        findings.damage(
            where, "no queue file: its files were lost (the next open rebuilds it from the log)"
        )
        return queue_log.end
    per_file = entries_per_file or max(1, files[0].stat().st_size // ENTRY_SIZE)
    _check_file_names(store, files, per_file, findings)
    findings.count("files", len(files))

    def path_for(index: int) -> str:
        return f"{where}/{segment_name(index - index % per_file)}"

    end = check_queue_entries(
        findings,
        where,
        _chunks(store, files, per_file),
        _last_written(files),
        queue_log,
        log,
        path_for,
    )
    _check_time_index(store, directory, queue_log, log, findings)
    return end


def _check_file_names(store: Path, files: list[Path], per_file: int, findings: Findings) -> None:
    expected = int(files[0].name)
    for path in files:
        first = int(path.name)
        name = relative(store, path)
        if first % per_file:
            findings.damage(name, f"its name is not a multiple of {per_file} entries per file")
        if first != expected:
            findings.damage(
                name,
                f"the file of entries {expected} to {first - 1} is missing (a queue's files "
                "follow one another)",
            )
        size = path.stat().st_size
        if size % ENTRY_SIZE:
            findings.damage(name, f"{size} bytes, not a whole number of {ENTRY_SIZE}-byte entries")
        expected = first + max(per_file, size // ENTRY_SIZE)


def _chunks(store: Path, files: list[Path], per_file: int) -> Iterator[EntryChunk]:
    for path in files:
        entries = max(per_file, path.stat().st_size // ENTRY_SIZE)
        data = written_bytes(path, entries * ENTRY_SIZE)
        yield EntryChunk(
            int(path.name), data[: len(data) - len(data) % ENTRY_SIZE], relative(store, path)
        )


def _last_written(files: list[Path]) -> int:
    """The queue offset of the queue's last written entry (-1 if none is)."""
    for path in reversed(files):
        written = written_bytes(path).rstrip(b"\0")
        if written:
            return int(path.name) + -(-len(written) // ENTRY_SIZE) - 1
    return -1


def _check_time_index(
    store: Path, directory: Path, queue_log: QueueLog, log: LogFacts, findings: Findings
) -> None:
    """Each written mark must name queue offset ``128 × n`` and its record's store time."""
    path = directory / TIME_INDEX
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return  # made by the first mark; a lost one only slows offset_for_time
    name = relative(store, path)
    runs = EntryRuns(findings, noun="mark")
    records = queue_log.records
    for number, (stored, store_ms) in enumerate(
        MARK.iter_unpack(data[: len(data) - len(data) % MARK_SIZE])
    ):
        if not stored:
            continue
        findings.count("time marks")
        queue_offset = number * _MARK_INTERVAL
        if stored != queue_offset + 1:
            runs.add(
                name, number, f"names another queue offset than {queue_offset}", str(stored - 1)
            )
            continue
        at = queue_log.position(queue_offset)
        found = log.header_at(records.offsets[at]) if at is not None else None
        if found is not None and found[0][STORE_MS] != store_ms:
            detail = f"{store_ms}, the record's {found[0][STORE_MS]}"
            runs.add(name, number, "gives another store time than its record's", detail)
    runs.flush()


def _check_witness(
    store: Path, info: TopicInfo, ends: dict[int, int], log: LogFacts, findings: Findings
) -> None:
    """No queue may end below the end its topic's ``queue-ends`` witnessed at a flush."""
    directory = store / "consumequeue" / info.name
    try:
        fd = os.open(directory / QUEUE_ENDS, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        sequence, tail, witnessed = QueueEnds(directory, info.created_offset).newest(fd)
    finally:
        os.close(fd)
    if not sequence or tail > log.end:
        return  # no witness of this topic; or the log lost bytes (its own report)
    for queue, end in enumerate(witnessed[: info.queues]):
        if end > ends.get(queue, end):
            findings.damage(
                f"consumequeue/{info.name}/{queue}",
                f"queue-ends witnessed the queue at {end} entries after a flush, but its "
                f"entries and records end at {ends[queue]}: entries {ends[queue]} to {end - 1} "
                "were lost with their records",
            )
