"""Plain results for the console and API."""

from __future__ import annotations

import os

import pytest

from storeadapter import access
from storeadapter.engine import MessageStore, clock
from storeadapter.summaries import (
    group_summaries,
    group_summary,
    queue_rows,
    segment_rows,
    topic_summaries,
)
from tests.engine.storetools import small_config


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(tmp_path / "store", small_config()) as opened:
        opened.create_topic("orders", queues=2)
        opened.create_topic("audit", queues=1)
        opened.append_batch("orders", [{"body": f"o{i}", "queue": i % 2} for i in range(10)])
        opened.freeze_queue("orders", 1)
        yield opened


def test_topic_summaries_count_messages_and_frozen_queues(store):
    summaries = {s.name: s for s in topic_summaries(store)}

    assert summaries["orders"].messages == 10
    assert summaries["orders"].frozen_queues == 1
    assert summaries["orders"].last_write_ms is not None
    assert summaries["audit"].messages == 0 and summaries["audit"].last_write_ms is None


def test_queue_rows_show_ranges_and_frozen_state(store):
    rows = queue_rows(store, "orders")

    assert [(r.queue, r.min_offset, r.max_offset, r.frozen) for r in rows] == [
        (0, 0, 5, False),
        (1, 0, 5, True),
    ]


def test_group_lag_counts_unconsumed_messages_per_queue(store):
    store.commit_offset("billing", "orders", 0, 3)

    summary = group_summary(store, "billing")

    assert summary.topics == ["orders"]
    assert [(q.queue, q.committed, q.lag) for q in summary.queues] == [(0, 3, 2), (1, None, 5)]
    assert summary.lag == 7


def test_groups_are_listed_most_behind_first(store):
    store.commit_offset("fast", "orders", 0, 5)
    store.commit_offset("fast", "orders", 1, 5)
    store.commit_offset("slow", "orders", 0, 0)

    assert [s.group for s in group_summaries(store)] == ["slow", "fast"]


def test_segment_rows_give_time_spans_and_expiry(tmp_path, monkeypatch):
    now = {"ms": 1_000_000}
    monkeypatch.setattr(clock, "now_ms", lambda: now["ms"])
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.create_topic("t", queues=1)
        for i in range(60):
            now["ms"] = 1_000_000 + i * 1000
            store.append("t", b"x" * 200)

        rows = segment_rows(store)
        given = segment_rows(store, store.stats(topics=False))

    assert given == rows
    assert len(rows) > 1
    assert rows[0].first_store_ms == 1_000_000
    assert rows[0].expires_at_ms == rows[1].first_store_ms + 72 * 3_600_000
    assert rows[-1].expires_at_ms is None  # the active segment does not expire


def test_store_at_shares_one_store_per_process_and_path(tmp_path):
    first = access.store_at(tmp_path / "shared", small_config())
    try:
        assert access.store_at(tmp_path / "shared") is first
    finally:
        access.close_all()
    assert first.closed


def test_store_at_opens_a_new_store_after_a_fork(tmp_path):
    parent = access.store_at(tmp_path / "forked", small_config())
    try:
        pid = os.fork()
        if pid == 0:
            child = access.store_at(tmp_path / "forked", small_config())
            os._exit(0 if child is not parent and not child.closed else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        access.close_all()
