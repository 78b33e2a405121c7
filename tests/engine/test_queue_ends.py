"""Entries lost at a queue's end below the checkpoint (issue 8): the flush's witness of
each queue's end (``queueends``), and their restoration from the commit log
(``restore``) for queues with files of their own; shared topics find lost blocks from
their published allocation end."""

from __future__ import annotations

import struct
from pathlib import Path

from storeadapter.engine import MessageStore
from storeadapter.engine.queueends import FILE_NAME, QueueEnds
from tests.engine.storetools import SHARED_LAYOUT, read_all, segment_paths, small_config

ENTRY_SIZE = 20


def _config(**overrides):
    return small_config(queue_file_entries=64, **overrides)


def _store_with_queue(path: Path, count: int = 30) -> list[bytes]:
    bodies = [f"message {i}".encode() for i in range(count)]
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=2, layout="files")
        for body in bodies:
            store.append("t", body, queue=0)
        store.append("t", b"other queue", queue=1)
    return bodies


def _queue_file(path: Path, queue: int = 0) -> Path:
    return path / "consumequeue" / "t" / str(queue) / "00000000000000000000"


def _cut_entries(path: Path, keep: int) -> None:
    with open(_queue_file(path), "r+b") as handle:
        handle.truncate(keep * ENTRY_SIZE)


def test_entries_cut_from_a_queue_file_below_the_checkpoint_are_served_again(tmp_path):
    path = tmp_path / "s"
    bodies = _store_with_queue(path)
    _cut_entries(path, 10)

    with MessageStore.open(path, _config()) as store:
        assert [m.body for m in read_all(store, "t", 0)] == bodies


def test_the_restoration_is_reported_with_the_lost_range(tmp_path):
    path = tmp_path / "s"
    _store_with_queue(path)
    _cut_entries(path, 10)

    with MessageStore.open(path, _config()) as store:
        store.read("t", 0, 0)
        reasons = [c.reason for c in store.stats().corruptions]

    assert any(
        "t/0 had lost its entries 10 to 29" in r and "20 were restored" in r for r in reasons
    )


def test_an_append_after_the_loss_takes_the_next_offset_not_a_lost_one(tmp_path):
    path = tmp_path / "s"
    _store_with_queue(path)
    _cut_entries(path, 10)

    with MessageStore.open(path, _config()) as store:
        assert store.append("t", b"after", queue=0).queue_offset == 30


def test_entries_lost_below_the_checkpoint_are_restored_after_a_crash_too(tmp_path):
    """After a crash every queue is loaded before recovery, not when first used."""
    path = tmp_path / "s"
    bodies = _store_with_queue(path)
    _cut_entries(path, 10)
    (path / "abort").touch()  # as a crashed writer leaves it

    with MessageStore.open(path, _config()) as store:
        assert not store.last_recovery.clean_shutdown
        assert [m.body for m in read_all(store, "t", 0)] == bodies


def test_a_zeroed_queue_file_is_restored_from_the_topics_first_record(tmp_path):
    path = tmp_path / "s"
    bodies = _store_with_queue(path)
    queue_file = _queue_file(path)
    queue_file.write_bytes(bytes(queue_file.stat().st_size))

    with MessageStore.open(path, _config()) as store:
        assert [m.body for m in read_all(store, "t", 0)] == bodies
        assert store.queue_range("t", 1) == (0, 1)


def test_the_restored_entries_are_on_disk_for_the_next_open(tmp_path):
    path = tmp_path / "s"
    bodies = _store_with_queue(path)
    _cut_entries(path, 10)
    with MessageStore.open(path, _config()) as store:
        store.read("t", 0, 0)
    (path / "consumequeue" / "t" / FILE_NAME).unlink()  # no witness to go by this time

    with MessageStore.open(path, _config()) as store:
        assert [m.body for m in read_all(store, "t", 0)] == bodies
        assert store.stats().corruptions == []


def test_a_queue_whose_records_are_gone_too_is_left_short_and_not_searched_again(tmp_path):
    path = tmp_path / "s"
    _store_with_queue(path)
    with MessageStore.open(path, _config()) as store:
        lost_from = store.read("t", 0, 10, max_messages=1)[0].commit_offset
    _cut_entries(path, 10)
    for segment in segment_paths(path):  # the log cut where entry 10's record began
        if int(segment.name) > lost_from:
            segment.unlink()
        elif int(segment.name) <= lost_from:
            last = segment
    with open(last, "r+b") as handle:
        handle.truncate(lost_from - int(last.name))

    with MessageStore.open(path, _config()) as store:
        assert store.queue_range("t", 0)[1] == 10
        assert store.append("t", b"after", queue=0).queue_offset == 10
    assert QueueEnds(path / "consumequeue" / "t", _created(path)).get(0, 1 << 60) == 11


