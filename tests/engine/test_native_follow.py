"""The native append follows other processes' appends itself and writes on (issue 31,
part 11; native/src/python/append_core/follow.rs): no decline to the long way when
another process (here, another store object with its own mapping and pen, or a child
process) published since this one last caught up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.storetools import assert_dense_and_unique, small_config

REPO = Path(__file__).resolve().parents[2]

# Room for every message of a test in one segment and one file per queue: no roll and
# no new queue file, the two steps the core leaves to the long way.
BIG = {"segment_bytes": 8 << 20, "queue_file_entries": 1 << 16}
# No periodic flush during a test: a flush follows the other store's appends (the long
# way), which would decide for the test how far behind a store is when it next appends.
QUIET = {"flush_interval_ms": 3_600_000, "queue_flush_interval_ms": 3_600_000}


@pytest.fixture
def two(open_store, store_path):
    config = small_config(flush_mode="async", **BIG, **QUIET)
    first = open_store(store_path, config)
    second = open_store(store_path, config)
    if first._appender is None:
        pytest.skip("no native append here (the flock pen)")
    first.create_topic("t", queues=3, layout="files")
    # The first segment and every queue loaded in both (the long way does both: an
    # append to a given queue), so that the core applies from here on.
    for name, store in (("first", first), ("second", second)):
        for queue in range(3):
            store.append("t", f"warm-{name}-{queue}".encode(), queue=queue)
    return first, second


WARM = [f"warm-{name}-{queue}".encode() for name in ("first", "second") for queue in range(3)]


def test_two_writers_taking_turns_follow_each_other_natively(two):
    first, second = two
    cores = [first._appender, second._appender]
    before = [(core.appended, core.followed, core.caught_up) for core in cores]
    turns = [i % 2 if i < 100 else (i // 3) % 2 for i in range(300)]
    results = []
    for i, turn in enumerate(turns):
        results.append((first, second)[turn].append("t", f"m{i}".encode()))

    # Every append was the core's, and each change of writer was followed natively.
    # The second wrote last before (warming up): the first's first turn is a change too.
    changes = [sum(1 for i in range(300) if turns[i] == w != ([1] + turns)[i]) for w in (0, 1)]
    for w, (core, then) in enumerate(zip(cores, before, strict=True)):
        assert core.appended - then[0] == turns.count(w)
        assert core.followed - then[1] == changes[w]
        assert core.caught_up == then[2]
    # Each queue's offsets in the order they were handed out, whoever wrote them.
    for queue in range(3):
        offsets = [r.queue_offset for r in results if r.queue == queue]
        assert offsets == list(range(2, 2 + len(offsets)))  # after the two warming up
    for store in (first, second):
        bodies = assert_dense_and_unique(store, "t")
        assert sorted(bodies) == sorted([*WARM, *(f"m{i}".encode() for i in range(300))])
        assert store.get(results[-1].message_id).body == b"m299"


def test_interleaved_writers_leave_every_entry_pointing_at_its_own_message(two):
    first, second = two
    turns = [(i // 2) % 2 if i < 200 else i % 2 for i in range(400)]
    results = [(first, second)[turn].append("t", f"m{i}".encode()) for i, turn in enumerate(turns)]

    # Each result reads back its own body where it says it landed, in both stores,
    # and each queue's entry at each offset points at that offset's record.
    for store in (first, second):
        for i, result in enumerate(results):
            [message] = store.read("t", result.queue, result.queue_offset, 1)
            assert (message.body, message.commit_offset) == (
                f"m{i}".encode(),
                result.commit_offset,
            )
            assert (message.topic, message.queue) == ("t", result.queue)
        assert_dense_and_unique(store, "t")


def _next_queue(store) -> int:
    topic = store._registry.topics["t"]
    return topic.writable[topic.round_robin % len(topic.writable)]


def _first_writes_another_queue(first, second):
    """An append by the first into a queue the second's next append does not go to."""
    while True:
        written = first.append("t", b"other")
        if written.queue != _next_queue(second):
            return written


def test_a_followed_append_leaves_its_queue_for_this_processs_flush(two):
    first, second = two
    second._flush_everything()  # nothing of this process's left to fsync
    written = _first_writes_another_queue(first, second)
    queue = second._registry.topics["t"].queues[written.queue]
    changes, followed = queue.changes, second._appender.followed

    mine = second.append("t", b"mine")

    assert second._appender.followed == followed + 1  # the core's own follow
    assert mine.queue != written.queue
    assert queue.max_offset == written.queue_offset + 1
    assert queue.changes == changes + 1
    assert queue.files[-1] in queue.dirty
    assert queue in second._registry.dirty
    assert second.commitlog.active in second.commitlog.unsynced
    assert second._seen.tail == second.commitlog.tail == mine.commit_offset + len(b"mine") + 65


def test_a_write_declined_after_a_native_follow_keeps_the_follows_marks(two):
    first, second = two
    # The active segment filled by the first to within a big body's length: the
    # second follows natively, then its write does not fit (a roll: the long way).
    segment = first.commitlog.active
    for size, room in ((900, 20_000), (50, 600)):
        while segment.end - first.commitlog.tail > room:
            first.append("t", b"f" * size)
    second._flush_everything()
    written = _first_writes_another_queue(first, second)
    assert first.commitlog.active is segment
    queue = second._registry.topics["t"].queues[written.queue]
    changes, followed, appended = (
        queue.changes,
        second._appender.followed,
        second._appender.appended,
    )

    big = second.append("t", b"b" * 1000)

    assert second._appender.followed == followed + 1
    assert second._appender.appended == appended  # declined: the long way wrote it
    assert big.commit_offset >= segment.end
    assert queue.max_offset == written.queue_offset + 1
    assert queue.changes == changes + 1
    assert second.read("t", big.queue, big.queue_offset, 1)[0].body == b"b" * 1000
    [other] = second.read("t", written.queue, written.queue_offset, 1)
    assert (other.body, other.commit_offset) == (b"other", written.commit_offset)


