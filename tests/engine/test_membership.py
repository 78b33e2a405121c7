"""Group membership files, expiry, and average queue allocation (RocketMQ's AVG)."""

from __future__ import annotations

import json
import os
import random

import pytest

from storeadapter.engine import InvalidNameError
from storeadapter.engine.membership import (
    allocate,
    default_consumer_id,
    group_members,
    heartbeat,
    leave,
    live_members,
    members_dir,
)

T0 = 1_700_000_000_000


def test_a_heartbeat_writes_the_member_file(store_path):
    heartbeat(store_path, "g", "c1", ["orders", "%RETRY%g"], now_ms=T0)

    path = store_path / "groups" / "g" / "members" / "c1.json"
    data = json.loads(path.read_bytes())
    assert data["consumer_id"] == "c1"
    assert data["pid"] == os.getpid()
    assert data["host"]
    assert data["topics"] == ["%RETRY%g", "orders"]
    assert data["started_ms"] == T0
    assert data["heartbeat_ms"] == T0
    assert [p.name for p in path.parent.iterdir()] == ["c1.json"]  # no temp file left


def test_a_later_heartbeat_keeps_started_ms_and_moves_heartbeat_ms(store_path):
    heartbeat(store_path, "g", "c1", ["t"], now_ms=T0)
    heartbeat(store_path, "g", "c1", ["t"], now_ms=T0 + 700)

    [member] = live_members(store_path, "g", 10.0, now_ms=T0 + 800)
    assert (member.started_ms, member.heartbeat_ms) == (T0, T0 + 700)


def test_live_members_are_sorted_and_expired_ones_are_dropped_with_their_files(store_path):
    heartbeat(store_path, "g", "b", ["t"], now_ms=T0)
    heartbeat(store_path, "g", "a", ["t"], now_ms=T0 + 5_000)
    heartbeat(store_path, "g", "c", ["t"], now_ms=T0 + 9_000)

    assert [m.consumer_id for m in live_members(store_path, "g", 10.0, now_ms=T0 + 9_500)] == [
        "a",
        "b",
        "c",
    ]
    # b's last heartbeat is now 10.5 s old: past the 10 s timeout.
    live = live_members(store_path, "g", 10.0, now_ms=T0 + 10_500)
    assert [m.consumer_id for m in live] == ["a", "c"]
    assert sorted(p.name for p in members_dir(store_path, "g").iterdir()) == ["a.json", "c.json"]
    # A member exactly at the timeout is still alive.
    assert [m.consumer_id for m in live_members(store_path, "g", 10.0, now_ms=T0 + 15_000)] == [
        "a",
        "c",
    ]


def test_a_member_that_heartbeats_again_after_expiry_rejoins(store_path):
    heartbeat(store_path, "g", "a", ["t"], now_ms=T0)
    assert live_members(store_path, "g", 1.0, now_ms=T0 + 5_000) == []

    heartbeat(store_path, "g", "a", ["t"], now_ms=T0 + 5_000)

    assert [m.consumer_id for m in live_members(store_path, "g", 1.0, now_ms=T0 + 5_100)] == ["a"]


def test_leave_removes_the_member_and_tolerates_a_missing_file(store_path):
    heartbeat(store_path, "g", "a", ["t"], now_ms=T0)
    leave(store_path, "g", "a")
    leave(store_path, "g", "a")

    assert live_members(store_path, "g", 10.0, now_ms=T0) == []


def test_groups_are_separate_and_an_unknown_group_has_no_members(store_path):
    heartbeat(store_path, "g1", "a", ["t"], now_ms=T0)

    assert live_members(store_path, "g2", 10.0, now_ms=T0) == []
    assert group_members(store_path, "nobody", 10.0) == []


def test_unreadable_files_and_temp_files_are_ignored(store_path):
    heartbeat(store_path, "g", "a", ["t"], now_ms=T0)
    directory = members_dir(store_path, "g")
    (directory / "broken.json").write_text("{not json")
    (directory / ".b.json.tmp").write_text("{}")

    assert [m.consumer_id for m in live_members(store_path, "g", 10.0, now_ms=T0)] == ["a"]


@pytest.mark.parametrize("group", ["", "a/b", "..", "x y", "%RETRY%g"])
def test_bad_group_names_are_refused(store_path, group):
    with pytest.raises(InvalidNameError):
        heartbeat(store_path, group, "c1", ["t"])
    with pytest.raises(InvalidNameError):
        live_members(store_path, group, 1.0)


