"""The native store core answers ``read`` of a shared topic's queue in one call (issue 33):
its blocks looked up in the native block index, its entries copied from the block files,
and a queue not used yet read without making its object when the ends its load would
find are settled. Whatever it must judge is left to the long way, as for a queue with
files of its own (test_store_core_read.py)."""

from __future__ import annotations

import os

import pytest

from storeadapter.engine import fileio
from storeadapter.engine.queuebase import pack_entry
from tests.engine.storetools import (
    SHARED_LAYOUT,
    append_in_another_process,
    flip_bit,
    small_config,
)

pytestmark = pytest.mark.one_layout  # the topic is shared whatever the run's layout

CONFIG = small_config(**SHARED_LAYOUT)  # blocks of 4 entries, 8 blocks a file


@pytest.fixture
def store(open_store, store_path):
    opened = open_store(store_path, CONFIG)
    opened.create_topic("t", queues=4)
    assert opened._registry.topics["t"].blocks is not None
    return opened


def _append_varied(store, count):
    return [
        store.append(
            "t",
            f"body {i}".encode() * (i % 7 + 1),
            queue=i % 4 if i % 5 else 0,
            tag=None if i % 3 else f"tag{i % 5}",
            key=[f"k{i}", f"j{i % 2}"] if i % 2 else None,
            properties={"p": str(i), "q": "v"} if i % 4 == 1 else None,
        )
        for i in range(count)
    ]


def _no_long_way(monkeypatch, store):
    def refuse(*args, **kwargs):
        raise AssertionError(f"read went the long way: {args} {kwargs}")

    monkeypatch.setattr(store, "_read_long_way", refuse)


def _made(store, queue):
    return store._registry.topics["t"].queues.made_at(queue)


def _reads(store):
    """Reads over every queue at offsets across its blocks, each answered the long way."""
    wanted = {}
    for queue in range(4):
        high = store.queue_range("t", queue)[1]
        for offset in (0, 1, 3, 4, 5, 30, high - 1, high, high + 5):
            for count in (1, 3, 10, 500):
                wanted[queue, offset, count] = store._read_long_way("t", queue, offset, count)
    return wanted


def test_a_queue_not_used_yet_is_read_through_the_core_without_making_its_object(
    store, open_store, store_path, monkeypatch
):
    _append_varied(store, 400)
    wanted = _reads(store)
    store.close()
    reopened = open_store(store_path, CONFIG)
    _no_long_way(monkeypatch, reopened)

    for (queue, offset, count), messages in wanted.items():
        assert reopened.read("t", queue, offset, count) == messages
    assert [_made(reopened, queue) for queue in range(4)] == [None] * 4
    assert len(wanted[0, 0, 500]) == reopened.queue_range("t", 0)[1] > 32


def test_a_loaded_queue_is_read_through_the_core_from_its_ends(store, monkeypatch):
    _append_varied(store, 200)
    wanted = _reads(store)
    assert all(_made(store, queue).loaded for queue in range(4))
    _no_long_way(monkeypatch, store)

    for (queue, offset, count), messages in wanted.items():
        assert store.read("t", queue, offset, count) == messages


def test_entries_appended_after_a_read_are_seen_by_the_next_read(store, monkeypatch):
    _append_varied(store, 40)
    first = store.read("t", 3, 0, 100)
    more = _append_varied(store, 40)
    expected = store._read_long_way("t", 3, 0, 100)
    _no_long_way(monkeypatch, store)

    assert store.read("t", 3, 0, 100) == expected
    assert expected[: len(first)] == first
    assert {r.message_id for r in more if r.queue == 3} <= {m.message_id for m in expected}


def test_a_last_entry_past_the_tail_is_trimmed_by_the_queue_s_load_as_the_long_way_trims_it(
    store, open_store, store_path
):
    _append_varied(store, 40)
    expected = store._read_long_way("t", 1, 0, 100)
    high = store.queue_range("t", 1)[1]
    tail = store.commitlog.tail
    # What a writer that died before publishing leaves: an entry past the queue's end
    # whose record lies past the tail.
    store._registry.topics["t"].blocks.write(1, high, pack_entry(tail + 4096, 90, 0))
    store.close()
    reopened = open_store(store_path, CONFIG)

    assert reopened.read("t", 1, 0, 100) == expected
    assert _made(reopened, 1) is not None  # its end was not settled: loaded as before
    assert reopened.queue_range("t", 1) == (0, high)


