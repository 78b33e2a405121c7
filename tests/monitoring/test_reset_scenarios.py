"""An operator's offset reset is not the consumer's doing: scripted histories through the
engine's clock and the sampler, with resets applied as the console applies them (a row
in the group's Resets list, the offsets committed with that reset's reason)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.groups.models import AppliedReset
from console.monitoring import current
from console.monitoring.charts import group_figure
from console.monitoring.metrics import ERR, NOT_DRAINING, OK, REWIND
from console.monitoring.models import GroupSample
from storeadapter.offset_reset import apply_reset, preview_reset, reset_reason

pytestmark = pytest.mark.django_db


def append(store, topic: str, count: int, queue: int = 0) -> None:
    store.append_batch(topic, [{"body": b"m", "queue": queue} for _ in range(count)])


def reset(store, group: str, topic: str, mode: str, value=None) -> AppliedReset:
    """What console.operations.groups.apply_kept_preview does, without the preview page."""
    plan = preview_reset(store, group, topic, mode, value)
    row = AppliedReset.objects.create(group=group, topic=topic, mode=mode, value=value, who="alice")
    apply_reset(store, plan, who="alice", reason=reset_reason(row.pk, mode))
    return row


def stuck_archiver(store, clock, sample_at, until: int) -> None:
    """``archiver`` stuck at offset 100 of ``orders``, committing it every 5 s while
    producers write 20 messages a second; a sample every 10 s."""
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 200)
    for second in range(5, until + 1, 5):
        clock.at(second)
        append(store, "orders", 100)
        store.commit_offset("archiver", "orders", 0, 100)
        if second % 10 == 0:
            sample_at(second)


def test_skipping_the_backlog_of_a_stalled_group_is_not_consumption(store, clock, sample_at):
    stuck_archiver(store, clock, sample_at, until=300)
    clock.at(301)
    skip = reset(store, "archiver", "orders", "latest")
    consumed_before = GroupSample.objects.latest("ts_ms").consumed
    for second in range(305, 600, 5):  # the consumer is still stuck, now at the new offset
        clock.at(second)
        append(store, "orders", 100)
        store.commit_offset(
            "archiver", "orders", 0, store.committed_offset("archiver", "orders", 0)
        )
        if second % 10 == 0:
            sample_at(second)

    metrics = current.group_metrics_for("archiver")
    assert skip.pk
    assert GroupSample.objects.latest("ts_ms").consumed == consumed_before
    assert metrics.consume_rate == 0.0
    assert metrics.drain == NOT_DRAINING
    assert current.store_metrics().consume_rate == 0.0


def test_a_consumer_reading_on_after_a_skip_counts_only_what_it_read(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 1000)
    store.commit_offset("billing", "orders", 0, 0)
    sample_at(10)
    clock.at(11)
    reset(store, "billing", "orders", "offset", {0: 900})  # skips 900
    clock.at(15)
    store.commit_offset("billing", "orders", 0, 950)  # then reads 50

    sample_at(20)

    rows = list(GroupSample.objects.order_by("ts_ms"))
    assert rows[-1].consumed - rows[0].consumed == 50


def test_an_operators_rewind_of_a_live_group_reads_rewound_by_reset_not_err(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    position = 0
    statuses = []
    rewind = None
    for second in range(5, 200, 5):
        clock.at(second)
        append(store, "orders", 50)
        if second == 100:
            rewind = reset(store, "billing", "orders", "shift", -400)
            position = store.committed_offset("billing", "orders", 0)
        else:
            position += 40  # reads 8 a second, behind
            store.commit_offset("billing", "orders", 0, position)
        if second % 10 == 0:
            sample_at(second)
            statuses.append(current.group_metrics_for("billing").status)

    assert ERR not in statuses
    rows = GroupSample.objects.filter(ts_ms__gte=clock.ms - 100_000)
    assert all(REWIND not in row.statuses for row in rows)
    reasons = [row.status_reason for row in GroupSample.objects.order_by("ts_ms")]
    assert any(f"rewound by reset #{rewind.pk}" in reason for reason in reasons)


def test_an_undo_of_a_skip_reads_rewound_by_reset_not_err(store, clock, sample_at):
    stuck_archiver(store, clock, sample_at, until=100)
    clock.at(101)
    skip = reset(store, "archiver", "orders", "latest")
    sample_at(110)
    clock.at(111)
    plan = preview_reset(store, "archiver", "orders", "offset", {0: 100})
    undo = AppliedReset.objects.create(
        group="archiver", topic="orders", mode="undo", undoes=skip, who="alice"
    )
    apply_reset(store, plan, who="alice", reason=reset_reason(undo.pk, "undo"))

    sample_at(120)

    assert current.group_metrics_for("archiver").status == OK
    assert f"rewound by reset #{undo.pk}" in current.group_metrics_for("archiver").status_reason


def test_resets_are_marked_on_the_groups_lag_chart(store, clock, sample_at):
    stuck_archiver(store, clock, sample_at, until=60)
    clock.at(61)
    skip = reset(store, "archiver", "orders", "latest")
    AppliedReset.objects.filter(pk=skip.pk).update(  # the console's clock is the engine's
        applied_at=datetime.fromtimestamp(clock.ms / 1000, UTC)
    )
    sample_at(70)

    figure = group_figure("archiver", "1h")

    (marks,) = [trace for trace in figure.data if trace.name == "Resets"]
    assert list(marks.text) == [f"reset #{skip.pk} (latest)"]


def test_a_new_groups_first_commit_with_a_backlog_is_not_stop(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 500)
    store.commit_offset("fresh", "orders", 0, 10)  # its first commit, 490 behind
    statuses = []
    for second in (10, 20, 30, 40, 50, 60):
        if second == 60:
            clock.at(55)
            store.commit_offset("fresh", "orders", 0, 200)  # its next commit, later
        sample_at(second)
        statuses.append(current.group_metrics_for("fresh").status)

    assert statuses == [OK] * 6


def test_a_group_that_committed_once_and_died_reads_stop_after_a_full_window(
    store, clock, sample_at
):
    store.create_topic("orders", queues=1)
    clock.at(0)
    append(store, "orders", 500)
    store.commit_offset("fresh", "orders", 0, 10)
    for second in range(10, 200, 10):
        sample_at(second)

    metrics = current.group_metrics_for("fresh")
    assert metrics.status == ERR
    assert "one commit" in metrics.status_reason
