"""The group page says why the group has its status, since when, with a legend, and
labels live figures apart from sampled ones."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def stuck(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    store.append_batch("orders", [{"body": b"m", "queue": 0} for _ in range(10)])
    store.commit_offset("stuck", "orders", 0, 5)
    for second in range(5, 120, 5):
        clock.at(second)
        store.commit_offset("stuck", "orders", 0, 5)
        if second % 10 == 0:
            sample_at(second)
    return store


def test_the_group_page_says_which_queue_which_rule_and_since_when(as_viewer, stuck):
    page = as_viewer.get("/groups/stuck/").content.decode()

    assert "Why this status" in page
    assert "orders/0 is STALL: commits go on but the offset stays at 5" in page
    assert "since <time" in page
    for status in ("OK", "WARN", "STALL", "STOP", "REWIND"):
        assert f"<dt>{status}</dt>" in page


def test_the_group_page_labels_live_and_sampled_figures(as_viewer, stuck):
    page = as_viewer.get("/groups/stuck/").content.decode()

    assert "read from the store now" in page
    assert 'Status <span class="tm-muted">(sampled)</span>' in page
    assert 'Drain time <span class="tm-muted">(sampled)</span>' in page


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192, "retention_hours": 1}])
def test_the_group_page_counts_messages_lost_to_retention(as_viewer, store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    store.append_batch("orders", [{"body": b"x" * 200, "queue": 0} for _ in range(100)])
    store.commit_offset("billing", "orders", 0, 10)
    clock.at(7200)
    store.append_batch("orders", [{"body": b"x" * 200, "queue": 0} for _ in range(5)])
    store.delete_expired(clock.ms)
    lost = store.queue_range("orders", 0)[0] - 10
    sample_at(7210)

    page = as_viewer.get("/groups/billing/").content.decode()

    assert f"{lost} messages lost to retention" in page
    assert f"<code>orders/0</code>: {lost}" in page