@pytest.mark.parametrize("consumer_id", ["", "a/b", "..", "host:1", "x" * 200])
def test_bad_consumer_ids_are_refused(store_path, consumer_id):
    with pytest.raises(InvalidNameError):
        heartbeat(store_path, "g", consumer_id, ["t"])
    with pytest.raises(InvalidNameError):
        leave(store_path, "g", consumer_id)


def test_the_default_consumer_id_is_a_valid_name_and_unique(store_path):
    first, second = default_consumer_id(), default_consumer_id()

    assert first != second
    assert f"-{os.getpid()}-" in first
    heartbeat(store_path, "g", first, ["t"])  # accepted as a file name


def test_group_members_shows_queues_and_heartbeat_age(store_path):
    heartbeat(store_path, "g", "b", ["t"], now_ms=T0, queues=[("t", 2), ("t", 1)])
    heartbeat(store_path, "g", "a", ["t"], now_ms=T0 + 300, queues=[("t", 0)])

    members = group_members(store_path, "g", 10.0, now_ms=T0 + 1_000)

    assert [(m["consumer_id"], m["queues"], m["heartbeat_age_ms"]) for m in members] == [
        ("a", [["t", 0]], 700),
        ("b", [["t", 1], ["t", 2]], 1_000),
    ]
    assert members[0]["pid"] == os.getpid()
    assert members[0]["heartbeat_ms"] == T0 + 300


# ------------------------------------------------------------------ allocation


def _queues(n: int, topic: str = "t") -> list[tuple[str, int]]:
    return [(topic, q) for q in range(n)]


@pytest.mark.parametrize(
    ("queue_count", "members", "expected"),
    [
        # even division
        (4, ["a", "b"], {"a": [0, 1], "b": [2, 3]}),
        (6, ["a", "b", "c"], {"a": [0, 1], "b": [2, 3], "c": [4, 5]}),
        # uneven: the first Q % M members take one more
        (5, ["a", "b"], {"a": [0, 1, 2], "b": [3, 4]}),
        (8, ["a", "b", "c"], {"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7]}),
        (10, ["a", "b", "c", "d"], {"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7], "d": [8, 9]}),
        # as many members as queues
        (3, ["a", "b", "c"], {"a": [0], "b": [1], "c": [2]}),
        # more members than queues: the last members get nothing
        (2, ["a", "b", "c", "d"], {"a": [0], "b": [1], "c": [], "d": []}),
        (1, ["a", "b", "c"], {"a": [0], "b": [], "c": []}),
        # one member takes everything
        (4, ["a"], {"a": [0, 1, 2, 3]}),
        # no queues
        (0, ["a", "b"], {"a": [], "b": []}),
    ],
)
def test_allocate_divides_queues_on_average(queue_count, members, expected):
    got = {m: [q for _, q in allocate(_queues(queue_count), members, m)] for m in members}
    assert got == expected


def test_allocate_sorts_members_and_queues_so_every_member_agrees():
    queues = _queues(7, "a") + _queues(3, "b")
    members = ["m3", "m1", "m2"]
    expected = {m: allocate(sorted(queues), sorted(members), m) for m in members}
    rng = random.Random(7)

    for _ in range(20):
        shuffled_queues = rng.sample(queues, len(queues))
        shuffled_members = rng.sample(members, len(members))
        for m in members:
            assert allocate(shuffled_queues, shuffled_members, m) == expected[m]
    assert expected["m1"] == [("a", 0), ("a", 1), ("a", 2), ("a", 3)]


@pytest.mark.parametrize("queue_count", [1, 2, 3, 5, 8, 13, 64])
@pytest.mark.parametrize("member_count", [1, 2, 3, 4, 7, 20])
def test_allocate_covers_every_queue_once_with_shares_differing_by_at_most_one(
    queue_count, member_count
):
    members = [f"c{i:02d}" for i in range(member_count)]
    shares = [allocate(_queues(queue_count), members, m) for m in members]

    flat = [q for share in shares for q in share]
    assert sorted(flat) == _queues(queue_count)
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)


def test_a_member_not_in_the_list_gets_nothing():
    assert allocate(_queues(4), ["a", "b"], "z") == []
    assert allocate(_queues(4), [], "a") == []
