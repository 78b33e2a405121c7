"""query_by_key through the key index, and the index rebuilt from the log."""

from __future__ import annotations

import shutil

import pytest

from storeadapter.engine import InvalidMessageError, StoreError, TopicNotFoundError


def test_messages_with_a_key_come_back_newest_first(store):
    store.append("t", b"first", key="order-1")
    store.append("t", b"other", key="order-2")
    store.append("t", b"second", key=["x", "order-1"])

    found = store.query_by_key("t", "order-1")

    assert [m.body for m in found] == [b"second", b"first"]


def test_limit_keeps_the_newest(store):
    for i in range(10):
        store.append("t", f"m{i}", key="k")

    assert [m.body for m in store.query_by_key("t", "k", limit=3)] == [b"m9", b"m8", b"m7"]


def test_time_bounds_select_by_store_time(store):
    results = [store.append("t", f"m{i}", key="k") for i in range(3)]
    middle = store.get(results[1].message_id).store_time_ms

    found = store.query_by_key("t", "k", begin_ms=middle, end_ms=middle)

    assert all(m.store_time_ms == middle for m in found)
    assert results[1].message_id in [m.message_id for m in found]


def test_the_same_key_in_another_topic_is_not_returned(store):
    store.create_topic("u", queues=1)
    store.append("u", b"elsewhere", key="k")
    store.append("t", b"here", key="k")

    assert [m.body for m in store.query_by_key("t", "k")] == [b"here"]


def test_many_keys_sharing_few_slots_are_told_apart(store):
    for i in range(300):  # the test index has 64 slots: every slot is shared
        store.append("t", f"body-{i}", key=f"key-{i}")

    for i in (0, 77, 299):
        assert [m.body for m in store.query_by_key("t", f"key-{i}")] == [f"body-{i}".encode()]


def test_index_files_roll_and_old_ones_are_still_searched(store, store_path):
    for i in range(1200):  # the test index holds 512 entries a file
        store.append("t", f"m{i}", key=f"k{i % 7}")

    assert len(list((store_path / "index").glob("0*"))) >= 3
    found = store.query_by_key("t", "k3", limit=1000)
    assert len(found) == len([i for i in range(1200) if i % 7 == 3])


def test_a_deleted_index_is_rebuilt_from_the_log_on_open(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    store.append_batch("t", [{"body": f"m{i}", "key": f"k{i % 5}"} for i in range(100)])
    store.close()
    shutil.rmtree(store_path / "index")

    reopened = open_store()

    assert len(reopened.query_by_key("t", "k2", limit=100)) == 20
    assert reopened.stats().last_recovery.indexed_keys == 100


def _damage_oldest_index_file(open_store, store_path) -> list:
    store = open_store()
    store.create_topic("t", queues=2)
    results = store.append_batch("t", [{"body": f"m{i}", "key": f"k{i % 5}"} for i in range(1200)])
    store.close()
    files = sorted((store_path / "index").glob("0*"))
    assert len(files) >= 3  # the test index holds 512 entries a file
    with open(files[0], "r+b") as handle:
        handle.write(b"XXXX")  # its magic: the file is skipped
    return results


def test_keys_of_a_damaged_older_index_file_are_indexed_again(open_store, store_path):
    results = _damage_oldest_index_file(open_store, store_path)

    reopened = open_store()

    found = reopened.query_by_key("t", "k2", limit=1000)
    assert sorted(m.message_id for m in found) == sorted(
        r.message_id for i, r in enumerate(results) if i % 5 == 2
    )
    assert reopened.stats().index_problems[0].reason == "bad magic b'XXXX'"


def test_an_index_indexed_again_is_not_reported_at_the_next_open(open_store, store_path):
    _damage_oldest_index_file(open_store, store_path)
    open_store().close()

    reopened = open_store()

    assert reopened.stats().index_problems == []
    assert len(reopened.query_by_key("t", "k0", limit=1000)) == 240


def test_index_entries_past_a_torn_tail_are_dropped(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    kept = store.append("t", b"kept", key="k")
    store.flush()
    lost = store.append("t", b"lost", key="k")
    store.close()
    segment = store_path / "commitlog" / ("0" * 20)
    data = bytearray(segment.read_bytes())
    data[lost.commit_offset + 20] ^= 0xFF
    segment.write_bytes(bytes(data))
    (store_path / "checkpoint").unlink()
    (store_path / "abort").touch()

    reopened = open_store()

    assert [m.message_id for m in reopened.query_by_key("t", "k")] == [kept.message_id]
    assert reopened.stats().last_recovery.dropped_index_entries == 1


def test_keys_appended_by_another_store_object_are_found(open_store):
    writer = open_store()
    reader = open_store()
    writer.create_topic("t", queues=1)

    writer.append("t", b"from the writer", key="shared")

    assert [m.body for m in reader.query_by_key("t", "shared")] == [b"from the writer"]


def test_a_recreated_topic_does_not_find_keys_of_its_deleted_namesake(store):
    store.append("t", b"old", key="k")
    store.delete_topic("t")
    store.create_topic("t", queues=1)
    store.append("t", b"new", key="k")

    assert [m.body for m in store.query_by_key("t", "k")] == [b"new"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic": "missing", "key": "k"}, TopicNotFoundError),
        ({"topic": "t", "key": ""}, InvalidMessageError),
        ({"topic": "t", "key": "a\x1fb"}, InvalidMessageError),
        ({"topic": "t", "key": "k", "limit": 0}, StoreError),
        ({"topic": "t", "key": "k", "begin_ms": "yesterday"}, StoreError),
    ],
)
def test_bad_queries_raise_typed_errors(store, kwargs, error):
    with pytest.raises(error):
        store.query_by_key(**kwargs)
