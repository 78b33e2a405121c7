"""Consumer offsets: durable commits, their history, compaction and torn journals."""

from __future__ import annotations

import pytest

from storeadapter.engine import (
    InvalidNameError,
    OffsetChange,
    OffsetOutOfRangeError,
    QueueNotFoundError,
    TopicNotFoundError,
    group_position,
)
from storeadapter.engine.offsets import OffsetStore
from tests.engine.storetools import simulate_crash


@pytest.fixture
def filled(store):
    for i in range(10):
        store.append("t", f"m{i}", queue=i % 2)
    return store


def _journals(store_path):
    return sorted(p for p in (store_path / "offsets").iterdir() if p.name.startswith("journal-"))


def test_commit_then_committed_round_trip(filled):
    filled.commit_offset("g", "t", 0, 3)

    assert filled.committed_offset("g", "t", 0) == 3
    assert filled.committed_offset("g", "t", 1) is None
    assert filled.committed_offset("other", "t", 0) is None


def test_a_group_stands_at_its_committed_offset(filled):
    filled.commit_offset("g", "t", 0, 3)

    assert group_position(filled.committed_offset("g", "t", 0), low=0) == 3


def test_a_group_stands_at_the_first_offset_of_a_queue_it_never_committed_on(filled):
    assert group_position(filled.committed_offset("g", "t", 1), low=2) == 2


def test_commit_returns_the_change(filled):
    filled.commit_offset("g", "t", 0, 1)

    change = filled.commit_offset("g", "t", 0, 4, who="alice", reason="reset")

    assert isinstance(change, OffsetChange)
    assert (change.group, change.topic, change.queue) == ("g", "t", 0)
    assert (change.old, change.new, change.who, change.reason) == (1, 4, "alice", "reset")
    assert change.time_ms > 0


def test_committing_the_same_offset_again_changes_nothing(filled):
    filled.commit_offset("g", "t", 0, 2)

    assert filled.commit_offset("g", "t", 0, 2) is None
    assert len(filled.offset_history("g")) == 1


def test_commit_may_move_backwards(filled):
    filled.commit_offset("g", "t", 0, 5)
    filled.commit_offset("g", "t", 0, 1, reason="rewind")

    assert filled.committed_offset("g", "t", 0) == 1


def test_offset_equal_to_the_queue_max_is_accepted(filled):
    low, high = filled.queue_range("t", 0)

    filled.commit_offset("g", "t", 0, high)

    assert filled.committed_offset("g", "t", 0) == high


@pytest.mark.parametrize("offset", [-1, 6, 1000, True, "1", 1.0])
def test_bad_offset_raises_offset_out_of_range(filled, offset):
    with pytest.raises(OffsetOutOfRangeError):
        filled.commit_offset("g", "t", 0, offset)

    assert filled.committed_offset("g", "t", 0) is None


def test_commit_on_an_unknown_topic_raises_topic_not_found(filled):
    with pytest.raises(TopicNotFoundError):
        filled.commit_offset("g", "missing", 0, 0)


@pytest.mark.parametrize("queue", [4, -1, "0"])
def test_commit_on_an_unknown_queue_raises_queue_not_found(filled, queue):
    with pytest.raises(QueueNotFoundError):
        filled.commit_offset("g", "t", queue, 0)


@pytest.mark.parametrize("group", ["", "a/b", "..", "x" * 128, None])
def test_bad_group_name_raises_invalid_name(filled, group):
    with pytest.raises(InvalidNameError):
        filled.commit_offset(group, "t", 0, 0)
    with pytest.raises(InvalidNameError):
        filled.committed_offset(group, "t", 0)


def test_committed_offsets_survive_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=2)
    for i in range(6):
        store.append("t", f"m{i}", queue=i % 2)
    store.commit_offset("g1", "t", 0, 2)
    store.commit_offset("g1", "t", 1, 3)
    store.commit_offset("g2", "t", 0, 1)
    store.close()

    reopened = open_store()

    assert reopened.committed_offset("g1", "t", 0) == 2
    assert reopened.committed_offset("g1", "t", 1) == 3
    assert reopened.committed_offset("g2", "t", 0) == 1
    assert reopened.groups() == ["g1", "g2"]


