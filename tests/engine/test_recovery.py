"""Recovery on open: torn and garbage tails, lost consume-queue entries, crashes mid-roll."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from storeadapter.engine import AppendResult, MessageNotFoundError, MessageStore
from tests.engine.storetools import (
    QUEUE_FILE_ENTRIES,
    SEGMENT_BYTES,
    copy_store,
    lose_queue_files,
    read_everything,
    read_log_bytes,
    record_length,
    segment_paths,
    simulate_crash,
    small_config,
    tail,
    write_log_bytes,
)
from tests.faults.faultyfs import skip_syncs

# No background flush between the checkpoint and the crash.
QUIET = small_config(flush_interval_ms=600_000)


@dataclass
class CrashImage:
    """A copy of a store directory taken while it was open: abort marker present, checkpoint
    covering every record but the last, the last record written but never flushed."""

    path: Path
    results: list[AppendResult]
    before: dict  # read_everything() just before the copy was taken

    @property
    def last(self) -> AppendResult:
        return self.results[-1]

    def expected_without_last(self) -> dict:
        expected = {key: list(messages) for key, messages in self.before.items()}
        expected[("t", self.last.queue)].pop()
        return expected


@pytest.fixture
def crash_image(tmp_path: Path) -> CrashImage:
    live = tmp_path / "live"
    store = MessageStore.open(live, QUIET)
    try:
        store.create_topic("t", queues=2)
        results = [
            store.append("t", f"message {i} ".encode() * (i % 6 + 2), key=f"k{i % 5}", tag="x")
            for i in range(40)
        ]
        store.flush()
        results.append(
            store.append(
                "t", b"the last record", key=["k1", "k2"], tag="last", properties={"p": "v"}
            )
        )
        before = read_everything(store)
        image = tmp_path / "image"
        shutil.copytree(live, image)
    finally:
        store.close()
    (image / "lock").unlink()
    assert (image / "abort").exists()
    last_segment_base = int(segment_paths(image)[-1].name)
    assert results[-2].commit_offset > last_segment_base, "the last segment holds two records"
    return CrashImage(image, results, before)


def _damage_tail(image: CrashImage, target: Path, cut: int, fill: str, checkpoint: str) -> Path:
    """Copy the crash image and ruin its last record from byte ``cut`` to its end."""
    path = copy_store(image.path, target)
    length = record_length(path, image.last.commit_offset)
    size = length - cut
    if fill == "zeros":
        data = bytes(size)
    else:
        data = bytes(random.Random(cut).randrange(1, 256) for _ in range(size))
    write_log_bytes(path, image.last.commit_offset + cut, data)
    if checkpoint == "removed":
        (path / "checkpoint").unlink()
    return path


@pytest.mark.one_layout
@pytest.mark.parametrize("checkpoint", ["kept", "removed"])
@pytest.mark.parametrize("fill", ["zeros", "garbage"])
def test_last_record_torn_at_every_byte_is_dropped_and_the_rest_kept(
    crash_image, tmp_path, config, fill, checkpoint
):
    last = crash_image.last
    length = record_length(crash_image.path, last.commit_offset)
    expected = crash_image.expected_without_last()
    original = read_log_bytes(crash_image.path, last.commit_offset, length)
    # No power loss here: recovery's fsyncs cost time and prove nothing (the power-loss
    # tests in tests/faults prove them).
    with skip_syncs():
        for cut in range(length):
            if fill == "zeros" and not original[cut:].strip(b"\0"):
                continue  # the bytes from the cut on are zeros already: the record is intact
            path = _damage_tail(crash_image, tmp_path / f"cut-{cut}", cut, fill, checkpoint)

            with MessageStore.open(path, config) as store:
                report = store.stats().last_recovery
                assert read_everything(store) == expected, f"cut at byte {cut}"
                assert tail(store) == last.commit_offset, f"cut at byte {cut}"
                assert store.queue_range("t", last.queue) == (0, last.queue_offset)
                with pytest.raises(MessageNotFoundError):
                    store.get(last.message_id)
                for result in crash_image.results[:-1]:
                    assert store.get(result.message_id).message_id == result.message_id
                assert report.clean_shutdown is False
                assert report.dropped_queue_entries == 1, f"cut at byte {cut}"
                if fill == "zeros" and cut == 0:
                    assert report.truncated_at is None
                else:
                    assert report.truncated_at == last.commit_offset, f"cut at byte {cut}"
                if fill == "garbage":
                    assert report.truncated_bytes == length
                assert report.corruptions == []
            assert read_log_bytes(path, last.commit_offset, length) == bytes(length)
            shutil.rmtree(path)


@pytest.mark.one_layout
@pytest.mark.parametrize("fill", ["zeros", "garbage"])
def test_append_after_a_torn_tail_lands_where_the_tail_was_cut(crash_image, tmp_path, config, fill):
    last = crash_image.last
    length = record_length(crash_image.path, last.commit_offset)
    original = read_log_bytes(crash_image.path, last.commit_offset, length)
    # No power loss here: recovery's fsyncs cost time and prove nothing (the power-loss
    # tests in tests/faults prove them).
    with skip_syncs():
        for cut in range(0, length, 3):
            if fill == "zeros" and not original[cut:].strip(b"\0"):
                continue  # the bytes from the cut on are zeros already: the record is intact
            path = _damage_tail(crash_image, tmp_path / f"cut-{cut}", cut, fill, "kept")

            with MessageStore.open(path, config) as store:
                result = store.append("t", b"replacement", queue=last.queue)
                assert (result.commit_offset, result.queue_offset) == (
                    last.commit_offset,
                    last.queue_offset,
                )
            with MessageStore.open(path, config) as store:
                assert store.get(result.message_id).body == b"replacement"
                assert store.read("t", last.queue, last.queue_offset)[0].body == b"replacement"
            shutil.rmtree(path)


@pytest.mark.one_layout
@pytest.mark.parametrize("fill", ["zeros", "garbage"])
def test_second_recovery_after_a_torn_tail_changes_nothing(crash_image, tmp_path, config, fill):
    last = crash_image.last
    length = record_length(crash_image.path, last.commit_offset)
    # No power loss here: recovery's fsyncs cost time and prove nothing (the power-loss
    # tests in tests/faults prove them).
    with skip_syncs():
        for cut in range(0, length, 2):
            path = _damage_tail(crash_image, tmp_path / f"cut-{cut}", cut, fill, "removed")
            with MessageStore.open(path, config) as store:
                first = read_everything(store)
            simulate_crash(path)

            with MessageStore.open(path, config) as store:
                report = store.stats().last_recovery
                assert read_everything(store) == first
                assert report.redispatched == 0, f"cut at byte {cut}"
                assert report.truncated_at is None
                assert report.dropped_queue_entries == 0
                assert report.corruptions == []
            shutil.rmtree(path)


@pytest.mark.parametrize("crash", ["checkpoint-kept", "checkpoint-removed", "clean-shutdown"])
def test_garbage_after_the_tail_is_truncated_and_reported(open_store, store_path, crash):
    store = open_store()
    store.create_topic("t", queues=2)
    results = [store.append("t", f"m{i}" * 30) for i in range(30)]
    before = read_everything(store)
    end = tail(store)
    store.close()
    write_log_bytes(store_path, end, b"\xab" * 100)
    if crash != "clean-shutdown":
        simulate_crash(store_path, keep_checkpoint=crash == "checkpoint-kept")

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert (report.truncated_at, report.truncated_bytes) == (end, 100)
    assert read_everything(reopened) == before
    assert tail(reopened) == end
    assert all(
        reopened.get(r.message_id).body == f"m{i}".encode() * 30 for i, r in enumerate(results)
    )
    assert read_log_bytes(store_path, end, 100) == bytes(100)
    assert reopened.append("t", b"next").commit_offset == end


def test_truncation_is_recorded_in_recovery_json(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    store.append("t", b"x")
    end = tail(store)
    store.close()
    write_log_bytes(store_path, end, b"\x01garbage")
    simulate_crash(store_path)

    open_store()

    assert json.loads((store_path / "recovery.json").read_text())["truncated_at"] == end


def test_unflushed_records_lost_at_the_tail_drop_their_queue_entries(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    results = [store.append("t", f"m{i}" * 20) for i in range(40)]
    lost = results[-3:]
    assert lost[0].commit_offset // SEGMENT_BYTES == lost[-1].commit_offset // SEGMENT_BYTES
    ranges = [store.queue_range("t", q) for q in range(2)]
    store.close()
    end = lost[-1].commit_offset + record_length(store_path, lost[-1].commit_offset)
    write_log_bytes(store_path, lost[0].commit_offset, bytes(end - lost[0].commit_offset))
    simulate_crash(store_path)

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert report.dropped_queue_entries == 3
    assert tail(reopened) == lost[0].commit_offset
    for queue in range(2):
        gone = sum(1 for r in lost if r.queue == queue)
        assert reopened.queue_range("t", queue) == (0, ranges[queue][1] - gone)
    for result in results[:-3]:
        assert reopened.get(result.message_id).queue_offset == result.queue_offset


def _build(open_store, topics=(("t", 2),), count=150) -> tuple[MessageStore, dict]:
    store = open_store()
    for name, queues in topics:
        store.create_topic(name, queues=queues)
    for i in range(count):
        for name, _ in topics:
            store.append(name, f"{name} {i} ".encode() * (i % 7 + 1), tag=f"g{i % 3}")
    return store, read_everything(store)


def _remove_queue_files(store_path: Path, how: str) -> None:
    if how == "topic-dir-deleted":
        shutil.rmtree(store_path / "consumequeue" / "t")
        return
    lose_queue_files(store_path, "t", how=how)


@pytest.mark.parametrize(
    ("how", "checkpoint"),
    [
        ("deleted", "removed"),
        ("zeroed", "removed"),
        ("deleted", "kept"),
        ("topic-dir-deleted", "kept"),
        ("topic-dir-deleted", "removed"),
    ],
)
def test_lost_consume_queue_entries_are_rebuilt_from_the_log(
    open_store, store_path, how, checkpoint
):
    store, before = _build(open_store)
    total = sum(len(m) for m in before.values())
    assert total == 150
    store.close()
    _remove_queue_files(store_path, how)
    simulate_crash(store_path, keep_checkpoint=checkpoint == "kept")

    reopened = open_store()

    assert read_everything(reopened) == before
    assert reopened.stats().last_recovery.redispatched == total
    for messages in before.values():
        for message in messages:
            assert reopened.get(message.message_id) == message


def test_rebuilding_one_topics_queues_leaves_the_other_topic_alone(open_store, store_path):
    store, before = _build(open_store, topics=(("t", 2), ("u", 2)), count=40)
    store.close()
    _remove_queue_files(store_path, "deleted")
    simulate_crash(store_path, keep_checkpoint=True)

    reopened = open_store()

    assert read_everything(reopened) == before
    assert reopened.stats().last_recovery.redispatched == 40
    assert reopened.stats().last_recovery.records >= 80


def test_rebuild_of_consume_queues_is_idempotent(open_store, store_path):
    store, before = _build(open_store)
    store.close()
    _remove_queue_files(store_path, "deleted")
    simulate_crash(store_path)
    open_store().close()
    simulate_crash(store_path)

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert (report.redispatched, report.dropped_queue_entries) == (0, 0)
    assert report.truncated_at is None
    assert read_everything(reopened) == before


def test_appends_after_a_rebuild_continue_every_queue(open_store, store_path):
    store, before = _build(open_store)
    store.close()
    _remove_queue_files(store_path, "deleted")
    simulate_crash(store_path)

    reopened = open_store()
    results = [reopened.append("t", b"after", queue=q) for q in range(2)]

    assert [r.queue_offset for r in results] == [len(before[("t", q)]) for q in range(2)]


def test_full_recovery_of_an_intact_store_changes_nothing(open_store, store_path):
    store, before = _build(open_store)
    store.close()
    simulate_crash(store_path)

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert report.redispatched == 0
    assert report.dropped_queue_entries == 0
    assert report.truncated_at is None
    assert report.records == 150
    assert read_everything(reopened) == before


def test_recovery_of_an_empty_store_after_a_crash(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    store.close()
    simulate_crash(store_path)

    reopened = open_store()

    assert reopened.append("t", b"first").commit_offset == 0
    assert reopened.read("t", 0, 0)[0].body == b"first"


def _roll_once(open_store) -> tuple[MessageStore, list[AppendResult], AppendResult]:
    """Append until a record lands in a new segment; return the records and that one."""
    store = open_store()
    store.create_topic("t", queues=2)
    results = []
    while True:
        result = store.append("t", b"r" * 300)
        if result.commit_offset >= SEGMENT_BYTES:
            return store, results, result
        results.append(result)


def test_crash_after_sealing_a_segment_before_the_next_one_exists(open_store, store_path):
    store, results, rolled = _roll_once(open_store)
    store.close()
    segment_paths(store_path)[-1].unlink()
    simulate_crash(store_path)

    reopened = open_store()

    assert [reopened.get(r.message_id).body for r in results] == [b"r" * 300] * len(results)
    result = reopened.append("t", b"after the crash")
    assert result.commit_offset == SEGMENT_BYTES
    assert reopened.get(result.message_id).body == b"after the crash"


def test_zero_length_segment_left_by_a_crash_during_a_roll(open_store, store_path):
    store, results, rolled = _roll_once(open_store)
    store.close()
    segment_paths(store_path)[-1].write_bytes(b"")
    simulate_crash(store_path)

    reopened = open_store()

    assert [reopened.get(r.message_id).body for r in results] == [b"r" * 300] * len(results)
    result = reopened.append("t", b"after the crash")
    assert reopened.get(result.message_id).body == b"after the crash"


def test_zero_length_consume_queue_file_left_by_a_crash_is_repaired(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1, layout="files")
    for i in range(QUEUE_FILE_ENTRIES):
        store.append("t", f"m{i}")
    store.close()
    queue_dir = store_path / "consumequeue" / "t" / "0"
    (queue_dir / f"{QUEUE_FILE_ENTRIES:020d}").write_bytes(b"")
    simulate_crash(store_path)

    reopened = open_store()
    for i in range(QUEUE_FILE_ENTRIES, 3 * QUEUE_FILE_ENTRIES):
        reopened.append("t", f"m{i}")

    bodies = [m.body for m in reopened.read("t", 0, 0, max_messages=1000)]
    assert bodies == [f"m{i}".encode() for i in range(3 * QUEUE_FILE_ENTRIES)]
    assert len(list(queue_dir.iterdir())) <= 4


def test_clean_close_is_reported_as_a_clean_shutdown(open_store):
    open_store().close()

    assert open_store().stats().last_recovery.clean_shutdown is True


def test_abort_marker_exists_while_open_and_goes_on_close(open_store, store_path):
    store = open_store()
    assert (store_path / "abort").exists()

    store.close()

    assert not (store_path / "abort").exists()


def test_crash_is_reported_as_an_unclean_shutdown(open_store, store_path):
    open_store().close()
    simulate_crash(store_path, keep_checkpoint=True)

    assert open_store().stats().last_recovery.clean_shutdown is False


def test_an_intact_checkpoint_reports_no_problem(tmp_path):
    path = tmp_path / "s"
    for _ in range(3):  # new, then reopened twice (both slots written by then)
        with MessageStore.open(path, QUIET) as store:
            store.create_topic(f"t{len(store.topics())}", queues=1)
            assert store.stats().checkpoint_problems == []


def test_a_damaged_checkpoint_slot_is_reported_and_the_other_one_used(tmp_path):
    path = tmp_path / "s"
    with MessageStore.open(path, QUIET) as store:
        store.create_topic("t", queues=1)
        for body in (b"a", b"b"):
            store.append("t", body)
            store.flush()  # a checkpoint in each slot
    data = bytearray((path / "checkpoint").read_bytes())
    data[70] ^= 0xFF  # inside slot 1
    (path / "checkpoint").write_bytes(bytes(data))

    with MessageStore.open(path, QUIET) as store:
        problems = store.stats().checkpoint_problems
    assert problems[0] == "slot 1 fails its check (magic, version or CRC32C)"
    assert problems[-1].startswith("recovery started from the valid slot")


def test_recovery_leaves_time_marks_already_in_place_unwritten(open_store, store_path):
    # Files per queue whatever TIDEMARK_TEST_LAYOUT says: their time index files.
    config = small_config(shared_layout_above=1024)
    store = open_store(store_path, config)
    store.create_topic("t", queues=2)
    for _ in range(4):
        store.append_batch("t", [b"m" * 20] * 200)  # 400 a queue: marks at 0, 128, 256
    store.close()
    marks = sorted((store_path / "consumequeue" / "t").glob("*/timeindex"))
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in marks}
    simulate_crash(store_path)

    reopened = open_store(store_path, config)

    assert len(marks) == 2
    assert reopened.stats().last_recovery.records == 800
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in marks} == before
