"""Offset resets: preview, then apply on a group whose consumers may be running; undo."""

from __future__ import annotations

import itertools

import pytest

from storeadapter.engine import MessageStore, clock
from storeadapter.offset_reset import (
    LISTED_QUEUES,
    ResetConflictError,
    ResetError,
    ResetOutdatedError,
    ResetPlan,
    apply_reset,
    describe_reason,
    preview_reset,
    preview_undo,
    reset_reason,
)
from storeadapter.reset_modes import MODE_NAMES, RESET_MODES
from tests.engine.storetools import small_config

HOUR_MS = 3_600_000


def apply(store, plan, reset_id=1):
    return apply_reset(store, plan, who="alice", reason=reset_reason(reset_id, plan.mode))


def undo_of(store, changes, reset_id=1):
    """The undo plan of an applied reset, from its changes (as the console keeps them)."""
    first = changes[0]
    replaced = [(c.queue, c.old) for c in changes]
    return preview_undo(store, first.group, first.topic, replaced, reset_id)


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


def test_apply_commits_every_queue_and_names_the_reset_in_the_history(store):
    plan = preview_reset(store, "g", "t", "earliest")

    apply(store, plan, reset_id=7)

    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [0, 0]
    latest = store.offset_history("g", "t")[0]
    assert latest.who == "alice"
    assert describe_reason(latest.reason) == ("reset to earliest", 7)


def test_an_absolute_reset_applies_the_previewed_targets_after_the_group_moved_on(store):
    plan = preview_reset(store, "g", "t", "earliest")
    store.commit_offset("g", "t", 1, 8)  # a consumer moved on meanwhile

    changes = apply(store, plan)

    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [0, 0]
    assert [(c.queue, c.old, c.new) for c in changes] == [(0, 4, 0), (1, 8, 0)]


def test_an_absolute_reset_also_sets_a_queue_that_moved_off_its_target_since(store):
    plan = preview_reset(store, "g", "t", "offset", {0: 4, 1: 2})  # queue 0 is at 4 already
    store.commit_offset("g", "t", 0, 7)

    changes = apply(store, plan)

    assert [(c.queue, c.old, c.new) for c in changes] == [(0, 7, 4), (1, 6, 2)]


def test_a_shift_is_applied_from_the_offsets_when_it_is_applied(store):
    plan = preview_reset(store, "g", "t", "shift", -2)
    store.commit_offset("g", "t", 0, 9)

    changes = apply(store, plan)

    assert [(c.queue, c.old, c.new) for c in changes] == [(0, 9, 7), (1, 6, 4)]


def test_a_shift_reads_again_when_a_consumer_commits_between_the_read_and_the_commit(
    store, monkeypatch
):
    plan = preview_reset(store, "g", "t", "shift", -2)
    read = store.committed_offsets
    consumer_commits = iter([(0, 5), (0, 6)])

    def read_then_a_consumer_commits(group, topic=None):
        offsets = read(group, topic)
        step = next(consumer_commits, None)
        if step is not None:
            store.commit_offset("g", "t", *step)
        return offsets

    monkeypatch.setattr(store, "committed_offsets", read_then_a_consumer_commits)
    changes = apply(store, plan)

    assert [(c.queue, c.old, c.new) for c in changes] == [(0, 6, 4), (1, 6, 4)]


def test_a_shift_gives_up_with_a_sentence_when_every_read_is_overtaken(store, monkeypatch):
    plan = preview_reset(store, "g", "t", "shift", -2)
    read = store.committed_offsets
    offsets = itertools.cycle([5, 7])

    def read_then_a_consumer_commits(group, topic=None):
        seen = read(group, topic)
        store.commit_offset("g", "t", 0, next(offsets))
        return seen

    monkeypatch.setattr(store, "committed_offsets", read_then_a_consumer_commits)

    with pytest.raises(ResetConflictError, match="nothing was changed"):
        apply(store, plan)
    assert store.committed_offset("g", "t", 1) == 6


def test_a_reset_is_refused_when_the_topic_gained_queues_since_the_preview(store):
    plan = preview_reset(store, "g", "t", "earliest")
    store.add_queues("t", 1)

    with pytest.raises(ResetOutdatedError, match="3 queues now, 2 when"):
        apply(store, plan)
    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [4, 6]


def test_a_reset_is_refused_when_retention_deleted_its_target_since_the_preview(
    tmp_path, monkeypatch
):
    now = {"ms": 1_700_000_000_000}
    monkeypatch.setattr(clock, "now_ms", lambda: now["ms"])
    with MessageStore.open(tmp_path / "s", small_config()) as store:
        store.create_topic("t", queues=1)
        store.append_batch("t", [{"body": b"x" * 200}] * 60)
        now["ms"] += 80 * HOUR_MS
        store.append_batch("t", [{"body": b"x" * 200}] * 60)
        store.commit_offset("g", "t", 0, 100)
        plan = preview_reset(store, "g", "t", "earliest")
        store.delete_expired(now_ms=now["ms"])
        assert store.queue_range("t", 0)[0] > 0

        with pytest.raises(ResetOutdatedError, match="retention deleted"):
            apply(store, plan)
        assert store.committed_offset("g", "t", 0) == 100


