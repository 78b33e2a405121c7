"""Per-topic settings: kept in topics.json, seen by every process, honoured by appends,
dedup and retention; a store written before them reads as the store's defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storeadapter.engine import (
    STATUS_DUPLICATE,
    STATUS_OK,
    InvalidSettingError,
    MessageNotFoundError,
    MessageTooLargeError,
    StoreFormatError,
    fileio,
)
from storeadapter.engine import clock as store_clock
from storeadapter.engine.verify import verify_store
from tests.engine.storetools import MAX_MESSAGE_BYTES, read_all, segment_paths

HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000


@pytest.fixture
def clock(monkeypatch):
    now = {"ms": START_MS}
    monkeypatch.setattr(store_clock, "now_ms", lambda: now["ms"])
    return now


@pytest.fixture
def disk(monkeypatch):
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (10**8, 10**9))


def _fill(store, clock, topic: str, hour: float, count: int = 40) -> list:
    clock["ms"] = START_MS + int(hour * HOUR_MS)
    return [store.append(topic, b"x" * 200, queue=i % 2) for i in range(count)]


# ----------------------------------------------------------------------- keeping them


def test_a_new_topic_uses_the_store_defaults(store):
    assert store.topic("t").settings == {}
    assert store.topic_settings("t") == {
        "retention_hours": store.config.retention_hours,
        "max_message_bytes": store.config.max_message_bytes,
        "dedup_window_s": store.config.dedup_window_s,
    }


def test_settings_survive_a_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=1)
    store.set_topic_settings("t", {"retention_hours": 12, "dedup_window_s": 60})
    store.close()

    reopened = open_store()

    assert reopened.topic("t").settings == {"retention_hours": 12, "dedup_window_s": 60}
    assert reopened.topic_settings("t")["max_message_bytes"] == MAX_MESSAGE_BYTES


def test_another_store_object_sees_a_change(open_store):
    first, second = open_store(), open_store()
    first.create_topic("t", queues=1)
    assert second.topic_settings("t")["retention_hours"] == second.config.retention_hours

    first.set_topic_settings("t", {"retention_hours": 5})

    assert second.topic_settings("t")["retention_hours"] == 5


def test_none_puts_a_setting_back_to_the_store_default(store):
    store.set_topic_settings("t", {"retention_hours": 5, "dedup_window_s": 0})

    store.set_topic_settings("t", {"retention_hours": None})

    assert store.topic("t").settings == {"dedup_window_s": 0}


@pytest.mark.parametrize(
    "changes",
    [
        {"colour": 3},
        {"retention_hours": 0},
        {"retention_hours": 87_601},
        {"max_message_bytes": True},
        {"dedup_window_s": "60"},
        {"dedup_window_s": -1},
    ],
)
def test_a_bad_setting_is_refused_and_nothing_changes(store, changes):
    store.set_topic_settings("t", {"retention_hours": 5})

    with pytest.raises(InvalidSettingError):
        store.set_topic_settings("t", {"dedup_window_s": 30, **changes})

    assert store.topic("t").settings == {"retention_hours": 5}


def test_a_store_without_settings_writes_topics_json_as_before(store, store_path):
    entry = json.loads((store_path / "topics.json").read_text())["topics"][0]

    assert "settings" not in entry and "retained_from" not in entry


def test_a_topics_json_written_before_settings_reads_as_the_defaults(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    store.close()
    data = json.loads((store_path / "topics.json").read_text())
    del data["crc32c"]  # as an engine before checksums wrote it, too
    (store_path / "topics.json").write_text(json.dumps(data))

    reopened = open_store()

    assert reopened.topic("t").settings == {}
    assert reopened.topic_settings("t")["dedup_window_s"] == reopened.config.dedup_window_s


def test_damaged_settings_in_topics_json_are_a_format_error(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    store.set_topic_settings("t", {"retention_hours": 5})
    store.close()
    data = json.loads((store_path / "topics.json").read_text())
    del data["crc32c"]
    data["topics"][0]["settings"] = {"retention_hours": -5}
    (store_path / "topics.json").write_text(json.dumps(data))

    with pytest.raises(StoreFormatError, match="settings"):
        open_store()


# ------------------------------------------------------------------------- appends


def test_an_append_over_the_topics_own_limit_is_refused(store):
    store.create_topic("other", queues=1)
    store.set_topic_settings("t", {"max_message_bytes": 100})

    with pytest.raises(MessageTooLargeError, match="100"):
        store.append("t", b"x" * 101)
    with pytest.raises(MessageTooLargeError):
        store.append_batch("t", [b"ok", b"x" * 101])
    with pytest.raises(MessageTooLargeError):
        store.append("t", b"x" * 101, key="k")

    assert store.append("t", b"x" * 100).status == STATUS_OK
    assert store.append("other", b"x" * 101).status == STATUS_OK


def test_a_topics_own_limit_may_be_above_the_stores(store):
    store.set_topic_settings("t", {"max_message_bytes": 2 * MAX_MESSAGE_BYTES})

    result = store.append("t", b"x" * (MAX_MESSAGE_BYTES + 1))

    assert len(store.get(result.message_id).body) == MAX_MESSAGE_BYTES + 1


# --------------------------------------------------------------------------- dedup


def test_a_topic_without_a_dedup_window_writes_every_copy(store):
    store.set_topic_settings("t", {"dedup_window_s": 0})
    first = store.append("t", b"x", dedup_id="d")

    again = store.append("t", b"x", dedup_id="d")

    assert again.status == STATUS_OK and again.message_id != first.message_id


def test_a_longer_dedup_window_finds_an_older_copy(store, clock):
    store.set_topic_settings("t", {"dedup_window_s": 2 * store.config.dedup_window_s})
    first = store.append("t", b"x", dedup_id="d")
    clock["ms"] += store.config.dedup_window_s * 1000 + 1_000

    again = store.append("t", b"x", dedup_id="d")

    assert again.status == STATUS_DUPLICATE and again.message_id == first.message_id


# ----------------------------------------------------------------------- retention


def test_a_shorter_retention_drops_the_topics_old_messages_only(store, clock, disk):
    store.create_topic("short", queues=2)
    store.set_topic_settings("short", {"retention_hours": 10})
    old_short = _fill(store, clock, "short", 0)
    old_t = _fill(store, clock, "t", 0)
    new_short = _fill(store, clock, "short", 30)

    report = store.delete_expired(now_ms=START_MS + 31 * HOUR_MS)

    assert report.deleted_segments == []  # t's messages are within the store's 72 hours
    assert store.queue_range("short", 0)[0] > 0
    assert {d.topic for d in report.queues} == {"short"}
    left = {m.message_id for q in range(2) for m in read_all(store, "short", q)}
    assert not left & {r.message_id for r in old_short}
    assert {r.message_id for r in new_short} <= left
    assert store.queue_range("t", 0)[0] == 0
    assert store.get(old_t[0].message_id).body == b"x" * 200


def test_a_shorter_retention_holds_after_a_reopen_and_in_other_processes(open_store, clock, disk):
    store = open_store()
    store.create_topic("short", queues=2)
    store.set_topic_settings("short", {"retention_hours": 10})
    _fill(store, clock, "short", 0)
    _fill(store, clock, "short", 30)
    other = open_store()
    other.queue_range("short", 0)

    store.delete_expired(now_ms=START_MS + 31 * HOUR_MS)
    moved = store.queue_range("short", 0)[0]
    store.close()

    assert moved > 0
    assert other.queue_range("short", 0)[0] == moved
    other.close()
    assert open_store().queue_range("short", 0)[0] == moved


def test_a_longer_retention_keeps_the_segments_of_its_messages(store, clock, disk, store_path):
    store.create_topic("long", queues=2)
    store.set_topic_settings("long", {"retention_hours": 200})
    _fill(store, clock, "t", 0)
    kept = _fill(store, clock, "long", 1)
    _fill(store, clock, "t", 100)
    before = segment_paths(store_path)

    report = store.delete_expired(now_ms=START_MS + 101 * HOUR_MS)

    # Only segments wholly below long's first message went (t's at hour 0).
    assert all(d["end"] <= kept[0].commit_offset for d in report.deleted_segments)
    assert store.get(kept[0].message_id).body == b"x" * 200
    assert len(segment_paths(store_path)) > len(before) - 3

    later = store.delete_expired(now_ms=START_MS + 202 * HOUR_MS)

    assert later.deleted_segments
    with pytest.raises(MessageNotFoundError):
        store.get(kept[0].message_id)


def test_an_event_over_a_stream_topics_own_limit_is_refused(open_store):
    store = open_store()
    store.create_stream_topic("ledger", queues=1)
    store.set_topic_settings("ledger", {"max_message_bytes": 50})

    with pytest.raises(MessageTooLargeError):
        store.append_event("ledger", "acct-1", b"x" * 51)
    with pytest.raises(MessageTooLargeError):
        store.append_to_streams("ledger", [("acct-2", [b"x" * 51])])

    assert store.append_event("ledger", "acct-1", b"x" * 50).version == 1


def test_a_change_made_by_another_process_is_honoured_here(open_store, store_path, config):
    store = open_store()
    store.create_topic("t", queues=1)
    assert store.append("t", b"x" * 101).status == STATUS_OK
    repo = Path(__file__).resolve().parents[2]
    script = (
        "import sys; from storeadapter.engine import MessageStore; "
        "from tests.engine.storetools import small_config; "
        "s = MessageStore.open(sys.argv[1], small_config()); "
        "s.set_topic_settings('t', {'max_message_bytes': 100}); s.close()"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, str(store_path)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr.decode()

    with pytest.raises(MessageTooLargeError):
        store.append("t", b"x" * 101)
    assert store.topic_settings("t")["max_message_bytes"] == 100


def test_the_expiry_forecast_uses_the_topics_own_hours(store, clock, disk):
    store.create_topic("short", queues=2)
    store.set_topic_settings("short", {"retention_hours": 10})
    _fill(store, clock, "short", 0)
    _fill(store, clock, "t", 0)
    _fill(store, clock, "t", 1)
    store.commit_offset("g", "short", 0, 0)
    store.commit_offset("g", "t", 0, 0)

    rows = {row["topic"]: row for row in store.expiry_forecast(now_ms=START_MS + HOUR_MS)}

    assert rows["short"]["expires_at_ms"] - rows["t"]["expires_at_ms"] <= -60 * HOUR_MS


def test_verify_reports_damaged_settings_as_damage(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    store.close()
    data = json.loads((store_path / "topics.json").read_text())
    del data["crc32c"]
    data["topics"][0]["settings"] = {"colour": 3}
    (store_path / "topics.json").write_text(json.dumps(data))

    report = verify_store(store_path)

    assert not report.ok
    assert any("colour" in problem.reason for problem in report.problems)
