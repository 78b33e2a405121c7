"""Offset resets: preview, apply only as previewed, undo."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore, clock
from storeadapter.offset_reset import (
    HISTORY_KEPT,
    LISTED_QUEUES,
    ResetConflictError,
    ResetError,
    ResetPlan,
    apply_reset,
    preview_reset,
    preview_undo,
)
from tests.engine.storetools import small_config


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(tmp_path / "store", small_config()) as opened:
        opened.create_topic("t", queues=2)
        opened.append_batch("t", [{"body": f"m{i}", "queue": i % 2} for i in range(20)])
        opened.commit_offset("g", "t", 0, 4)
        opened.commit_offset("g", "t", 1, 6)
        yield opened


def _targets(plan: ResetPlan) -> list[int]:
    return [q.target for q in plan.queues]


def test_earliest_and_latest(store):
    assert _targets(preview_reset(store, "g", "t", "earliest")) == [0, 0]
    assert _targets(preview_reset(store, "g", "t", "latest")) == [10, 10]


def test_the_preview_counts_messages_consumed_again_or_skipped(store):
    back = preview_reset(store, "g", "t", "earliest")
    ahead = preview_reset(store, "g", "t", "latest")

    assert [q.consumed_again for q in back.queues] == [4, 6]
    assert [q.skipped for q in ahead.queues] == [6, 4]


def test_a_shift_past_the_range_is_clamped_and_says_so(store):
    plan = preview_reset(store, "g", "t", "shift", -5)

    assert _targets(plan) == [0, 1]
    assert "moved up to 0" in plan.queues[0].clamped
    assert plan.queues[1].clamped is None


def test_offsets_per_queue_leave_other_queues_alone(store):
    plan = preview_reset(store, "g", "t", "offset", {1: 2})

    assert _targets(plan) == [4, 2]
    assert [q.queue for q in plan.changes] == [1]


def test_a_time_reset_uses_the_first_message_stored_then(tmp_path, monkeypatch):
    now = {"ms": 1_000}
    monkeypatch.setattr(clock, "now_ms", lambda: now["ms"])
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.create_topic("t", queues=1)
        for at in (1_000, 2_000, 3_000):
            now["ms"] = at
            store.append("t", f"at {at}")

        assert _targets(preview_reset(store, "g", "t", "time", 2_500)) == [2]


def test_the_preview_gives_the_time_span_of_the_messages_it_affects(tmp_path, monkeypatch):
    now = {"ms": 0}
    monkeypatch.setattr(clock, "now_ms", lambda: now["ms"])
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.create_topic("t", queues=2)
        for at in range(1, 7):
            now["ms"] = at * 1_000
            store.append("t", f"at {at}", queue=at % 2)
        store.commit_offset("g", "t", 0, 3)
        store.commit_offset("g", "t", 1, 1)

        plan = preview_reset(store, "g", "t", "earliest")

        assert [(q.span_from_ms, q.span_to_ms) for q in plan.queues] == [
            (2_000, 6_000),
            (1_000, 1_000),
        ]
        assert (plan.span_from_ms, plan.span_to_ms) == (1_000, 6_000)


def test_a_queue_that_does_not_move_has_no_time_span(store):
    plan = preview_reset(store, "g", "t", "offset", {1: 2})

    assert (plan.queues[0].span_from_ms, plan.queues[0].span_to_ms) == (None, None)
    assert plan.queues[1].span_from_ms is not None


def test_apply_commits_every_queue_and_records_the_reset(store):
    plan = preview_reset(store, "g", "t", "earliest")

    apply_reset(store, plan, who="alice")

    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [0, 0]
    latest = store.offset_history("g", "t")[0]
    assert latest.who == "alice" and latest.reason.startswith("reset:")


def test_apply_refuses_when_offsets_moved_since_the_preview_and_changes_nothing(store):
    plan = preview_reset(store, "g", "t", "earliest")
    store.commit_offset("g", "t", 1, 8)  # a consumer moved on meanwhile

    with pytest.raises(ResetConflictError, match="preview the reset again"):
        apply_reset(store, plan, who="alice")

    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [4, 8]


def test_undo_brings_back_what_the_reset_replaced(store):
    apply_reset(store, preview_reset(store, "g", "t", "latest"), who="alice")

    undo = preview_undo(store, "g", "t")
    apply_reset(store, undo, who="alice")

    assert _targets(undo) == [4, 6]
    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [4, 6]


def test_undo_without_a_reset_is_refused(store):
    with pytest.raises(ResetError, match="no reset"):
        preview_undo(store, "g", "t")


def test_a_plan_survives_a_round_trip_and_detects_tampering(store):
    plan = preview_reset(store, "g", "t", "offset", {0: 1})
    data = plan.as_dict()

    assert ResetPlan.from_dict(data).token == plan.token
    data["queues"][0]["target"] = 9
    with pytest.raises(ResetError, match="altered"):
        ResetPlan.from_dict(data)


@pytest.mark.parametrize(
    ("mode", "value"),
    [("sideways", None), ("shift", "3"), ("time", None), ("offset", {7: 1}), ("offset", {})],
)
def test_bad_requests_are_refused_with_a_sentence(store, mode, value):
    with pytest.raises(ResetError):
        preview_reset(store, "g", "t", mode, value)


@pytest.fixture
def wide(tmp_path):
    """Group g on topic "wide", one queue more than the offset history keeps, each
    committed at 1 of 2 messages."""
    with MessageStore.open(tmp_path / "wide", small_config(max_message_bytes=64)) as opened:
        queues = HISTORY_KEPT + 1
        opened.create_topic("wide", queues=queues)
        opened.append_batch("wide", [{"body": b"m", "queue": q} for q in range(queues)] * 2)
        opened.commit_offsets("g", "wide", dict.fromkeys(range(queues), 1))
        yield opened


def test_a_reset_of_fewer_queues_than_the_history_keeps_is_undoable(store):
    assert preview_reset(store, "g", "t", "earliest").undoable


def test_a_reset_of_more_queues_than_the_history_keeps_says_it_cannot_be_undone(wide):
    plan = preview_reset(wide, "g", "wide", "earliest")

    assert plan.moved == HISTORY_KEPT + 1
    assert not plan.undoable
    assert plan.as_dict()["undoable"] is False


def test_undo_refuses_a_reset_the_history_does_not_hold_whole(wide):
    apply_reset(wide, preview_reset(wide, "g", "wide", "earliest"), who="alice")

    with pytest.raises(ResetError, match="cannot be undone"):
        preview_undo(wide, "g", "wide")
    assert set(wide.committed_offsets("g", "wide").values()) == {0}


BIG = LISTED_QUEUES + 200


@pytest.fixture
def big(tmp_path):
    """Group g on topic "big" (more queues than a plan lists): 3 messages in each
    queue, committed at 2 on every queue but the last."""
    with MessageStore.open(tmp_path / "big", small_config(max_message_bytes=64)) as opened:
        opened.create_topic("big", queues=BIG)
        opened.append_batch("big", [{"body": b"m", "queue": q} for q in range(BIG)] * 3)
        opened.commit_offsets("g", "big", dict.fromkeys(range(BIG - 1), 2))
        yield opened


def test_a_big_topics_plan_lists_the_first_queues_that_move_and_counts_them_all(big):
    plan = preview_reset(big, "g", "big", "earliest")

    assert not plan.listed_all
    assert plan.queue_count == BIG
    assert [q.queue for q in plan.queues] == list(range(LISTED_QUEUES))
    assert plan.moved == BIG - 1  # the last queue, never committed, is read from 0 already
    assert plan.consumed_again == 2 * (BIG - 1)
    assert plan.skipped == 0


def test_a_big_topics_plan_lists_only_queues_that_move(big):
    plan = preview_reset(big, "g", "big", "offset", {5: 1, 900: 3})

    assert [(q.queue, q.committed, q.target) for q in plan.queues] == [(5, 2, 1), (900, 2, 3)]
    assert (plan.moved, plan.consumed_again, plan.skipped) == (2, 1, 1)


def test_a_big_topics_plan_counts_the_clamped_queues_that_move(big):
    plan = preview_reset(big, "g", "big", "shift", 5)

    assert plan.clamped == BIG and plan.moved == BIG  # 2 + 5 (0 + 5) is past every end
    assert all(q.target == 3 and q.clamped for q in plan.queues)


def test_applying_a_big_topics_plan_moves_every_queue_not_only_those_listed(big):
    plan = preview_reset(big, "g", "big", "earliest")

    written = apply_reset(big, plan, who="alice")

    assert len(written) == BIG - 1
    assert set(big.committed_offsets("g", "big").values()) == {0}
    assert len(big.committed_offsets("g", "big")) == BIG - 1


def test_a_big_topics_plan_comes_back_only_from_where_it_was_kept(big):
    plan = preview_reset(big, "g", "big", "earliest")
    data = plan.as_dict()

    assert ResetPlan.from_dict(data, with_moves=True).token == plan.token
    with pytest.raises(ResetError, match="applied by its token"):
        ResetPlan.from_dict(data)
    data["total_queues"] = BIG + 1
    with pytest.raises(ResetError, match="altered"):
        ResetPlan.from_dict(data, with_moves=True)


def test_an_undo_on_a_big_topic_moves_back_only_what_the_reset_moved(big):
    apply_reset(big, preview_reset(big, "g", "big", "offset", {3: 0, 1100: 1}), who="alice")

    undo = preview_undo(big, "g", "big")
    apply_reset(big, undo, who="alice")

    assert [(q.queue, q.target) for q in undo.queues] == [(3, 2), (1100, 2)]
    assert undo.moved == 2
    assert set(big.committed_offsets("g", "big").values()) == {2}


def test_a_queue_never_committed_on_moves_only_to_another_offset_than_its_first(tmp_path):
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.create_topic("t", queues=2)
        store.append_batch("t", [{"body": b"m", "queue": q} for q in (0, 1, 1)])
        store.commit_offset("g", "t", 0, 1)

        earliest = preview_reset(store, "g", "t", "earliest")
        latest = preview_reset(store, "g", "t", "latest")
        named = preview_reset(store, "g", "t", "offset", {0: 0})

        assert [q.queue for q in earliest.changes] == [0]
        assert [(q.queue, q.target) for q in latest.changes] == [(1, 2)]
        assert [q.queue for q in named.changes] == [0]
