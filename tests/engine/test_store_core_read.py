"""The native store core answers ``read`` in one call, as the Python path would, and
leaves to the long way (``_read_long_way``) whatever it must judge (issue 29)."""

from __future__ import annotations

import gc
import os
import sys
import weakref

import pytest

from storeadapter.engine import (
    MessageStore,
    OffsetOutOfRangeError,
    QueueNotFoundError,
    StoreClosedError,
    StoreError,
    TopicNotFoundError,
)
from tests.engine.storetools import (
    append_in_another_process,
    flip_bit,
    preads_counted,
    small_config,
)


@pytest.fixture
def store(open_store, store_path):
    """A store whose topic ``t`` has files per queue (whatever TIDEMARK_TEST_LAYOUT says):
    the queues the core reads."""
    opened = open_store(store_path, small_config(shared_layout_above=1024))
    opened.create_topic("t", queues=4)
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


def test_reads_through_the_core_equal_the_long_way_across_segments_and_queue_files(
    store, monkeypatch
):
    _append_varied(store, 400)
    assert len(store.commitlog.segments) > 4
    assert len(store._queue("t", 0).files) > 2  # 64 entries a queue file in the tests
    wanted = {}
    for queue in range(4):
        high = store.queue_range("t", queue)[1]
        for offset in (0, 1, 63, 64, 65, high - 1, high, high + 5):
            for count in (1, 3, 32, 500):
                wanted[queue, offset, count] = store._read_long_way("t", queue, offset, count)
    _no_long_way(monkeypatch, store)

    for (queue, offset, count), messages in wanted.items():
        assert store.read("t", queue, offset, count) == messages
    assert len(wanted[0, 0, 500]) == store.queue_range("t", 0)[1]


def test_a_warm_read_runs_no_python_code(store):
    _append_varied(store, 40)
    store.read("t", 1, 0, 8)
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        messages = store.read("t", 1, 0, 8)
    finally:
        sys.setprofile(None)
    assert len(messages) == 8
    assert calls == []


@pytest.mark.parametrize("count", [1, 3, 10, 500])
def test_a_read_s_list_is_a_list_like_any_other(store, monkeypatch, count):
    _append_varied(store, 40)
    expected = store._read_long_way("t", 1, 2, count)
    _no_long_way(monkeypatch, store)
    messages = store.read("t", 1, 2, count)

    assert messages == expected and type(messages) is list
    assert messages[:] == list(messages) == expected
    messages.extend(range(100))
    assert messages[len(expected) :] == list(range(100))
    del messages[len(expected) :]
    assert messages == expected
    messages.append("more")
    assert messages.pop() == "more"
    messages.clear()
    assert messages == []
    assert store.read("t", 1, 2, count) == expected


def test_a_read_s_offsets_times_and_bodies_are_ints_and_bytes_as_python_makes_them(
    store, monkeypatch
):
    _append_varied(store, 200)
    _no_long_way(monkeypatch, store)
    messages = store.read("t", 1, 0, 500)
    values = [
        value
        for m in messages
        for value in (m.queue_offset, m.commit_offset, m.born_time_ms, m.store_time_ms)
    ]

    assert any(v <= 256 for v in values) and any(256 < v < 2**30 for v in values)
    assert any(v >= 2**30 for v in values)  # the times: two 30-bit digits
    for value in values:
        made = int(str(value))
        assert type(value) is int and value == made and hash(value) == hash(made)
        assert value.bit_length() == made.bit_length() and value.to_bytes(8, "little") == (
            made.to_bytes(8, "little")
        )
        assert value - made == 0 and value + 1 > made and -value <= 0 and value >= 0
    for message in messages:
        body, made = message.body, bytes(bytearray(message.body))
        assert type(body) is bytes and body == made and hash(body) == hash(made)
        assert memoryview(body).tobytes() == made and body + b"" == made == body[:]
        assert body.decode() == made.decode() and len(body) == len(made) > 0


def test_keyword_arguments_and_the_default_count_are_read_by_the_core(store, monkeypatch):
    _append_varied(store, 200)
    expected = store._read_long_way("t", 1, 2)
    assert len(expected) == 32
    _no_long_way(monkeypatch, store)

    assert store.read("t", 1, 2) == expected
    assert store.read("t", 1, 2, max_messages=32, tag=None) == expected
    assert store.read(topic="t", queue=1, offset=2) == expected


