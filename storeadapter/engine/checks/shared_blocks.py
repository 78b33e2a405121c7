"""Consume queues of a shared topic (``consumequeue/<topic>/blocks/<first block>``): the
run of block headers, and each queue's entries, read through its blocks, against the log
as for a queue with files of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from crc32c import crc32c

from ..blockqueue import ALLOCATED_FILE, BLOCK_HEADER_SIZE, END_SLOT, ERASED, parse_header
from ..metadata import TopicInfo
from ..queuebase import ENTRY_SIZE
from .commit_log import LogFacts
from .problems import Findings
from .queue_entries import EntryChunk, QueueLog, check_queue_entries
from .readonly import numbered_files, relative

KIND = "consumequeue"
_READ_BLOCKS = 256


class _Blocks:
    """The allocated blocks of a shared topic, found as the engine finds them: the run of
    valid headers from the first file's first block, up to the first unreadable header
    at or past the published allocation end."""

    def __init__(self, store: Path, info: TopicInfo, findings: Findings) -> None:
        self.store = store
        self.directory = store / "consumequeue" / info.name / "blocks"
        self.where = relative(store, self.directory)
        self.per_file = info.blocks_per_file
        self.block_bytes = BLOCK_HEADER_SIZE + info.block_entries * ENTRY_SIZE
        self.findings = findings
        self.files = {int(path.name): path for path in numbered_files(self.directory)}
        self.owners: dict[tuple[int, int], int] = {}  # (queue, seq) -> block
        self.end = min(self.files, default=0)
        self._fds: dict[int, int] = {}

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def path_of(self, block: int) -> str:
        return relative(self.store, self.directory / f"{block - block % self.per_file:020d}")

    def read(self, block: int, at: int, size: int) -> bytes:
        first = block - block % self.per_file
        fd = self._fds.get(first)
        if fd is None:
            fd = self._fds[first] = os.open(self.files[first], os.O_RDONLY)
        return os.pread(fd, size, (block - first) * self.block_bytes + at)

    def load(self) -> None:
        published = _published_end(self.directory / ALLOCATED_FILE)
        expected = self.end
        for first in sorted(self.files):
            if first != expected:
                self.findings.damage(
                    self.path_of(first),
                    f"the block file of blocks {expected} to {first - 1} is missing (the next "
                    "open rebuilds the topic's queues from the log)",
                )
                return
            if not self._load_file(first, published):
                return
            expected = first + self.per_file

    def _load_file(self, first: int, published: int) -> bool:
        """Take in the file's headers; False once the allocated run has ended."""
        size = self.block_bytes
        for start in range(0, self.per_file, _READ_BLOCKS):
            count = min(_READ_BLOCKS, self.per_file - start)
            data = self.read(first + start, 0, count * size)
            for slot in range(count):
                block = first + start + slot
                header = data[slot * size : slot * size + BLOCK_HEADER_SIZE]
                owner = parse_header(header) if len(header) == BLOCK_HEADER_SIZE else None
                if owner is None and block >= published:
                    return False
                self.end = block + 1
                if owner is None:
                    self.findings.damage(
                        self.path_of(block),
                        f"block {block}: its header is unreadable, below the published "
                        f"allocation end ({published}): whose entries it held is not known "
                        "(the next open rebuilds the topic's queues from the log)",
                    )
                elif owner[0] != ERASED:
                    self._own(owner, block)
        return True

    def _own(self, owner: tuple[int, int], block: int) -> None:
        self.findings.count("blocks")
        other = self.owners.get(owner)
        if other is not None:
            self.findings.damage(
                self.path_of(block),
                f"blocks {other} and {block} both hold block {owner[1]} of queue {owner[0]}",
            )
        self.owners[owner] = block


def _published_end(path: Path) -> int:
    """The allocation end of the newest valid slot of ``blocks/allocated`` (0 if none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    slots = []
    for at in (0, END_SLOT.size):
        if len(data) >= at + END_SLOT.size:
            seq, end, _tail, crc = END_SLOT.unpack_from(data, at)
            if seq and crc == crc32c(data[at : at + END_SLOT.size - 4]):
                slots.append((seq, end))
    return max(slots)[1] if slots else 0


def check_shared_topic(
    store: Path, info: TopicInfo, log: LogFacts, dispatched: int = 0
) -> tuple[Findings, dict[int, int]]:
    """Check a shared topic's blocks and every queue's entries; return the findings and
    each queue's end. ``dispatched`` is the checkpoint's: what is wrong past it the next
    open rewrites (notes)."""
    findings = Findings(KIND)
    blocks = _Blocks(store, info, findings)
    where = blocks.where
    ends: dict[int, int] = {}
    if not blocks.directory.is_dir():  # the metadata check reports it
        return findings, ends
    if not blocks.files:
        findings.damage(
            where, "no block file: they were lost (the next open rebuilds the topic from the log)"
        )
        return findings, ends
    findings.count("files", len(blocks.files))
    try:
        blocks.load()
        by_queue: dict[int, list[int]] = {}
        for queue, seq in blocks.owners:
            by_queue.setdefault(queue, []).append(seq)
        for queue in sorted(q for q in by_queue if q >= info.queues):
            findings.damage(
                where,
                f"blocks of queue {queue}, which {info.name} does not have (a removed queue's "
                "blocks are erased)",
            )
        for queue in range(info.queues):
            findings.count("queues")
            seqs = sorted(by_queue.get(queue, []))
            queue_log = QueueLog(log.queues.get((info.name, queue)), info.since(queue), dispatched)
            ends[queue] = _check_queue(info, queue, seqs, blocks, queue_log, log, findings)
    finally:
        blocks.close()
    return findings, ends


def _check_queue(
    info: TopicInfo,
    queue: int,
    seqs: list[int],
    blocks: _Blocks,
    queue_log: QueueLog,
    log: LogFacts,
    findings: Findings,
) -> int:
    per_block = info.block_entries
    where = f"consumequeue/{info.name}/{queue}"
    last_written = -1
    for seq in reversed(seqs):
        data = blocks.read(blocks.owners[(queue, seq)], BLOCK_HEADER_SIZE, per_block * ENTRY_SIZE)
        written = data.rstrip(b"\0")
        if written:
            last_written = seq * per_block + -(-len(written) // ENTRY_SIZE) - 1
            break

    def path_for(index: int) -> str:
        block = blocks.owners.get((queue, index // per_block))
        return f"{where} in {blocks.path_of(block) if block is not None else blocks.where}"

    def chunks() -> Iterator[EntryChunk]:
        size = per_block * ENTRY_SIZE
        for seq in range(seqs[0], seqs[-1] + 1) if seqs else ():
            block = blocks.owners.get((queue, seq))
            data = bytes(size) if block is None else blocks.read(block, BLOCK_HEADER_SIZE, size)
            yield EntryChunk(
                seq * per_block,
                data[: len(data) - len(data) % ENTRY_SIZE],
                path_for(seq * per_block),
            )

    return check_queue_entries(findings, where, chunks(), last_written, queue_log, log, path_for)