def test_committed_offsets_survive_a_crash(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    for i in range(5):
        store.append("t", f"m{i}")
    store.commit_offset("g", "t", 0, 4)
    store.close()
    simulate_crash(store_path)

    assert open_store().committed_offset("g", "t", 0) == 4


def test_history_is_newest_first_with_who_and_reason(filled):
    filled.commit_offset("g", "t", 0, 1, who="c1", reason="commit")
    filled.commit_offset("g", "t", 0, 3, who="c1", reason="commit")
    filled.commit_offset("g", "t", 0, 0, who="admin", reason="reset to earliest")

    history = filled.offset_history("g")

    assert [(c.old, c.new, c.who, c.reason) for c in history] == [
        (3, 0, "admin", "reset to earliest"),
        (1, 3, "c1", "commit"),
        (None, 1, "c1", "commit"),
    ]
    assert history[0].time_ms >= history[-1].time_ms


def test_history_filters_by_topic_and_queue_and_limits(filled):
    for offset in range(1, 5):
        filled.commit_offset("g", "t", 0, offset)
        filled.commit_offset("g", "t", 1, offset)

    assert {c.queue for c in filled.offset_history("g", topic="t", queue=1)} == {1}
    assert len(filled.offset_history("g", queue=0)) == 4
    assert [c.new for c in filled.offset_history("g", limit=2)] == [4, 4]
    assert filled.offset_history("g", topic="other") == []


def test_history_survives_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=1)
    for i in range(5):
        store.append("t", f"m{i}")
    for offset in (1, 2, 5):
        store.commit_offset("g", "t", 0, offset, who="w", reason=f"r{offset}")
    before = store.offset_history("g")
    store.close()

    assert open_store().offset_history("g") == before


def test_deleting_a_topic_drops_its_offsets(open_store):
    store = open_store()
    store.create_topic("t", queues=1)
    store.create_topic("u", queues=1)
    store.append("t", b"x")
    store.append("u", b"x")
    store.commit_offset("g", "t", 0, 1)
    store.commit_offset("g", "u", 0, 1)

    store.delete_topic("t")
    store.create_topic("t", queues=1)

    assert store.committed_offset("g", "t", 0) is None
    assert store.committed_offset("g", "u", 0) == 1


def test_dropped_offsets_stay_dropped_after_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=1)
    store.append("t", b"x")
    store.commit_offset("g", "t", 0, 1)
    store.delete_topic("t")
    store.create_topic("t", queues=1)
    store.close()

    assert open_store().committed_offset("g", "t", 0) is None


def test_journal_compaction_keeps_offsets_and_history(tmp_path):
    directory = tmp_path / "offsets"
    offsets = OffsetStore(directory, compact_bytes=1024)
    for i in range(200):
        offsets.commit(f"g{i % 3}", "t", i % 4, i, who="w", reason=f"r{i}")
    expected_offsets = offsets.positions()
    expected_history = {g: list(h) for g, h in offsets.history.items()}
    assert offsets.generation > 0
    offsets.close()

    reopened = OffsetStore(directory, compact_bytes=1024)

    assert reopened.positions() == expected_offsets
    assert {g: list(h) for g, h in reopened.history.items()} == expected_history
    assert len(list(directory.glob("journal-*"))) == 1
    reopened.close()


def test_commits_after_compaction_survive_reopen(tmp_path):
    directory = tmp_path / "offsets"
    offsets = OffsetStore(directory, compact_bytes=512)
    for i in range(50):
        offsets.commit("g", "t", 0, i, who="w", reason="commit")
    offsets.compact()
    offsets.commit("g", "t", 0, 1000, who="w", reason="after")
    offsets.close()

    reopened = OffsetStore(directory)

    assert reopened.get("g", "t", 0) == 1000
    assert reopened.history["g"][-1].reason == "after"
    reopened.close()