def test_a_batch_after_another_writers_batch_follows_natively(two):
    first, second = two
    cores = [first._appender, second._appender]
    for round_ in range(20):
        for name, store in (("a", first), ("b", second)):
            got = store.append_batch("t", [f"{name}{round_}-{i}".encode() for i in range(7)])
            assert len(got) == 7
    assert all(core.batched >= 20 and core.followed >= 19 for core in cores)
    for store in (first, second):
        assert len(assert_dense_and_unique(store, "t")) == 286


def test_the_core_writes_on_after_the_store_follows_a_topic_change(two):
    first, second = two
    second.create_topic("other", queues=1)  # not an append: the store's `_follow` takes it
    core = first._appender
    appended, caught_up = core.appended, core.caught_up
    result = first.append("t", b"two")
    assert (core.appended - appended, core.caught_up - caught_up) == (1, 1)
    assert "other" in {t.name for t in first.topics()}
    assert second.read("t", result.queue, result.queue_offset)[0].body == b"two"
    assert len(assert_dense_and_unique(second, "t")) == 7


def test_seen_replaced_by_the_store_between_native_follows_is_read_again(two):
    # The core keeps `_seen` as words while the snapshot it read is the store's
    # (follow.rs `SeenWords`); the store's own follow and a topic change replace it
    # with a new one, whose versions and tail the next native follow must read.
    first, second = two
    core = second._appender
    for round_ in range(3):
        first.append("t", f"a{round_}".encode())
        second.append("t", f"b{round_}".encode())  # a native follow: `_seen` known
        assert second._seen == second._shared.read()
        first.append("t", f"c{round_}".encode())
        second._follow()  # the store's follow: a new snapshot, equal values
        assert second._seen == second._shared.read()
        first.create_topic(f"new{round_}", queues=1, layout="files")  # topics move
        first.append("t", f"d{round_}".encode())
        followed, caught_up = core.followed, core.caught_up
        second.append("t", f"e{round_}".encode())  # not the core's follow: a topic
        assert (core.followed, core.caught_up) == (followed, caught_up + 1)
        assert second._seen == second._shared.read()
        first.append("t", f"f{round_}".encode())
        second.append("t", f"g{round_}".encode())  # native again, on the new versions
        assert core.followed == followed + 1
        assert second._seen == second._shared.read()
        assert second.append(f"new{round_}", b"there").queue == 0
    assert len(assert_dense_and_unique(first, "t")) == 6 + 3 * 7


def test_a_writer_far_behind_the_notes_ring_walks_the_records_and_writes_on(two):
    from storeadapter.engine.sharedstate import RING_ENTRIES

    first, second = two
    for i in range(RING_ENTRIES + 10):  # a note each: the ring wraps
        first.append("t", f"m{i}".encode())
    core = second._appender
    followed, caught_up = core.followed, core.caught_up
    last = second.append("t", b"last")
    assert core.followed == followed  # the ring was overwritten: not the core's follow
    assert core.caught_up == caught_up + 1
    assert last.queue_offset == second.queue_range("t", last.queue)[1] - 1
    assert len(assert_dense_and_unique(first, "t")) == RING_ENTRIES + 17


# Each child appends at least ``count`` messages and goes on until the parent says stop,
# which it does once both have followed the other natively: the two are appending at
# once whatever the machine's load (a child done before the other starts would follow
# nothing). The children flush only at close, like the stores of ``two``.
CHILD = """
import sys, threading
from storeadapter.engine import MessageStore
from tests.engine.storetools import small_config
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = small_config(flush_mode="async", segment_bytes=8 << 20, queue_file_entries=1 << 16,
                      flush_interval_ms=3_600_000, queue_flush_interval_ms=3_600_000)
with MessageStore.open(path, config) as store:
    core = store._appender
    print("ready", flush=True)
    sys.stdin.readline()  # both children opened: go
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    told, i = False, 0
    while i < count or not stop.is_set():
        store.append("t", f"{name}-{i}".encode())
        i += 1
        if not told and i >= count and core.followed + core.caught_up > 0:
            print("followed", flush=True)
            told = True
    print(i, core.appended, core.followed, core.caught_up, flush=True)
"""


def test_two_processes_appending_at_once_each_follow_natively(two, store_path):
    first, _ = two
    count = 3000
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store_path), name, str(count)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    for child in children:
        assert child.stdout.readline() == b"ready\n"
    for line in (b"go\n", b"stop\n"):
        for child in children:
            child.stdin.write(line)
            child.stdin.flush()
        if line == b"go\n":
            for child in children:
                assert child.stdout.readline() == b"followed\n", child.stderr.read().decode()
    counts = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
        counts.append([int(n) for n in out.split()])
    bodies = assert_dense_and_unique(first, "t")
    made = {"a": counts[0][0], "b": counts[1][0]}
    wanted = [*WARM, *(f"{n}-{i}".encode() for n in "ab" for i in range(made[n]))]
    assert sorted(bodies) == sorted(wanted)
    # The native path wrote them (a busy thread lock or follow lock may decline one), and
    # each process followed the other's appends itself.
    for total, appended, followed, caught_up in counts:
        assert appended >= total - 10
        assert followed + caught_up > 0
