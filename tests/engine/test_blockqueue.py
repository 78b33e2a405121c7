"""Shared topics' block store: entries of many queues in blocks of a few files."""

from __future__ import annotations

import os

import pytest

from storeadapter.engine.blockqueue import (
    BLOCK_HEADER_SIZE,
    BlockQueue,
    BlockStore,
)
from storeadapter.engine.consumequeue import ENTRY_SIZE
from storeadapter.engine.queuebase import pack_entry, unpack_entry

PER_BLOCK = 4
PER_FILE = 3


def entries(queue: int, start: int, count: int) -> bytes:
    """Packed entries whose commit offset says which queue and offset they are."""
    return b"".join(
        pack_entry(queue * 1_000_000 + offset + 1, 100, offset)
        for offset in range(start, start + count)
    )


@pytest.fixture
def open_blocks(tmp_path):
    opened: list[BlockStore] = []

    def _open() -> BlockStore:
        blocks = BlockStore(tmp_path / "blocks", PER_BLOCK, PER_FILE)
        opened.append(blocks)
        return blocks

    yield _open
    for blocks in opened:
        blocks.close()


def test_entries_round_trip_across_blocks_and_files(open_blocks):
    blocks = open_blocks()
    for queue in range(5):
        blocks.write(queue, 0, entries(queue, 0, 3))
    for queue in range(5):
        blocks.write(queue, 3, entries(queue, 3, 6))

    for queue in range(5):
        assert blocks.read(queue, 0, 9) == entries(queue, 0, 9)
        assert blocks.read(queue, 2, 5) == entries(queue, 2, 5)
        assert blocks.entry(queue, 8) == unpack_entry(entries(queue, 8, 1))
    assert len(blocks.files) > 1
    assert len(os.listdir(blocks.directory)) == len(blocks.files)


def test_a_reopened_store_finds_every_block_from_the_headers(open_blocks):
    first = open_blocks()
    for queue in (7, 3, 7, 1):
        first.write(queue, first.written_end(queue), entries(queue, first.written_end(queue), 5))

    again = open_blocks()

    assert again.end == first.end
    for queue in (1, 3, 7):
        assert again.written_end(queue) == first.written_end(queue)
        end = again.written_end(queue)
        assert again.read(queue, 0, end) == entries(queue, 0, end)
    assert again.written_end(2) == 0


def test_another_instance_sees_blocks_allocated_since_it_looked(open_blocks):
    writer, reader = open_blocks(), open_blocks()
    writer.write(0, 0, entries(0, 0, 2))
    assert reader.read(0, 0, 2) == entries(0, 0, 2)

    writer.write(5, 0, entries(5, 0, 11))  # new blocks, and a new file

    assert reader.read(5, 0, 11) == entries(5, 0, 11)
    assert reader.end == writer.end


def test_a_torn_header_ends_the_allocated_run_and_later_headers_are_erased(open_blocks):
    blocks = open_blocks()
    for queue in range(4):
        blocks.write(queue, 0, entries(queue, 0, 1))
    victim = blocks.block_of(2, 0)
    block_file = blocks._file_of(victim)
    block_file.pwrite(victim, 0, b"\xff" * 6)  # torn: half a header

    again = open_blocks()

    assert again.end == victim
    assert again.read(3, 0, 1) == b""
    assert again.erase_unallocated() == 2  # the torn header and the one after it
    again.write(3, 0, entries(3, 0, 2))  # takes the torn block's place
    assert open_blocks().read(3, 0, 2) == entries(3, 0, 2)
    assert open_blocks().end == victim + 1


def test_a_forgotten_queue_gives_its_blocks_to_no_one(open_blocks):
    blocks = open_blocks()
    blocks.write(1, 0, entries(1, 0, 9))
    blocks.write(2, 0, entries(2, 0, 1))

    blocks.forget_queue(1)

    again = open_blocks()
    assert again.seq_range(1) is None
    assert again.read(1, 0, 9) == b""
    assert again.read(2, 0, 1) == entries(2, 0, 1)
    assert again.end == blocks.end


