"""The offsets snapshot: positions written as columns, and snapshots of older engines."""

from __future__ import annotations

import json

import pytest

from storeadapter.engine.errors import StoreFormatError
from storeadapter.engine.offsets import OffsetStore
from storeadapter.engine.offsetsnapshot import decode_snapshot, encode_snapshot


def _state(offsets: OffsetStore) -> tuple:
    return (
        offsets.positions(),
        offsets.commit_times(),
        {g: list(h) for g, h in offsets.history.items()},
    )


def _committed(directory, compact_bytes=1 << 30) -> OffsetStore:
    offsets = OffsetStore(directory, compact_bytes=compact_bytes)
    for i in range(60):
        offsets.commit(f"g{i % 3}", f"t{i % 2}", i % 7, i * 11, who="w", reason=f"r{i}")
    offsets.commit("big", "t0", (1 << 21) - 1, (1 << 62) + 5, who="w", reason="far")
    return offsets


def test_a_compaction_writes_the_positions_as_columns_not_rows(tmp_path):
    offsets = _committed(tmp_path / "offsets")
    offsets.compact()
    offsets.close()

    data = json.loads((tmp_path / "offsets" / "snapshot.json").read_bytes())

    assert "offsets" not in data and "last_commit" not in data
    assert {(c["group"], c["topic"]) for c in data["columns"]} == {
        (f"g{g}", f"t{t}") for g in range(3) for t in range(2)
    } | {("big", "t0")}


def test_positions_times_and_history_survive_a_compaction_and_reopen(tmp_path):
    offsets = _committed(tmp_path / "offsets")
    offsets.compact()
    before = _state(offsets)
    offsets.close()

    reopened = OffsetStore(tmp_path / "offsets")

    assert _state(reopened) == before
    reopened.close()


def test_a_position_without_a_commit_time_keeps_none_after_a_compaction(tmp_path):
    directory = tmp_path / "offsets"
    directory.mkdir()
    old = {"generation": 3, "offsets": [["g", "t", 0, 4], ["g", "t", 1, 9]], "history": []}
    (directory / "snapshot.json").write_text(json.dumps(old))
    offsets = OffsetStore(directory)
    offsets.compact()
    offsets.close()

    reopened = OffsetStore(directory)

    assert reopened.positions() == {("g", "t", 0): 4, ("g", "t", 1): 9}
    assert reopened.commit_times() == {}
    reopened.close()


def test_a_snapshot_of_rows_written_by_an_older_engine_still_reads(tmp_path):
    directory = tmp_path / "offsets"
    directory.mkdir()
    old = {
        "generation": 2,
        "offsets": [["g", "t", 0, 4], ["g", "u", 3, 1], ["h", "t", 0, 8]],
        "history": [["g", "t", 0, None, 4, 1000, "w", "r"]],
        "last_commit": [["g", "t", 0, 1000], ["h", "t", 0, 2000], ["x", "t", 0, 5]],
    }
    (directory / "snapshot.json").write_text(json.dumps(old))

    offsets = OffsetStore(directory, repair=False)

    assert offsets.generation == 2
    assert offsets.positions() == {("g", "t", 0): 4, ("g", "u", 3): 1, ("h", "t", 0): 8}
    assert offsets.group_positions("g") == {("t", 0): 4, ("u", 3): 1}
    # a commit time of a position the snapshot does not hold is not kept (as replay does)
    assert offsets.commit_times() == {("g", "t", 0): 1000, ("h", "t", 0): 2000}
    assert [c.new for c in offsets.history["g"]] == [4]
    offsets.close()


def test_the_first_open_rewrites_an_older_engines_snapshot_as_columns(tmp_path):
    directory = tmp_path / "offsets"
    directory.mkdir()
    old = {"generation": 2, "offsets": [["g", "t", 0, 4]], "history": []}
    (directory / "snapshot.json").write_text(json.dumps(old))

    OffsetStore(directory).close()

    data = json.loads((directory / "snapshot.json").read_bytes())
    assert "columns" in data and "offsets" not in data
    reopened = OffsetStore(directory)
    assert reopened.positions() == {("g", "t", 0): 4}
    reopened.close()


def test_a_process_not_alone_with_the_store_leaves_an_older_snapshot_as_it_is(tmp_path):
    directory = tmp_path / "offsets"
    directory.mkdir()
    old = json.dumps({"generation": 2, "offsets": [["g", "t", 0, 4]], "history": []})
    (directory / "snapshot.json").write_text(old)

    OffsetStore(directory, repair=False).close()

    assert (directory / "snapshot.json").read_text() == old


@pytest.mark.parametrize(
    "column",
    [
        {"group": "g", "topic": "t", "queues": "AAAAAA==", "offsets": "", "committed_at": ""},
        {"group": "g", "topic": "t", "queues": "not base64!", "offsets": "", "committed_at": ""},
        {"group": "g", "topic": 5, "queues": "", "offsets": "", "committed_at": ""},
        {"group": "g", "topic": "t", "queues": ""},
    ],
    ids=["lengths-disagree", "bad-base64", "topic-not-text", "column-missing"],
)
def test_a_damaged_column_refuses_the_open_with_a_format_error(tmp_path, column):
    directory = tmp_path / "offsets"
    directory.mkdir()
    data = {"generation": 1, "format": 2, "columns": [column], "history": []}
    (directory / "snapshot.json").write_text(json.dumps(data))

    with pytest.raises(StoreFormatError, match="snapshot.json cannot be read"):
        OffsetStore(directory)


def test_a_history_item_of_the_wrong_length_is_a_format_error(tmp_path):
    with pytest.raises(ValueError, match="history item of 3 fields"):
        decode_snapshot(json.dumps({"generation": 1, "history": [[1, 2, 3]]}).encode())


def test_encode_then_decode_gives_the_same_columns():
    positions = {"g": {"t": {5: 7, 0: 1}, "u": {2: 3}}}
    times = {"g": {"t": {5: 70}, "u": {2: 30}}}

    snapshot = decode_snapshot(encode_snapshot(4, positions, times, []))

    assert snapshot.generation == 4
    got = {
        (c.group, c.topic): (list(c.queues), list(c.offsets), list(c.committed_at))
        for c in snapshot.columns
    }
    assert got == {("g", "t"): ([5, 0], [7, 1], [70, -1]), ("g", "u"): ([2], [3], [30])}