def test_queues_read_after_retention_start_at_their_minimum(store, open_store, store_path):
    _append_varied(store, 400)
    store.delete_expired(now_ms=2**62)
    assert store.commitlog.min_offset > 0
    wanted = {q: store._read_long_way("t", q, 0, 500) for q in range(4)}
    ranges = {q: store.queue_range("t", q) for q in range(4)}
    assert any(low > 0 for low, _ in ranges.values())
    store.close()
    reopened = open_store(store_path, CONFIG)

    for queue in range(4):
        assert reopened.read("t", queue, 0, 500) == wanted[queue]
        assert reopened.queue_range("t", queue) == ranges[queue]
        assert wanted[queue][0].queue_offset == ranges[queue][0]


def test_a_record_damaged_under_an_open_store_is_left_to_the_long_way_which_reports_it(
    store, store_path
):
    results = _append_varied(store, 40)
    victims = [r for r in results if r.queue == 2]
    before = store.read("t", 2, 0, 100)
    flip_bit(store_path, victims[3].commit_offset + 60, bit=2)  # inside the record's text

    after = store.read("t", 2, 0, 100)
    assert after == store._read_long_way("t", 2, 0, 100)
    assert victims[3].message_id not in [m.message_id for m in after]
    assert [m for m in before if m.message_id != victims[3].message_id] == after
    reported = [c.commit_offset for c in store.stats().corruptions]
    assert victims[3].commit_offset in reported


def test_a_replaced_seam_pread_sees_every_read_of_entries(
    store, open_store, store_path, monkeypatch
):
    _append_varied(store, 40)
    store.close()
    reopened = open_store(store_path, CONFIG)
    seen = []
    genuine = fileio.pread

    def counting(fd, size, offset):
        seen.append(size)
        return genuine(fd, size, offset)

    monkeypatch.setattr(fileio, "pread", counting)
    assert len(reopened.read("t", 1, 0, 3)) == 3
    assert 3 * 20 in seen


def test_appends_of_another_process_are_read_through_the_core(store, store_path, tmp_path):
    store.append("t", b"before", queue=0)
    assert [m.body for m in store.read("t", 0, 0)] == [b"before"]
    ids = append_in_another_process(store_path, "t", 40, tmp_path / "acks")
    read = [m for q in range(4) for m in store.read("t", q, 0, 100)]
    assert sorted(m.message_id for m in read if m.body != b"before") == sorted(ids)


def _block_files(store_path):
    directory = store_path / "consumequeue" / "t" / "blocks"
    return sorted(p for p in directory.iterdir() if p.name.isdigit())


def test_a_block_file_cut_short_under_an_open_store_is_read_as_the_long_way_reads_it(
    store, store_path
):
    _append_varied(store, 40)
    assert store.read("t", 2, 0, 100)
    os.truncate(_block_files(store_path)[0], 0)  # the pages the earlier read used are gone

    after = store.read("t", 2, 0, 100)
    assert after == store._read_long_way("t", 2, 0, 100)


def _read_mappings_of_deleted_block_files() -> list[str]:
    """The read-only mappings (the core's for reads) of deleted block files. (The writer's
    are read-write: the shared batch lets go of a closed file's at its next batch.)"""
    with open("/proc/self/maps") as maps:
        return [
            line
            for line in maps
            if "/blocks/" in line and "(deleted)" in line and line.split()[1] == "r--s"
        ]


def test_block_files_deleted_by_retention_are_not_kept_mapped(store, store_path):
    _append_varied(store, 400)
    for queue in range(4):
        store.read("t", queue, 0, 500)  # maps every block file
    files = len(_block_files(store_path))
    store.delete_expired(now_ms=2**62)
    assert len(_block_files(store_path)) < files
    for _ in range(3):
        for queue in range(4):
            store.read("t", queue, 0, 500)

    assert _read_mappings_of_deleted_block_files() == []