def test_a_time_after_the_newest_message_is_the_same_as_latest(store):
    plan = preview_reset(store, "g", "t", "time", clock.now_ms() + HOUR_MS)

    assert [q.target for q in plan.queues] == [10, 10]
    assert plan.past_newest == plan.queue_count == 2


def test_a_time_within_the_messages_is_not_past_the_newest(store):
    assert preview_reset(store, "g", "t", "time", 0).past_newest == 0


def test_a_reset_to_another_groups_offsets_takes_what_it_committed(store):
    store.commit_offset("other", "t", 1, 9)

    plan = preview_reset(store, "g", "t", "group", "other")
    apply(store, plan)

    assert [(q.queue, q.target) for q in plan.changes] == [(1, 9)]
    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [4, 9]


@pytest.mark.parametrize(
    ("source", "match"), [("g", "same group"), ("nobody", "no committed offsets"), (None, "name")]
)
def test_a_reset_to_another_groups_offsets_is_refused_with_a_sentence(store, source, match):
    with pytest.raises(ResetError, match=match):
        preview_reset(store, "g", "t", "group", source)


def test_undo_puts_back_what_the_reset_replaced(store):
    changes = apply(store, preview_reset(store, "g", "t", "latest"))

    undo = undo_of(store, changes, reset_id=3)
    apply(store, undo)

    assert [q.target for q in undo.queues] == [4, 6]
    assert (undo.mode, undo.value) == ("undo", 3)
    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [4, 6]


def test_undo_after_the_group_moved_on_still_puts_back_what_the_reset_replaced(store):
    changes = apply(store, preview_reset(store, "g", "t", "latest"))
    undo = undo_of(store, changes)
    store.commit_offset("g", "t", 0, 10)
    store.append("t", b"more", queue=1)
    store.commit_offset("g", "t", 1, 11)

    apply(store, undo)

    assert [store.committed_offset("g", "t", q) for q in (0, 1)] == [4, 6]


def test_a_plan_survives_a_round_trip(store):
    plan = preview_reset(store, "g", "t", "offset", {0: 1})

    again = ResetPlan.from_dict(plan.as_dict())

    assert again == plan
    assert list(again.targets()) == [(0, 1)]


@pytest.mark.parametrize("data", [{}, {"queues": "x"}, {"group": "g"}])
def test_something_that_is_not_a_plan_is_refused(data):
    with pytest.raises(ResetError, match="not a reset preview"):
        ResetPlan.from_dict(data)


@pytest.mark.parametrize(
    ("mode", "value"),
    [("sideways", None), ("shift", "3"), ("time", None), ("offset", {7: 1}), ("offset", {})],
)
def test_bad_requests_are_refused_with_a_sentence(store, mode, value):
    with pytest.raises(ResetError):
        preview_reset(store, "g", "t", mode, value)


def test_every_mode_of_the_table_previews(store):
    store.commit_offset("other", "t", 0, 1)
    values = {"nothing": None, "offsets": {0: 1}, "time": 0, "shift": 1, "group": "other"}

    for mode in RESET_MODES:
        assert preview_reset(store, "g", "t", mode.name, values[mode.takes]).mode == mode.name
    assert set(MODE_NAMES) == {m.name for m in RESET_MODES}


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

    written = apply(big, plan)

    assert len(written) == BIG - 1
    assert set(big.committed_offsets("g", "big").values()) == {0}
    assert len(big.committed_offsets("g", "big")) == BIG - 1


def test_a_big_topics_plan_survives_a_round_trip_with_every_queue_it_sets(big):
    plan = preview_reset(big, "g", "big", "offset", {3: 2, 1100: 1})

    again = ResetPlan.from_dict(plan.as_dict())

    assert list(again.targets()) == [(3, 2), (1100, 1)]
    assert (again.moved, again.queue_count) == (1, BIG)


def test_an_undo_on_a_big_topic_moves_back_only_what_the_reset_moved(big):
    changes = apply(big, preview_reset(big, "g", "big", "offset", {3: 0, 1100: 1}))

    undo = undo_of(big, changes)
    apply(big, undo)

    assert [(q.queue, q.target) for q in undo.queues] == [(3, 2), (1100, 2)]
    assert undo.moved == 2
    assert set(big.committed_offsets("g", "big").values()) == {2}


def test_a_reset_of_every_queue_of_a_big_topic_is_undone_whole(big):
    changes = apply(big, preview_reset(big, "g", "big", "latest"))

    apply(big, undo_of(big, changes))

    offsets = big.committed_offsets("g", "big")
    assert [offsets[("big", q)] for q in range(BIG - 1)] == [2] * (BIG - 1)
    assert offsets[("big", BIG - 1)] == 0  # never committed before: back to its first


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
