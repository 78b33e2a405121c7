"""The native store core answers ``read`` of a shared topic's queue in one call (issue 33):
its blocks looked up in the native block index, its entries copied from the block files,
and a queue not used yet read without making its object when the ends its load would
find are settled. Whatever it must judge is left to the long way, as for a queue with
files of its own (test_store_core_read.py)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storeadapter.engine import filters
from storeadapter.engine.queuebase import pack_entry
from tests.engine.storetools import (
    SHARED_LAYOUT,
    append_in_another_process,
    copy_store,
    flip_bit,
    preads_counted,
    run_until_killed,
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


class _View:
    """A store that is not a MessageStore: a filtered scan reads it through ``read``."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)


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


def _pointing_at_another_queue_s_record(store):
    """What a writer that died before publishing may leave inside the tail: an entry past
    queue 1's end whose record is another queue's. Queue 1's messages (read the long way
    first) and its end, which the entry is not part of."""
    _append_varied(store, 40)
    expected = store._read_long_way("t", 1, 0, 100)
    high = store.queue_range("t", 1)[1]
    offset, size, _tag = store._registry.topics["t"].blocks.entry(2, 0)
    store._registry.topics["t"].blocks.write(1, high, pack_entry(offset, size, 0))
    return expected, high


@pytest.mark.parametrize("reach", ["from_the_start", "ending_at_it", "it_alone"])
def test_a_read_reaching_a_last_entry_pointing_at_another_queue_s_record_trims_it_first(
    store, open_store, store_path, reach
):
    expected, high = _pointing_at_another_queue_s_record(store)
    store.close()
    reopened = open_store(store_path, CONFIG)
    start, count = {"from_the_start": (0, 100), "ending_at_it": (high - 2, 3)}.get(reach, (high, 1))

    assert reopened.read("t", 1, start, count) == expected[start : start + count]
    assert _made(reopened, 1) is not None  # its end was not settled: loaded as before
    assert reopened.queue_range("t", 1) == (0, high)
    assert reopened.read("t", 1, 0, 100) == expected


def test_a_read_short_of_a_last_entry_pointing_at_another_queue_s_record_leaves_it_unlooked_at(
    store, open_store, store_path
):
    # The walk never reaches that entry, so its record need not be looked at (one random
    # miss a read at a million queues): the queue is read without its load, and whatever
    # asks for its end next loads it (and trims the entry) as before.
    expected, high = _pointing_at_another_queue_s_record(store)
    store.close()
    reopened = open_store(store_path, CONFIG)

    assert reopened.read("t", 1, 0, 3) == expected[:3]
    assert reopened.read("t", 1, high - 4, 3) == expected[high - 4 : high - 1]
    assert _made(reopened, 1) is None


def _reopened_after_a_short_read(store, open_store, store_path):
    """The store of ``_pointing_at_another_queue_s_record`` opened again and read short of
    queue 1's bad last entry: (the store, the queue's messages, its settled end)."""
    expected, high = _pointing_at_another_queue_s_record(store)
    store.close()
    reopened = open_store(store_path, CONFIG)
    assert reopened.read("t", 1, 0, 3) == expected[:3]
    return reopened, expected, high


@pytest.mark.parametrize("asked", ["queue_range", "queue_ranges"])
def test_a_queue_s_end_after_a_read_short_of_a_bad_last_entry_is_the_settled_one(
    store, open_store, store_path, asked
):
    reopened, expected, high = _reopened_after_a_short_read(store, open_store, store_path)

    if asked == "queue_range":
        assert reopened.queue_range("t", 1) == (0, high)
    else:
        assert reopened.queue_ranges("t", 1, 1) == [(0, high)]
    assert reopened.read("t", 1, 0, 100) == expected


@pytest.mark.parametrize("how", ["append", "append_batch"])
def test_an_append_after_a_read_short_of_a_bad_last_entry_settles_the_queue_s_end_first(
    store, open_store, store_path, how
):
    reopened, expected, high = _reopened_after_a_short_read(store, open_store, store_path)

    if how == "append":
        result = reopened.append("t", b"after", queue=1)
    else:
        (result,) = reopened.append_batch("t", [{"body": b"after", "queue": 1}])

    assert result.queue_offset == high  # the bad entry's place, taken by the new one
    got = reopened.read("t", 1, 0, 100)
    assert got[:-1] == expected
    assert (got[-1].body, got[-1].queue_offset) == (b"after", high)
    assert reopened.queue_range("t", 1) == (0, high + 1)
    assert reopened.read("t", 1, high, 5) == got[-1:]


