"""Event streams across reopens, crashes, a lost index, retention, several store objects,
and the bounded cache."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storeadapter.engine import (
    DuplicateCommandError,
    MessageStore,
    WrongExpectedVersionError,
    fileio,
)
from storeadapter.engine import clock as store_clock
from storeadapter.engine.eventindex import FILE_NAME
from tests.engine.storetools import small_config, write_log_bytes

TOPIC = "accounts"
HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000


def _no_background_flush(**overrides):
    return small_config(flush_interval_ms=3_600_000, **overrides)


def _index_path(store_path: Path) -> Path:
    return store_path / "consumequeue" / TOPIC / FILE_NAME


def _crash_image(store_path: Path, destination: Path) -> Path:
    """The store's files as a crash would leave them (copied while it is open)."""
    shutil.copytree(store_path, destination)
    return destination


def _fill(store: MessageStore) -> None:
    store.create_stream_topic(TOPIC, queues=4)
    for i in range(12):
        store.append_event(TOPIC, f"s-{i % 4}", f"e{i}".encode(), command_id=f"c{i}")


def test_versions_and_command_ids_survive_a_reopen(open_store, store_path):
    _fill(open_store())
    open_store().close()  # the first one is closed at teardown; this one now

    store = MessageStore.open(store_path, small_config())
    try:
        assert store.stream_version(TOPIC, "s-1") == 3
        with pytest.raises(DuplicateCommandError) as refused:
            store.append_event(TOPIC, "s-1", b"again", command_id="c5")
        assert refused.value.version == 2
        assert store.append_event(TOPIC, "s-1", b"next", expected_version=3).version == 4
    finally:
        store.close()


def test_a_crash_loses_no_version_and_no_command_id(open_store, store_path, tmp_path):
    store = open_store(cfg=_no_background_flush())
    _fill(store)
    image = _crash_image(store_path, tmp_path / "crashed")

    with MessageStore.open(image, small_config()) as recovered:
        assert recovered.last_recovery.clean_shutdown is False
        assert [e.version for e in recovered.read_stream(TOPIC, "s-2")] == [1, 2, 3]
        with pytest.raises(DuplicateCommandError):
            recovered.append_event(TOPIC, "s-2", b"again", command_id="c6")
        with pytest.raises(WrongExpectedVersionError):
            recovered.append_event(TOPIC, "s-2", b"stale", expected_version=2)


def test_duplicates_are_refused_after_a_crash_that_lost_the_index(open_store, store_path, tmp_path):
    store = open_store(cfg=_no_background_flush())
    _fill(store)
    image = _crash_image(store_path, tmp_path / "crashed")
    _index_path(image).unlink()

    with MessageStore.open(image, small_config()) as recovered:
        (report,) = recovered.last_recovery.event_indexes
        assert report["rebuilt"] == "it was missing"
        assert report["events_indexed"] == 12
        with pytest.raises(DuplicateCommandError) as refused:
            recovered.append_event(TOPIC, "s-3", b"again", command_id="c7")
        assert refused.value.version == 2
        assert recovered.stream_version(TOPIC, "s-3") == 3


def test_a_damaged_index_header_makes_recovery_rebuild_it(open_store, store_path, tmp_path):
    store = open_store(cfg=_no_background_flush())
    _fill(store)
    image = _crash_image(store_path, tmp_path / "crashed")
    with open(_index_path(image), "r+b") as handle:
        handle.write(b"JUNK")

    with MessageStore.open(image, small_config()) as recovered:
        (report,) = recovered.last_recovery.event_indexes
        assert "damaged" in report["rebuilt"]
        assert [e.command_id for e in recovered.read_stream(TOPIC, "s-0")] == ["c0", "c4", "c8"]


def test_a_crash_cut_index_is_completed_from_the_log(open_store, store_path, tmp_path):
    store = open_store(cfg=_no_background_flush())
    _fill(store)
    image = _crash_image(store_path, tmp_path / "crashed")
    index = _index_path(image)
    with open(index, "r+b") as handle:
        handle.truncate(index.stat().st_size - 5 * 48 - 20)

    with MessageStore.open(image, small_config()) as recovered:
        assert [e.version for e in recovered.read_stream(TOPIC, "s-0")] == [1, 2, 3]
        assert recovered.stats().streams.indexed_events == {TOPIC: 12}


def test_a_group_a_crash_kept_in_part_is_dropped_whole(open_store, store_path, tmp_path):
    store = open_store(cfg=_no_background_flush())
    store.create_stream_topic(TOPIC, queues=2)
    store.append_event(TOPIC, "a-1", b"opened", command_id="open")
    store.flush()
    group = store.append_events(TOPIC, "a-1", [b"x" * 100] * 3, command_id="batch")
    image = _crash_image(store_path, tmp_path / "crashed")
    last = group[-1]
    write_log_bytes(image, last.commit_offset, bytes(100))  # its page never reached the disk

    with MessageStore.open(image, small_config()) as recovered:
        assert recovered.last_recovery.partial_group_cut_at == group[0].commit_offset
        assert recovered.stream_version(TOPIC, "a-1") == 1
        assert recovered.queue_range(TOPIC, group[0].queue)[1] == group[0].queue_offset
        assert (
            recovered.append_events(
                TOPIC, "a-1", [b"y"] * 3, expected_version=1, command_id="batch"
            )[-1].version
            == 4
        )


