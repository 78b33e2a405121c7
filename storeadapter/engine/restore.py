"""Putting back a queue's entries that were lost below the checkpoint.

Recovery trusts consume-queue entries below the checkpoint; when a queue turns out
shorter than its witness says (``queueends``), the missing entries are found again in
the commit log: every intact record of the queue from the last entry still present up
to the log's tail gets its entry written back.
"""

from __future__ import annotations

from typing import NamedTuple

from .commitlog import CommitLog
from .consumequeue import TIME_INDEX_INTERVAL
from .dispatch import REPLAYED, Dispatcher, Run, dispatch_all
from .queuebase import ENTRY, QueueBase
from .record import HEADER_SIZE, QUEUE_ID, QUEUE_OFFSET, STORE_MS, TAG_LEN, TOPIC_LEN
from .scan import RECORD, scan_segment
from .tags import tag_hash


class Restored(NamedTuple):
    """What was written back: ``count`` entries, the first of whose records is at
    ``first_commit_offset``; queue offsets ``first_index`` to ``end - 1``."""

    count: int
    first_commit_offset: int
    first_index: int
    end: int


def restore_queue_end(
    log: CommitLog,
    queue: QueueBase,
    since: int,
    lost_from: int,
    tail: int,
    dispatchers: list[Dispatcher],
) -> Restored:
    """Write back the entries of ``queue`` from queue offset ``lost_from`` on, from the
    records between the last entry before it (or ``since``, where the queue's records
    begin) and ``tail``, as a replayed run through ``dispatchers`` (the store's list,
    dispatch.py). The caller fsyncs what was written."""
    topic, queue_id = queue.owner
    start = max(since, log.min_offset, _after_last_entry(queue, lost_from))
    entries: list[tuple[int, bytes, int]] = []
    for segment in log.segments:
        if segment.end <= start or segment.base >= tail:
            continue
        sealed = segment is not log.segments[-1]
        view = segment.view
        for event in scan_segment(segment, max(start, segment.base) - segment.base, sealed):
            if event.kind != RECORD or event.offset + event.length > tail:
                continue
            header = event.header
            if header[QUEUE_ID] != queue_id or header[QUEUE_OFFSET] < lost_from:
                continue
            pos = event.offset - segment.base + HEADER_SIZE
            topic_end = pos + header[TOPIC_LEN]
            if bytes(view[pos:topic_end]) != topic:
                continue
            tag = bytes(view[topic_end : topic_end + header[TAG_LEN]])
            entry = ENTRY.pack(event.offset, event.length, tag_hash(tag))
            entries.append((header[QUEUE_OFFSET], entry, header[STORE_MS]))
    if not entries:
        return Restored(0, 0, lost_from, lost_from)
    entries.sort()
    runs = []
    run_start = 0
    for i in range(1, len(entries) + 1):
        if i == len(entries) or entries[i][0] != entries[i - 1][0] + 1:
            run = entries[run_start:i]
            runs.append((queue, run[0][0], b"".join(entry for _, entry, _ in run)))
            run_start = i
    marks = [
        (queue, [(index, store_ms)])
        for index, _, store_ms in entries
        if not index % TIME_INDEX_INTERVAL
    ]
    dispatch_all(dispatchers, Run(REPLAYED, None, tail, runs, marks))
    first_offset = ENTRY.unpack(entries[0][1])[0]
    return Restored(len(entries), first_offset, entries[0][0], entries[-1][0] + 1)


def _after_last_entry(queue: QueueBase, lost_from: int) -> int:
    """The commit-log offset after the record of the last entry before ``lost_from``
    (0 when there is none): the queue's later records lie past it."""
    index = lost_from - 1
    while index >= queue.min_offset:
        entry = queue.entry(index)
        if entry is not None:
            return entry[0] + entry[1]
        index -= 1
    return 0