def test_files_with_no_block_in_use_are_deleted(open_blocks):
    blocks = open_blocks()
    for offset in range(0, 40, 4):
        blocks.write(0, offset, entries(0, offset, 4))
    files_before = sorted(blocks.files)

    dropped = blocks.drop_files(lambda queue, seq: seq >= 7)

    assert dropped == 2
    assert sorted(blocks.files) == files_before[2:]
    assert blocks.seq_range(0) == (6, 9)
    assert blocks.read(0, 28, 12) == entries(0, 28, 12)
    assert open_blocks().seq_range(0) == (6, 9)


def test_written_end_rounds_up_to_a_whole_entry(open_blocks):
    blocks = open_blocks()
    blocks.write(0, 0, pack_entry(5, 10, 0) + pack_entry(50, 10, 0))

    assert blocks.written_end(0) == 2


def test_a_block_queue_behaves_like_a_consume_queue(open_blocks):
    blocks = open_blocks()
    queue = BlockQueue(blocks, 3)
    queue.write(0, entries(3, 0, 10))

    assert (queue.min_offset, queue.max_offset) == (0, 10)
    assert queue.read(8, 5) == entries(3, 8, 2)
    queue.truncate(6)
    assert queue.max_offset == 6
    assert queue.entry(6) is None
    assert queue.advance_min(3_000_004) == 3
    reopened = BlockQueue(open_blocks(), 3)
    assert (reopened.min_offset, reopened.max_offset) == (0, 6)


def test_block_layout_is_header_then_entries(open_blocks):
    blocks = open_blocks()
    blocks.write(9, 5, entries(9, 5, 1))
    block = blocks.block_of(9, 1)
    raw = blocks._file_of(block).pread(block, 0, blocks.block_bytes)

    assert len(raw) == BLOCK_HEADER_SIZE + PER_BLOCK * ENTRY_SIZE
    assert raw[BLOCK_HEADER_SIZE + ENTRY_SIZE : BLOCK_HEADER_SIZE + 2 * ENTRY_SIZE] == entries(
        9, 5, 1
    )


def _reference_load(blocks: BlockStore, allocated: int) -> tuple[dict, list[int], int]:
    """The allocated run as blockqueue.parse_header reads it header by header (the scan
    ``BlockStore._load`` did in Python): blocks, damaged blocks, allocation end."""
    from storeadapter.engine.blockqueue import ERASED, parse_header

    found: dict = {}
    damaged: list[int] = []
    end = min(blocks.files, default=0)
    for first, block_file in sorted(blocks.files.items()):
        if first != end:
            break
        data = block_file.read_all()
        for slot in range(block_file.blocks):
            header = data[slot * blocks.block_bytes :][:BLOCK_HEADER_SIZE]
            owner = parse_header(header) if len(header) == BLOCK_HEADER_SIZE else None
            if owner is not None:
                if owner[0] != ERASED:
                    found[owner] = first + slot
            elif end < allocated:
                damaged.append(end)
            else:
                return found, damaged, end
            end += 1
    return found, damaged, end


def test_a_reopen_finds_the_blocks_the_header_by_header_scan_finds(open_blocks):
    writer = open_blocks()
    for round_ in range(4):
        for queue in (5, 2, 9, 2, 0):
            writer.write(queue, round_ * 3, entries(queue, round_ * 3, 3))
    writer.forget_queue(9)  # erased headers: allocated, no one's
    writer.publish_end(1 << 20)
    published = writer.end
    block_file = writer.files[PER_FILE]
    block_file.pwrite(PER_FILE + 1, 0, b"\xff" * BLOCK_HEADER_SIZE)  # damaged, below the end
    writer.close()

    again = open_blocks()
    found, damaged, end = _reference_load(again, published)
    assert (again.end, again.damaged) == (end, damaged) == (published, [PER_FILE + 1])
    native = {(queue, seq): block for queue, seq, block in again.index.items()}
    assert native == found
    assert again.queues_with_blocks() == sorted({queue for queue, _ in found})
    for queue in (0, 2, 5, 9):
        seqs = sorted(seq for q, seq in found if q == queue)
        assert again.seq_range(queue) == ((seqs[0], seqs[-1]) if seqs else None)