def test_a_queue_removed_and_added_again_does_not_inherit_the_old_witness(tmp_path):
    path = tmp_path / "s"
    _store_with_queue(path)
    with MessageStore.open(path, _config()) as store:
        store.freeze_queue("t", 1)
        store.remove_queue("t", 1)
        store.add_queues("t", 1)
        assert store.queue_range("t", 1) == (0, 0)
        assert store.stats().corruptions == []


def _created(path: Path) -> int:
    with MessageStore.open(path, _config()) as store:
        return store.topic("t").created_offset


# ------------------------------------------------------------------ the witness file


def test_the_flush_witnesses_every_dirty_queues_end(tmp_path):
    path = tmp_path / "s"
    _store_with_queue(path)

    ends = QueueEnds(path / "consumequeue" / "t", _created(path))
    assert (ends.get(0, 1 << 60), ends.get(1, 1 << 60)) == (30, 1)


def test_a_torn_newer_slot_leaves_the_older_witness(tmp_path):
    ends = QueueEnds(tmp_path, 5)
    ends.raise_to({0: 10}, 2, 100)
    ends.raise_to({0: 20}, 2, 200)
    data = bytearray((tmp_path / FILE_NAME).read_bytes())
    data[0] ^= 0xFF  # slot 0 holds the newer (even) sequence
    (tmp_path / FILE_NAME).write_bytes(bytes(data))

    assert QueueEnds(tmp_path, 5).get(0, 200) == 10


def test_a_witness_of_another_topic_incarnation_is_ignored(tmp_path):
    QueueEnds(tmp_path, 5).raise_to({0: 10}, 1, 100)

    assert QueueEnds(tmp_path, 6).get(0, 100) == 0


def test_writers_merge_to_the_highest_end_each(tmp_path):
    first, second = QueueEnds(tmp_path, 0), QueueEnds(tmp_path, 0)
    first.raise_to({0: 10, 1: 3}, 2, 100)
    second.raise_to({0: 7, 1: 9}, 2, 90)

    reader = QueueEnds(tmp_path, 0)
    assert (reader.get(0, 100), reader.get(1, 100)) == (10, 9)


def test_lowering_a_witness_overrides_the_merge(tmp_path):
    ends = QueueEnds(tmp_path, 0)
    ends.raise_to({0: 10}, 1, 100)
    ends.lower_to(0, 4, 1)

    assert QueueEnds(tmp_path, 0).get(0, 100) == 4


def test_a_process_behind_the_witnessed_tail_does_not_judge_by_it(tmp_path):
    """Another process flushed further than this one has followed: the queue is not
    short, this process just has not seen its last entries yet."""
    QueueEnds(tmp_path, 0).raise_to({0: 10}, 1, 500)

    assert QueueEnds(tmp_path, 0).get(0, 499) == 0


# ------------------------------------------------------------------- shared topics


def _shared_store(path: Path) -> dict[int, list[bytes]]:
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    with MessageStore.open(path, small_config(**SHARED_LAYOUT)) as store:
        store.create_topic("s", queues=3, layout="shared")
        for i in range(60):
            body = f"{i % 3}:{i}".encode()
            sent[i % 3].append(body)
            store.append("s", body, queue=i % 3)
    return sent


def _block_file(path: Path) -> Path:
    return sorted(
        p for p in (path / "consumequeue" / "s" / "blocks").iterdir() if p.name.isdigit()
    )[0]


def test_a_damaged_block_in_the_middle_of_a_shared_topic_is_rebuilt(tmp_path):
    path = tmp_path / "s"
    sent = _shared_store(path)
    block_bytes = 16 + SHARED_LAYOUT["shared_block_entries"] * ENTRY_SIZE
    with open(_block_file(path), "r+b") as handle:
        handle.seek(2 * block_bytes)  # block 2's header
        handle.write(struct.pack("<IQI", 1, 0, 0))

    with MessageStore.open(path, small_config(**SHARED_LAYOUT)) as store:
        for queue, bodies in sent.items():
            assert [m.body for m in read_all(store, "s", queue)] == bodies
        reasons = [c.reason for c in store.stats().corruptions]
        assert any("shared topic s had 1 unreadable blocks" in r for r in reasons)


def test_a_rebuilt_shared_topic_is_not_reported_again_at_the_next_open(tmp_path):
    path = tmp_path / "s"
    sent = _shared_store(path)
    with open(_block_file(path), "r+b") as handle:
        handle.truncate(3 * (16 + SHARED_LAYOUT["shared_block_entries"] * ENTRY_SIZE))
    MessageStore.open(path, small_config(**SHARED_LAYOUT)).close()

    with MessageStore.open(path, small_config(**SHARED_LAYOUT)) as store:
        assert store.stats().corruptions == []
        for queue, bodies in sent.items():
            assert [m.body for m in read_all(store, "s", queue)] == bodies
        assert store.append("s", b"next", queue=0).queue_offset == len(sent[0])