KILLED_AFTER_THE_ENTRY = """
import os, signal, sys
from storeadapter.engine import MessageStore
from storeadapter.engine.queuebase import pack_entry
from tests.engine.storetools import SHARED_LAYOUT, small_config
path, high, read = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
store = MessageStore.open(path, small_config(**SHARED_LAYOUT))
offset, size, _tag = store._registry.topics["t"].blocks.entry(2, 0)
store._registry.topics["t"].blocks.write(1, high, pack_entry(offset, size, 0))
if read:
    assert len(store.read("t", 1, 0, 3)) == 3
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_open_after_a_kill_is_the_same_whether_a_read_stopped_short_of_a_bad_last_entry(
    store, open_store, store_path, tmp_path
):
    _append_varied(store, 40)
    high = store.queue_range("t", 1)[1]
    store.close()
    seen = []
    for read in (False, True):
        path = copy_store(store_path, tmp_path / f"read{int(read)}")
        run_until_killed(KILLED_AFTER_THE_ENTRY, path, high, int(read))
        reopened = open_store(path, CONFIG)
        ranges = [reopened.queue_range("t", queue) for queue in range(4)]
        reads = [
            [(m.message_id, m.queue_offset) for m in reopened.read("t", queue, 0, 100)]
            for queue in range(4)
        ]
        appended = reopened.append("t", b"after", queue=1).queue_offset
        seen.append((ranges, reads, appended, reopened.read("t", 1, high - 1, 5)[-1].body))
        reopened.close()

    assert seen[0] == seen[1]
    assert seen[1][2] >= high and seen[1][3] == b"after"


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
    seen = preads_counted(monkeypatch)
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


LIVE_WRITER = """
import sys, time
from pathlib import Path
from storeadapter.engine import MessageStore
from tests.engine.storetools import SHARED_LAYOUT, small_config
path, stop = sys.argv[1], Path(sys.argv[2])
with MessageStore.open(path, small_config(**SHARED_LAYOUT)) as store:
    sent = 0
    while not stop.exists():
        batch = [{"body": b"live %d" % (sent + i), "queue": i % 2} for i in range(4)]
        store.append_batch("t", batch)
        sent += 4
        Path(sys.argv[3]).write_text(str(sent))
        time.sleep(0.002)
"""


def _start_live_writer(store_path, tmp_path):
    repo = Path(__file__).resolve().parents[2]
    stop, sent = tmp_path / "stop", tmp_path / "sent"
    child = subprocess.Popen(
        [sys.executable, "-c", LIVE_WRITER, str(store_path), str(stop), str(sent)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        stderr=subprocess.PIPE,
    )
    return child, stop, sent


def _published_past(store):
    """Wait until another process published past what ``store`` followed: its next read
    follows, and marks the shared topic's block store stale."""
    deadline = time.monotonic() + 30
    while store._shared.read().tail <= store.commitlog.tail:
        assert time.monotonic() < deadline, "the writer published nothing"
        time.sleep(0.001)