def test_reads_the_core_declines_answer_and_refuse_as_before(store):
    _append_varied(store, 60)
    tagged = store.read("t", 0, 0, 100, tag="tag0")
    assert tagged and all(m.tag == "tag0" for m in tagged)
    assert tagged == store._read_long_way("t", 0, 0, 100, "tag0")
    assert store.read("t", 0, 0, 100, "tag0") == tagged

    with pytest.raises(QueueNotFoundError):
        store.read("t", True, 0)
    with pytest.raises(QueueNotFoundError):
        store.read("t", 4, 0)
    with pytest.raises(TopicNotFoundError):
        store.read("nope", 0, 0)
    with pytest.raises(OffsetOutOfRangeError):
        store.read("t", 0, -1)
    with pytest.raises(StoreError, match="max_messages"):
        store.read("t", 0, 0, 0)
    with pytest.raises(StoreError, match="max_messages"):
        store.read("t", 0, 0, 10_001)
    with pytest.raises(StoreError, match="max_messages"):
        store.read("t", 0, 0, max_messages=None)  # None given is not the default
    with pytest.raises(TypeError):
        store.read("t", 0, 0, 5, None, 1)
    with pytest.raises(TypeError):
        store.read("t", 0, 0, 5, limit=3)
    with pytest.raises(TypeError):
        store.read("t", 0, 0, 5, max_messages=3)


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


def test_a_replaced_seam_pread_sees_every_read_of_entries(store, monkeypatch):
    _append_varied(store, 40)
    store.read("t", 1, 0, 8)
    seen = preads_counted(monkeypatch)
    assert len(store.read("t", 1, 0, 8)) == 8
    assert seen == [8 * 20]


def test_reads_below_the_minimum_start_at_it_after_retention(store, monkeypatch):
    _append_varied(store, 400)
    store.delete_expired(now_ms=2**62)
    low, high = store.queue_range("t", 0)
    assert 0 < low < high
    expected = store._read_long_way("t", 0, 0, 10)
    _no_long_way(monkeypatch, store)

    assert store.read("t", 0, 0, 10) == expected
    assert expected[0].queue_offset == low


def test_appends_of_another_process_are_read_through_the_core(store, store_path, tmp_path):
    store.append("t", b"before", queue=0)
    assert [m.body for m in store.read("t", 0, 0)] == [b"before"]
    ids = append_in_another_process(store_path, "other", 40, tmp_path / "acks")
    read = [m for q in range(4) for m in store.read("t", q, 0, 100)]
    assert sorted(m.message_id for m in read if m.body != b"before") == sorted(ids)
    assert sorted(m.body for m in read if m.body != b"before") == sorted(
        f"other-{i}".encode() for i in range(40)
    )


def test_a_closed_store_says_so_on_read(open_store, store_path):
    store = open_store(store_path, small_config(shared_layout_above=1024))
    store.create_topic("t", queues=1)
    store.append("t", b"payload")
    store.close()

    with pytest.raises(StoreClosedError):
        store.read("t", 0, 0)


def test_a_closed_store_and_its_core_are_collected_when_let_go(open_store, store_path):
    store = MessageStore.open(store_path, small_config(shared_layout_above=1024))
    store.create_topic("t", queues=1)
    store.append("t", b"payload")
    assert store.read("t", 0, 0)[0].body == b"payload"
    store.close()
    gone = weakref.ref(store)
    del store
    gc.collect()

    assert gone() is None


def test_reads_are_right_when_the_handle_cache_closed_the_queue_files(open_store, tmp_path):
    store = open_store(
        tmp_path / "few", small_config(shared_layout_above=1024, max_open_queue_files=2)
    )
    store.create_topic("t", queues=4)
    _append_varied(store, 200)
    wanted = {q: store._read_long_way("t", q, 0, 500) for q in range(4)}

    for _ in range(3):
        for queue in range(4):
            assert store.read("t", queue, 0, 500) == wanted[queue]
            assert store.read("t", queue, 7, 3) == wanted[queue][7:10]
    assert store._registry.handles.open_count <= 2


def test_entries_appended_after_a_read_are_seen_by_the_next_read(store, monkeypatch):
    _append_varied(store, 40)
    first = store.read("t", 3, 0, 100)
    more = _append_varied(store, 40)
    expected = store._read_long_way("t", 3, 0, 100)
    _no_long_way(monkeypatch, store)

    assert store.read("t", 3, 0, 100) == expected
    assert expected[: len(first)] == first
    assert {r.message_id for r in more if r.queue == 3} <= {m.message_id for m in expected}


def test_a_queue_file_cut_short_under_an_open_store_is_read_as_the_long_way_reads_it(
    store, store_path
):
    _append_varied(store, 40)
    assert store.read("t", 2, 0, 100)
    queue_file = store_path / "consumequeue" / "t" / "2" / "00000000000000000000"
    os.truncate(queue_file, 0)  # every page of entries the earlier read used is gone

    after = store.read("t", 2, 0, 100)
    assert after == store._read_long_way("t", 2, 0, 100)


def _mapped_deleted_queue_files() -> list[str]:
    with open("/proc/self/maps") as maps:
        return [line for line in maps if "consumequeue" in line and "(deleted)" in line]


def test_queue_files_deleted_by_retention_are_not_kept_mapped(store):
    _append_varied(store, 400)
    for queue in range(4):
        store.read("t", queue, 0, 500)  # maps every file of every queue
    store.delete_expired(now_ms=2**62)
    for _ in range(3):
        for queue in range(4):
            store.read("t", queue, 0, 500)

    assert _mapped_deleted_queue_files() == []