@pytest.fixture
def clock(monkeypatch):
    now = {"ms": START_MS}
    monkeypatch.setattr(store_clock, "now_ms", lambda: now["ms"])
    return now


def test_a_read_starts_at_the_first_version_retention_kept_and_says_so(
    open_store, clock, monkeypatch
):
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (10**8, 10**9))
    store = open_store()
    store.create_stream_topic(TOPIC, queues=2)
    for version in range(1, 21):
        store.append_event(TOPIC, "old", b"o" * 300, command_id=f"c{version}")
    clock["ms"] = START_MS + 80 * HOUR_MS
    for version in range(21, 31):
        store.append_event(TOPIC, "old", b"n" * 300, command_id=f"c{version}")

    store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)

    events = store.read_stream(TOPIC, "old", from_version=1, max_count=5)
    assert events.deleted_by_retention is True
    assert 1 < events.first_kept_version <= 21
    assert events[0].version == events.first_kept_version
    assert [e.version for e in events] == list(range(events[0].version, events[0].version + 5))
    later = store.read_stream(TOPIC, "old", from_version=25, max_count=2)
    assert later.deleted_by_retention is False
    with pytest.raises(DuplicateCommandError) as refused:
        store.append_event(TOPIC, "old", b"again", command_id="c1")
    assert refused.value.version == 1
    assert store.append_event(TOPIC, "old", b"next", expected_version=30).version == 31


def test_another_store_object_sees_every_append_before_it_writes(open_store):
    first = open_store()
    first.create_stream_topic(TOPIC, queues=2)
    second = open_store()
    first.append_event(TOPIC, "a-1", b"1", expected_version=0, command_id="c1")
    assert second.append_event(TOPIC, "a-1", b"2", expected_version=1).version == 2

    with pytest.raises(WrongExpectedVersionError) as refused:
        first.append_event(TOPIC, "a-1", b"2 again", expected_version=1)
    assert refused.value.current_version == 2
    with pytest.raises(DuplicateCommandError):
        second.append_event(TOPIC, "a-1", b"1 again", command_id="c1")
    assert [e.body for e in first.read_stream(TOPIC, "a-1")] == [b"1", b"2"]


def test_the_cache_holds_no_more_streams_than_its_setting(open_store):
    store = open_store(cfg=small_config(stream_cache_streams=8))
    store.create_stream_topic(TOPIC, queues=2)

    for i in range(100):
        store.append_event(TOPIC, f"s-{i}", b"x")
        store.append_event(TOPIC, f"s-{i // 2}", b"y")

    assert store.stats().streams.cached_streams == 8
    assert store.stream_version(TOPIC, "s-0") == 3
    assert store.append_event(TOPIC, "s-1", b"z", expected_version=3).version == 4


def test_an_opener_preloads_the_most_recently_written_streams(open_store, store_path):
    store = open_store()
    store.create_stream_topic(TOPIC, queues=2)
    for i in range(30):
        store.append_event(TOPIC, f"s-{i}", b"x")
    store.close()

    reopened = open_store(cfg=small_config(stream_cache_streams=10))

    assert reopened.stats().streams.cached_streams == 10
    assert reopened.append_event(TOPIC, "s-29", b"y", expected_version=1).version == 2
    assert reopened.append_event(TOPIC, "s-0", b"y", expected_version=1).version == 2


# One operation: (stream, command id or None, expected version: "right", "wrong" or None)
_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.one_of(st.none(), st.sampled_from([f"k{i}" for i in range(6)])),
        st.sampled_from(["right", "wrong", None]),
        st.integers(1, 3),
        st.booleans(),
    ),
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPERATIONS)
def test_appends_behave_like_the_model_across_reopens(operations):
    """Model: each stream a list of (command id) per version; an append is refused as a
    duplicate when its command id is in its stream, else as a conflict when the expected
    version is not the stream's; it stores all its events or none."""
    model: dict[str, list[str | None]] = {"a": [], "b": [], "c": []}
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "store"
        config = small_config(stream_cache_streams=2)
        store = MessageStore.open(path, config)
        try:
            store.create_stream_topic(TOPIC, queues=2)
            for stream, command, expected, count, reopen in operations:
                current = len(model[stream])
                wanted = {"right": current, "wrong": current + 1, None: None}[expected]
                bodies = [f"{stream}{current + i}".encode() for i in range(count)]
                try:
                    results = store.append_events(
                        TOPIC, stream, bodies, expected_version=wanted, command_id=command
                    )
                except DuplicateCommandError as error:
                    assert command in model[stream]
                    assert model[stream][error.version - 1] == command
                except WrongExpectedVersionError as error:
                    assert command not in model[stream] or command is None
                    assert expected == "wrong" and error.current_version == current
                else:
                    assert command is None or command not in model[stream]
                    assert expected != "wrong"
                    assert [r.version for r in results] == list(
                        range(current + 1, current + count + 1)
                    )
                    model[stream].extend([command] * count)
                if reopen:
                    store.close()
                    store = MessageStore.open(path, config)
            for stream, commands in model.items():
                events = store.read_stream(TOPIC, stream, max_count=1000)
                assert [e.command_id for e in events] == commands
                assert store.stream_version(TOPIC, stream) == len(commands)
        finally:
            store.close()