def test_queues_not_used_yet_are_read_without_their_load_beside_a_live_writer(
    store, open_store, store_path, tmp_path, monkeypatch
):
    # Queues 2 and 3 filled here, then read by a process that opened before a writer in
    # another process started appending to queues 0 and 1: each read follows the writer
    # (the block store marked stale: the writer may have allocated blocks), yet queues 2
    # and 3 have had nothing published since, so their ends are settled all the same.
    store.append_batch("t", [{"body": b"old %d" % i, "queue": 2 + i % 2} for i in range(30)])
    wanted = {q: store._read_long_way("t", q, 0, 100) for q in (2, 3)}
    store.close()
    reader = open_store(store_path, CONFIG)
    child, stop, sent = _start_live_writer(store_path, tmp_path)
    try:
        blocks = reader._registry.topics["t"].blocks
        for queue in (2, 3):
            for offset in (0, 4, 9):
                _published_past(reader)
                got = reader.read("t", queue, offset, 10)
                assert blocks.stale
                assert got == wanted[queue][offset : offset + 10]
                assert _made(reader, queue) is None  # read without its load
        # The writer's own queues: every message published so far, in order.
        _published_past(reader)
        for queue in (0, 1):
            got = reader.read("t", queue, 0, 500)
            assert [m.queue_offset for m in got] == list(range(len(got)))
            assert all(m.body.startswith(b"live ") for m in got)
    finally:
        stop.touch()
        child.wait(timeout=60)
    assert child.returncode == 0, child.stderr.read().decode()[-2000:]
    total = int(sent.read_text())
    bodies = sorted(m.body for q in (0, 1) for m in reader.read("t", q, 0, total + 10))
    assert bodies == sorted(b"live %d" % i for i in range(total))


APPENDER = """
import sys
from storeadapter.engine import MessageStore
from tests.engine.storetools import SHARED_LAYOUT, small_config
with MessageStore.open(sys.argv[1], small_config(**SHARED_LAYOUT)) as store:
    for queue in map(int, sys.argv[2:]):
        store.append_batch("t", [{"body": b"elsewhere %d" % i, "queue": queue} for i in range(9)])
"""


def _append_elsewhere(store_path, *queues):
    """Nine messages to each of ``queues``, appended by another process."""
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-c", APPENDER, str(store_path), *map(str, queues)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr.decode()[-2000:]


def test_a_block_another_process_allocated_is_found_without_the_long_way(
    store, store_path, monkeypatch
):
    # The queues made and loaded here; another process fills their last blocks and
    # allocates new ones: the reads find those blocks (as the long way's look-up does),
    # instead of going the long way.
    store.append_batch("t", [{"body": b"here %d" % i, "queue": i % 4} for i in range(10)])
    for queue in range(4):
        store.read("t", queue, 0)
    _append_elsewhere(store_path, 0, 1, 2, 3)
    _no_long_way(monkeypatch, store)
    for queue in range(4):
        got = store.read("t", queue, 0, 100)
        here = [b"here %d" % i for i in range(queue, 10, 4)]
        assert [m.body for m in got] == here + [b"elsewhere %d" % i for i in range(9)]
        assert [m.queue_offset for m in got] == list(range(len(got)))


@pytest.mark.parametrize(
    "expression",
    [
        'properties.p == "5" || tag == "tag1"',
        'key.startsWith("k1")',
        "body_size > 20",
        "offset % 3 == 0 && queue != 1",
    ],
)
def test_a_filtered_scan_of_a_shared_topic_is_answered_by_the_core(store, monkeypatch, expression):
    _append_varied(store, 300)
    wanted = filters.scan(_View(store), "t", expression, max_matches=filters.MAX_MATCHES)
    assert wanted.messages and wanted.cursor is None
    asked = []
    core = store._core

    class Core:
        def __getattr__(self, name):
            return getattr(core, name)

        def scan_filtered(self, *args):
            answer = core.scan_filtered(*args)
            asked.append(answer is not None)
            return answer

    monkeypatch.setattr(store, "_core", Core())
    _no_long_way(monkeypatch, store)
    got = filters.scan(store, "t", expression, max_matches=filters.MAX_MATCHES)
    assert asked and all(asked)  # every step answered natively
    assert got.messages == wanted.messages
    assert (got.scanned, got.errors, got.cursor) == (wanted.scanned, wanted.errors, None)


def test_a_filtered_scan_of_a_shared_topic_goes_on_from_where_its_budget_stopped(store):
    _append_varied(store, 300)
    expression = 'properties.q == "v" || body_size > 40'
    wanted = filters.scan(_View(store), "t", expression, max_matches=filters.MAX_MATCHES)
    found, cursor, steps = [], None, 0
    while True:
        part = filters.scan(store, "t", expression, cursor=cursor, max_records=37)
        found += part.messages
        steps += 1
        if part.cursor is None:
            break
        cursor = part.cursor
    assert found == wanted.messages and steps > 5


