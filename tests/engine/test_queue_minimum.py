"""A queue's minimum after retention, when a power loss left a hole among its entries.

The minimum moves to the first entry whose record is still in the log. Unwritten
entries (a power loss kept later entries and lost earlier ones) are judged by the
written entry after them: a search that took a hole for "below the log" skipped the
live entries before the hole, and the queue lost messages that were still stored.
"""

from __future__ import annotations

from storeadapter.engine.consumequeue import ENTRY_SIZE, ConsumeQueue
from storeadapter.engine.handles import HandleCache
from storeadapter.engine.queuebase import pack_entry


def _queue(tmp_path, offsets: list[int | None]) -> ConsumeQueue:
    queue = ConsumeQueue(tmp_path / "q", 64, HandleCache(8))
    queue.create_first_file()
    packed = b"".join(
        pack_entry(offset, 100, 0) if offset is not None else bytes(ENTRY_SIZE)
        for offset in offsets
    )
    queue.write(0, packed)
    return queue


def test_a_hole_after_the_new_minimum_does_not_move_it_past_live_entries(tmp_path):
    queue = _queue(tmp_path, [100, 200, 300, None, None, None, 700, 800])
    assert queue.advance_min(250) == 2
    assert queue.entry(2) == (300, 100, 0)


def test_a_hole_before_the_new_minimum_is_passed(tmp_path):
    queue = _queue(tmp_path, [100, None, None, 400, 500])
    assert queue.advance_min(450) == 4


def test_entries_all_below_the_log_leave_only_the_end(tmp_path):
    queue = _queue(tmp_path, [100, 200, None, 400])
    assert queue.advance_min(1000) == 4