def test_dropped_topic_stays_dropped_across_compaction(tmp_path):
    directory = tmp_path / "offsets"
    offsets = OffsetStore(directory, compact_bytes=512)
    offsets.commit("g", "gone", 0, 5, who="w", reason="commit")
    offsets.commit("g", "kept", 0, 7, who="w", reason="commit")
    offsets.drop_topic("gone")
    for i in range(40):
        offsets.commit("h", "kept", 1, i, who="w", reason="commit")
    offsets.close()

    reopened = OffsetStore(directory)

    assert reopened.get("g", "gone", 0) is None
    assert reopened.get("g", "kept", 0) == 7
    reopened.close()


@pytest.mark.parametrize(
    "torn",
    [b"\x10", b"\x40\x00\x00\x00\x12\x34", b'\x05\x00\x00\x00\x00\x00\x00\x00{"op"', b"\xff" * 40],
    ids=["one-byte", "half-frame", "short-payload", "garbage"],
)
def test_torn_journal_tail_is_cut_off_on_reopen(open_store, store_path, torn):
    store = open_store()
    store.create_topic("t", queues=1)
    for i in range(5):
        store.append("t", f"m{i}")
    for offset in (1, 2, 3):
        store.commit_offset("g", "t", 0, offset)
    store.close()
    [journal] = _journals(store_path)
    good_size = journal.stat().st_size
    with open(journal, "ab") as handle:
        handle.write(torn)

    reopened = open_store()

    assert reopened.committed_offset("g", "t", 0) == 3
    assert journal.stat().st_size == good_size
    reopened.commit_offset("g", "t", 0, 4)
    reopened.close()
    assert open_store().committed_offset("g", "t", 0) == 4


def test_journal_entry_with_a_bad_crc_at_the_tail_is_cut_off(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    for i in range(5):
        store.append("t", f"m{i}")
    store.commit_offset("g", "t", 0, 1)
    [journal] = _journals(store_path)
    good_size = journal.stat().st_size
    store.commit_offset("g", "t", 0, 2)
    store.close()
    data = bytearray(journal.read_bytes())
    data[-2] ^= 0x01
    journal.write_bytes(bytes(data))

    reopened = open_store()

    assert reopened.committed_offset("g", "t", 0) == 1
    assert journal.stat().st_size == good_size


def test_the_commit_that_triggers_compaction_survives_reopen(tmp_path):
    directory = tmp_path / "offsets"
    offsets = OffsetStore(directory, compact_bytes=300)
    offset = 0
    while offsets.generation == 0:
        offset += 1
        offsets.commit("g", "t", 0, offset, who="w", reason=f"commit {offset}")
    offsets.close()

    reopened = OffsetStore(directory)

    assert reopened.get("g", "t", 0) == offset
    assert reopened.history["g"][-1].reason == f"commit {offset}"
    reopened.close()


def test_the_topic_drop_that_triggers_compaction_survives_reopen(tmp_path):
    directory = tmp_path / "offsets"
    offsets = OffsetStore(directory, compact_bytes=10_000)
    offsets.commit("g", "gone", 0, 5, who="w", reason="commit")
    offsets.compact_bytes = offsets._size + 1  # the next journal entry passes the threshold
    offsets.drop_topic("gone")
    assert offsets.generation == 1
    offsets.close()

    reopened = OffsetStore(directory)

    assert reopened.get("g", "gone", 0) is None
    reopened.close()


def test_commit_offsets_is_all_or_nothing_on_a_conflict(store):
    from storeadapter.engine import OffsetConflictError

    store.append_batch("t", [{"body": b"x", "queue": q} for q in range(4)] * 3)
    store.commit_offset("g", "t", 0, 1)

    with pytest.raises(OffsetConflictError):
        store.commit_offsets("g", "t", {0: 3, 1: 3}, expected={0: 2, 1: None})

    assert store.committed_offset("g", "t", 0) == 1
    assert store.committed_offset("g", "t", 1) is None
    changes = store.commit_offsets("g", "t", {0: 3, 1: 3}, expected={0: 1, 1: None}, who="op")
    assert [(c.queue, c.old, c.new, c.who) for c in changes] == [
        (0, 1, 3, "op"),
        (1, None, 3, "op"),
    ]