def _long_ways(monkeypatch, store):
    """The reads that go the long way, each still answered by it."""
    taken = []
    long_way = store._read_long_way

    def record(*args, **kwargs):
        taken.append(args)
        return long_way(*args, **kwargs)

    monkeypatch.setattr(store, "_read_long_way", record)
    return taken


def test_a_block_store_closed_after_a_read_leaves_the_next_read_to_the_long_way(store, monkeypatch):
    _append_varied(store, 40)
    blocks = store._registry.topics["t"].blocks
    taken = _long_ways(monkeypatch, store)
    store.read("t", 1, 0, 5)
    store.read("t", 1, 0, 5)
    assert taken == []

    monkeypatch.setattr(blocks, "closed", True)
    store.read("t", 1, 0, 5)

    assert len(taken) == 1


def test_a_block_store_given_another_index_after_a_read_is_read_through_that_index(
    store, monkeypatch
):
    _append_varied(store, 40)
    blocks = store._registry.topics["t"].blocks
    expected = store._read_long_way("t", 2, 0, 5)
    taken = _long_ways(monkeypatch, store)
    assert store.read("t", 2, 0, 5) == expected
    assert store.read("t", 2, 0, 5) == expected

    emptied = type(blocks.index)()  # knows no block: the core cannot read through it
    monkeypatch.setattr(blocks, "index", emptied)
    store.read("t", 2, 0, 5)

    assert len(taken) == 1


def test_a_seam_pread_replaced_after_a_read_sees_the_next_read_of_entries(
    store, open_store, store_path, monkeypatch
):
    _append_varied(store, 40)
    store.close()
    reopened = open_store(store_path, CONFIG)
    expected = reopened._read_long_way("t", 2, 0, 3)
    assert reopened.read("t", 1, 0, 3) == reopened._read_long_way("t", 1, 0, 3)
    seen = preads_counted(monkeypatch)
    assert reopened.read("t", 2, 0, 3) == expected
    assert 3 * 20 in seen


def test_a_topic_deleted_and_made_again_after_a_read_is_read_anew(store, monkeypatch):
    _append_varied(store, 40)
    assert len(store.read("t", 1, 0, 100)) > 0
    store.delete_topic("t")
    store.create_topic("t", queues=4)
    assert store._registry.topics["t"].blocks is not None
    made = [store.append("t", f"new {i}".encode(), queue=1) for i in range(3)]

    assert [m.message_id for m in store.read("t", 1, 0, 100)] == [r.message_id for r in made]


@pytest.mark.parametrize("how", ["in_place", "replaced"])
def test_a_retention_floor_raised_after_a_read_holds_for_the_next_queue_read(
    store, open_store, store_path, how
):
    results = _append_varied(store, 400)
    store.close()
    reopened = open_store(store_path, CONFIG)
    assert len(reopened.read("t", 3, 0, 5)) == 5  # a queue not made: its floor looked at
    floor = [r for r in results if r.queue == 1][5].commit_offset
    state = reopened._registry.topics["t"]
    if how == "in_place":
        state.info.retained_from = floor
    else:
        state.info = dataclasses.replace(state.info, retained_from=floor)

    got = reopened.read("t", 1, 0, 500)
    assert got == reopened._read_long_way("t", 1, 0, 500)
    assert got[0].queue_offset == 5
    assert reopened.queue_range("t", 1)[0] == 5


def test_queues_read_after_retention_under_an_open_store_start_at_their_minimum(
    store, open_store, store_path
):
    _append_varied(store, 400)
    store.close()
    reopened = open_store(store_path, CONFIG)
    assert len(reopened.read("t", 3, 0, 5)) == 5  # a queue not made: the log's start looked at
    reopened.delete_expired(now_ms=2**62)
    assert reopened.commitlog.min_offset > 0

    for queue in range(3):
        got = reopened.read("t", queue, 0, 500)
        low = reopened.queue_range("t", queue)[0]
        assert got == reopened._read_long_way("t", queue, 0, 500)
        assert got[0].queue_offset == low
        assert got[0].commit_offset >= reopened.commitlog.min_offset
