"""Consume-queue entries written before entries had checks (a store of format version 1):
verified against their records and rewritten with their checks, once, by the first
process that opens such a store alone.

An entry that does not verify (its record is not there, is another entry's, or has
another tag) is left as it is: reads verify every unchecked entry against its record,
serve the record if it is the entry's, and report the entry as damaged otherwise.
"""

from __future__ import annotations

from . import dataplane
from .queuebase import ENTRY, ENTRY_SIZE, QueueBase, entry_checked, entry_not_written, pack_entry
from .reader import Reader
from .tags import tag_hash
from .topics import TopicRegistry

_CHUNK = 4096


def seal_old_entries(registry: TopicRegistry, reader: Reader) -> int:
    """Give every verified unchecked entry of every queue its check; return how many.
    The queues changed are left in ``registry.dirty`` (the next flush fsyncs them)."""
    sealed = 0
    for topic in list(registry.topics.values()):
        name = topic.info.name
        if topic.blocks is not None:
            ids = topic.blocks.queues_with_blocks()
        else:
            ids = range(len(topic.queues))
        for queue_id in ids:
            queue = topic.queues[queue_id]
            count = _seal_queue(queue, name, queue_id, reader)
            if count:
                registry.dirty.add(queue.flush_target)
                sealed += count
    return sealed


def _seal_queue(queue: QueueBase, topic: str, queue_id: int, reader: Reader) -> int:
    sealed = 0
    index, end = queue.min_offset, queue.max_offset
    while index < end:
        data = queue.read(index, min(_CHUNK, end - index))
        if not data:
            break
        if dataplane.seal_entries(data) is data:  # every entry has its check already
            index += len(data) // ENTRY_SIZE
            continue
        rewritten = bytearray(data)
        changed = False
        for at in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            if entry_not_written(data, at) or entry_checked(data, at):
                continue
            commit_offset, size, old_tag_hash = ENTRY.unpack_from(data, at)
            message = reader.entry_record(
                commit_offset, size, topic, queue_id, index + at // ENTRY_SIZE
            )
            if message is None:
                continue
            tag = tag_hash(message.tag.encode()) if message.tag is not None else 0
            if tag != old_tag_hash:
                continue
            rewritten[at : at + ENTRY_SIZE] = pack_entry(commit_offset, size, tag)
            changed = True
            sealed += 1
        if changed:
            queue.rewrite(index, bytes(rewritten))
        index += len(data) // ENTRY_SIZE
    return sealed
