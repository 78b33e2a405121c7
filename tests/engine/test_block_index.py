"""A shared topic's native block index (``dataplane.BlockIndex``) on its own: each
queue's seq range, block look-ups and ends, as the block store and the shared batch read
them. The per-queue facts are kept by queue id (block_index.rs), so these hold what a
map of them held: queues that never had blocks have no range, ranges are forgotten and
counted again whole, and the ends outlive the blocks' look-ups."""

from __future__ import annotations

import pytest

from storeadapter.engine.dataplane import BlockIndex

pytestmark = pytest.mark.one_layout  # no store: the index alone


def test_remembered_blocks_widen_the_queues_seq_range() -> None:
    index = BlockIndex()
    index.remember(7, 3, 40)
    index.remember(7, 1, 12)
    index.remember(7, 5, 41)

    assert index.seq_range(7) == (1, 5)
    assert index.get(7, 1) == 12
    assert index.get(7, 5) == 41
    assert index.get(7, 2) is None


def test_a_queue_without_blocks_has_no_range_even_when_its_ends_are_set() -> None:
    index = BlockIndex()
    index.set_max(900, 10)
    index.remember(3, 0, 1)

    assert index.seq_range(900) is None
    assert index.seq_range(2) is None
    assert index.seq_range(5_000_000) is None
    assert index.queues() == [3]
    assert index.max_of(900) == 10


def test_queues_with_blocks_are_listed_ascending() -> None:
    index = BlockIndex()
    for queue in (500, 2, 77, 2, 499):
        index.remember(queue, 0, queue)

    assert index.queues() == [2, 77, 499, 500]


def test_set_range_sets_and_forgets_a_range_without_touching_blocks() -> None:
    index = BlockIndex()
    index.remember(4, 0, 10)
    index.remember(4, 1, 11)

    index.set_range(4, (1, 1))
    assert index.seq_range(4) == (1, 1)
    index.set_range(4, None)
    assert index.seq_range(4) is None
    assert index.queues() == []
    assert index.get(4, 0) == 10
    index.set_range(10_000, None)  # a queue never seen: nothing to forget
    assert index.seq_range(10_000) is None


def test_pop_forgets_the_block_and_leaves_the_range() -> None:
    index = BlockIndex()
    index.remember(9, 0, 20)
    index.remember(9, 1, 21)

    assert index.pop(9, 1) == 21
    assert index.get(9, 1) is None
    assert index.seq_range(9) == (0, 1)
    assert index.pop(9, 1) is None


def test_clear_forgets_blocks_and_ranges_and_keeps_the_ends() -> None:
    index = BlockIndex()
    index.remember(1, 2, 30)
    index.set_min(1, 200)
    index.set_max(1, 250)
    index.set_loaded(1, True)

    index.clear()

    assert len(index) == 0
    assert index.get(1, 2) is None
    assert index.seq_range(1) is None
    assert index.queues() == []
    assert (index.min_of(1), index.max_of(1), index.loaded(1)) == (200, 250, True)
    assert index.loaded_queues() == [1]
    index.remember(1, 3, 31)
    assert index.seq_range(1) == (3, 3)


def test_dropping_files_counts_the_ranges_again_from_the_blocks_left() -> None:
    per_file = 4
    index = BlockIndex()
    index.remember(1, 0, 0)  # file 0
    index.remember(1, 1, 5)  # file 4
    index.remember(2, 0, 1)  # file 0
    index.remember(3, 0, 6)  # file 4

    assert index.files_with_last_blocks(per_file) == [0, 4]
    index.drop_files([0], per_file)

    assert index.seq_range(1) == (1, 1)
    assert index.seq_range(2) is None
    assert index.seq_range(3) == (0, 0)
    assert index.queues() == [1, 3]
    assert sorted(index.items()) == [(1, 1, 5), (3, 0, 6)]
    assert index.files_with_last_blocks(per_file) == [4]


def test_an_erased_owner_is_no_ones_block() -> None:
    index = BlockIndex()
    index.remember(0xFFFF_FFFF, 0, 3)

    assert len(index) == 0
    assert index.queues() == []
