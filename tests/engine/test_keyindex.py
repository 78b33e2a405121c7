"""The key index (storeadapter/engine/keyindex.py): real files, tiny slot and entry counts."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crc32c import crc32c

from storeadapter.engine import keyindex
from storeadapter.engine.keyindex import (
    ENTRY,
    ENTRY_SIZE,
    FLAG_REMOVED,
    FLAG_SEALED,
    HEADER,
    HEADER_SIZE,
    SLOT_SIZE,
    KeyIndex,
    file_size,
    key_hash,
    pack_entry,
    slot_bytes,
    tail_bytes,
)

# Not run again in the shared-layout pass: the key index alone, no topic.
pytestmark = pytest.mark.one_layout

SLOTS = 8
ENTRIES = 16
T0 = 1_795_314_808_000
# Two keys of topic "t" whose 32-bit hashes are equal (found by a birthday search).
COLLIDING = ("8af904c05a59f8b2", "b8c11652674a407d")


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "index"


@pytest.fixture
def opened(directory: Path):
    indexes: list[KeyIndex] = []

    def _open(slots: int = SLOTS, entries: int = ENTRIES) -> KeyIndex:
        index = KeyIndex(directory, slots, entries)
        index.open()
        indexes.append(index)
        return index

    yield _open
    for index in indexes:
        index.close()


def name(commit_offset: int) -> str:
    return f"{commit_offset:020d}"


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def fill(index: KeyIndex, count: int, keys: int = 5, start: int = 0, step: int = 100):
    """Put ``count`` records, key ``k{i % keys}``, offsets start, start+step, ...; 1 ms apart."""
    items = [
        ("t", f"k{i % keys}", start + i * step, T0 + (start + i * step) // step)
        for i in range(count)
    ]
    index.put_many(items)
    return items


def expected(items, key, begin=None, end=None):
    return [
        offset
        for topic, k, offset, ms in reversed(items)
        if k == key and (begin is None or ms >= begin) and (end is None or ms <= end)
    ]


def test_put_query_round_trip(opened, directory):
    index = opened()
    assert index.query("t", "a", None, None, 10) == []
    index.put("t", "a", 0, T0)
    index.put("t", "b", 69, T0 + 1)
    index.put("u", "a", 140, T0 + 2)  # same key, other topic
    assert index.query("t", "a", None, None, 10) == [0]
    assert index.query("t", "b", None, None, 10) == [69]
    assert index.query("u", "a", None, None, 10) == [140]
    assert index.query("t", "zzz", None, None, 10) == []
    assert names(directory) == ["00000000000000000000"]


def test_newest_first_limit_and_duplicates(opened):
    index = opened()
    items = fill(index, 12, keys=3)
    assert index.query("t", "k1", None, None, 100) == expected(items, "k1")
    assert index.query("t", "k1", None, None, 2) == expected(items, "k1")[:2]
    assert index.query("t", "k1", None, None, 0) == []
    # The same key twice in one record is returned once.
    index.put_many([("t", "dup", 5000, T0 + 50), ("t", "dup", 5000, T0 + 50)])
    assert index.query("t", "dup", None, None, 10) == [5000]


def test_time_range_filter(opened):
    index = opened()
    items = fill(index, 12, keys=2)
    for begin, end in [(T0 + 3, T0 + 8), (None, T0 + 4), (T0 + 9, None), (T0 + 5, T0 + 5)]:
        assert index.query("t", "k0", begin, end, 100) == expected(items, "k0", begin, end)
    assert index.query("t", "k0", T0 + 100, None, 100) == []


def test_files_outside_the_time_range_are_not_walked(opened, monkeypatch):
    index = opened()
    items = fill(index, 40, keys=4)  # 3 files: 16 + 16 + 8 entries, times T0 .. T0+39
    assert len(index.files) == 3
    walked: list[str] = []
    original = keyindex.IndexFile.slot

    def spy(self, slot):
        walked.append(self.name)
        return original(self, slot)

    monkeypatch.setattr(keyindex.IndexFile, "slot", spy)
    assert index.query("t", "k2", T0 + 20, T0 + 25, 100) == expected(items, "k2", T0 + 20, T0 + 25)
    assert walked == [index.files[1].name]
    walked.clear()
    assert index.query("t", "k2", None, T0 + 3, 100) == expected(items, "k2", None, T0 + 3)
    assert walked == [index.files[0].name]


def test_many_keys_in_one_slot_all_found(opened):
    index = opened()
    keys = [f"key-{n}" for n in range(200) if key_hash("t", f"key-{n}") % SLOTS == 3][:6]
    assert len(keys) == 6
    items = [("t", keys[i % 6], i * 10, T0 + i) for i in range(15)]
    index.put_many(items)
    for key in keys:
        assert index.query("t", key, None, None, 100) == expected(items, key)


def test_only_true_hash_collisions_come_back(opened):
    a, b = COLLIDING
    assert key_hash("t", a) == key_hash("t", b)
    slot = key_hash("t", a) % SLOTS
    other = next(
        f"o{n}"
        for n in range(1000)
        if key_hash("t", f"o{n}") % SLOTS == slot and key_hash("t", f"o{n}") != key_hash("t", a)
    )
    index = opened()
    index.put_many([("t", a, 0, T0), ("t", other, 100, T0), ("t", b, 200, T0)])
    # Same slot, different hash: filtered out. Same 32-bit hash: a candidate.
    assert index.query("t", a, None, None, 10) == [200, 0]
    assert index.query("t", b, None, None, 10) == [200, 0]
    assert index.query("t", other, None, None, 10) == [100]


def test_rolls_into_new_files_when_full(opened, directory):
    index = opened()
    items = fill(index, 40, keys=4)
    assert names(directory) == [name(0), name(1600), name(3200)]
    for path in sorted(directory.iterdir()):
        assert path.stat().st_size == file_size(SLOTS, ENTRIES)
    for key in ("k0", "k1", "k2", "k3"):
        assert index.query("t", key, None, None, 100) == expected(items, key)
    assert [f.count() for f in index.files] == [16, 16, 8]
    assert [bool(f.flags() & FLAG_SEALED) for f in index.files] == [True, True, False]


def test_put_and_put_many_write_the_same_bytes(tmp_path):
    items = [("t", f"k{i % 7}", i * 50, T0 + i * 3) for i in range(37)]
    one, many = KeyIndex(tmp_path / "one", SLOTS, ENTRIES), KeyIndex(tmp_path / "many", 8, 16)
    one.open()
    many.open()
    for item in items:
        one.put(*item)
    many.put_many(items[:10])
    many.put_many(iter(items[10:]))
    one.close()
    many.close()
    assert names(tmp_path / "one") == names(tmp_path / "many")
    for name in names(tmp_path / "one"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()


def test_rolls_when_the_time_diff_does_not_fit(opened, directory):
    index = opened()
    index.put("t", "a", 0, T0)
    index.put("t", "a", 100, T0 + (1 << 32))  # 2**32 ms later: past a u32
    index.put("t", "a", 200, T0 + (1 << 32) - 5)  # clock went back past the file's begin
    assert names(directory) == [name(0), name(100), name(200)]
    assert index.query("t", "a", None, None, 10) == [200, 100, 0]
    assert index.query("t", "a", T0 + (1 << 32) - 5, T0 + (1 << 32) - 5, 10) == [200]
    assert index.query("t", "a", None, T0, 10) == [0]


def test_a_record_with_more_keys_than_a_file_holds(opened, directory):
    index = opened(entries=4)
    index.put_many([("t", f"k{n}", 0, T0) for n in range(6)] + [("t", "z", 10, T0)])
    assert [index.query("t", f"k{n}", None, None, 5) for n in range(6)] == [[0]] * 4 + [[]] * 2
    assert index.query("t", "z", None, None, 5) == [10]
    assert names(directory) == [name(0), name(10)]


def test_offsets_must_not_go_backwards(opened):
    index = opened()
    index.put_many([("t", "a", 100, T0), ("t", "b", 100, T0)])
    with pytest.raises(ValueError, match="commit-offset order"):
        index.put_many([("t", "c", 200, T0), ("t", "d", 150, T0)])
    assert index.query("t", "c", None, None, 5) == [200]  # the items before it were kept
    assert index.end_offset == 201


def test_reopen_keeps_everything(opened, directory):
    index = opened()
    items = fill(index, 40, keys=4)
    index.close()
    again = opened()
    assert again.problems == []
    assert again.end_offset == 3901
    for key in ("k0", "k1", "k2", "k3"):
        assert again.query("t", key, None, None, 100) == expected(items, key)
    more = fill(again, 5, keys=4, start=4000)
    assert again.query("t", "k0", None, None, 100) == expected(items + more, "k0")


def test_end_offset(opened):
    index = opened()
    assert index.end_offset is None
    index.put("t", "a", 0, T0)
    assert index.end_offset == 1
    index.put_many([("t", "a", 70, T0), ("t", "b", 70, T0)])
    assert index.end_offset == 71
    fill(index, 30, start=1000)
    assert index.end_offset == 1000 + 29 * 100 + 1


def test_truncate_from_removes_a_suffix_and_keeps_chains_valid(opened, directory):
    index = opened()
    items = fill(index, 40, keys=3)  # files at 0, 1600, 3200
    assert index.truncate_from(2450) == 15  # cuts the middle file after 9 entries
    assert names(directory) == [name(0), name(1600)]
    assert index.end_offset == 2401
    kept = items[:25]
    for key in ("k0", "k1", "k2"):
        assert index.query("t", key, None, None, 100) == expected(kept, key)
    assert not index.files[-1].flags() & FLAG_SEALED  # newest again
    # Removed entries are zeros on disk.
    cut = index.files[-1]
    assert cut.map[cut.entries_at + 9 * ENTRY_SIZE : cut.entries_at + 16 * ENTRY_SIZE] == bytes(
        7 * ENTRY_SIZE
    )
    assert index.truncate_from(2450) == 0
    more = fill(index, 12, keys=3, start=2450)  # fills the cut file and rolls again
    for key in ("k0", "k1", "k2"):
        assert index.query("t", key, None, None, 100) == expected(kept + more, key)
    index.close()
    reopened = opened()
    for key in ("k0", "k1", "k2"):
        assert reopened.query("t", key, None, None, 100) == expected(kept + more, key)


def test_truncate_everything(opened, directory):
    index = opened()
    fill(index, 20)
    assert index.truncate_from(0) == 20
    assert names(directory) == []
    assert index.end_offset is None
    assert index.query("t", "k0", None, None, 10) == []
    index.put("t", "k0", 0, T0)
    assert index.query("t", "k0", None, None, 10) == [0]


def test_truncate_at_a_file_boundary(opened, directory):
    index = opened()
    items = fill(index, 32)
    assert index.truncate_from(1600) == 16
    assert names(directory) == [name(0)]
    assert index.query("t", "k1", None, None, 100) == expected(items[:16], "k1")


def test_delete_below(opened, directory):
    index = opened()
    items = fill(index, 60, keys=4)  # files at 0, 1600, 3200, 4800
    assert index.delete_below(1500) == 0  # the first file ends at 1500
    assert index.delete_below(1501) == 1
    assert names(directory) == [name(1600), name(3200), name(4800)]
    assert index.delete_below(10**9) == 2  # never the newest
    assert names(directory) == [name(4800)]
    assert index.query("t", "k0", None, None, 100) == expected(items[48:], "k0")


def test_zero_length_last_file_is_removed_on_open(opened, directory):
    index = opened()
    items = fill(index, 20)
    index.close()
    (directory / name(5000)).write_bytes(b"")
    again = opened()
    assert names(directory) == [name(0), name(1600)]
    assert len(again.problems) == 1 and "removed" in again.problems[0].reason
    assert again.query("t", "k0", None, None, 100) == expected(items, "k0")
    fill(again, 3, start=5000)
    assert again.end_offset == 5201


def test_truncated_last_file_is_repaired_on_open(opened, directory):
    index = opened()
    items = fill(index, 26, keys=3)  # second file holds entries at 1600 .. 2500
    index.close()
    last = directory / name(1600)
    size = HEADER_SIZE + SLOTS * SLOT_SIZE + 6 * ENTRY_SIZE + 7  # 6 entries and part of a 7th
    os.truncate(last, size)
    again = opened()
    assert last.stat().st_size == file_size(SLOTS, ENTRIES)
    assert "6 of 10 entries kept" in again.problems[0].reason
    kept = items[:22]
    assert again.end_offset == 2101
    for key in ("k0", "k1", "k2"):
        assert again.query("t", key, None, None, 100) == expected(kept, key)
    more = fill(again, 4, keys=3, start=2200)
    for key in ("k0", "k1", "k2"):
        assert again.query("t", key, None, None, 100) == expected(kept + more, key)


def test_last_file_cut_inside_the_slots_is_removed(opened, directory):
    index = opened()
    items = fill(index, 20)
    index.close()
    os.truncate(directory / name(1600), HEADER_SIZE + 3)
    again = opened()
    assert names(directory) == [name(0)]
    assert "removed" in again.problems[0].reason
    assert again.query("t", "k0", None, None, 100) == expected(items[:16], "k0")


def test_corrupt_files_are_skipped_and_reported(opened, directory):
    index = opened()
    items = fill(index, 40, keys=4)
    index.close()
    middle = directory / name(1600)
    with open(middle, "r+b") as f:
        f.write(b"XXXX")
    (directory / name(100)).write_bytes(b"short")  # not the newest: kept, skipped
    again = opened()
    reasons = sorted((p.path.name, p.reason) for p in again.problems)
    assert reasons[0][0] == name(100) and "shorter" in reasons[0][1]
    assert reasons[1][0] == name(1600) and "bad magic" in reasons[1][1]
    survivors = items[:16] + items[32:]
    assert again.query("t", "k1", None, None, 100) == expected(survivors, "k1")
    again.refresh()
    assert len(again.problems) == 2  # reported once
    # Retention removes a damaged file once the next file's first offset is below the limit.
    assert again.delete_below(3300) == 3
    assert names(directory) == [name(3200)]


def test_unfinished_put_is_ignored_and_overwritten(opened):
    """A crash after a put's entry and slot writes but before its header write."""
    index = opened()
    index.put_many([("t", "a", 0, T0), ("t", "a", 100, T0 + 1)])
    f = index.files[0]
    hashed = key_hash("t", "a")
    os.pwrite(f.fd, pack_entry(hashed, 200, 2, 2), f.entries_at + 2 * ENTRY_SIZE)
    position = HEADER_SIZE + (hashed % SLOTS) * SLOT_SIZE
    os.pwrite(f.fd, slot_bytes(position, 3), position)
    assert index.query("t", "a", None, None, 10) == [100, 0]
    index.put("t", "b", 300, T0 + 3)
    index.put("t", "a", 400, T0 + 4)
    assert index.query("t", "a", None, None, 10) == [400, 100, 0]
    assert index.query("t", "b", None, None, 10) == [300]


def test_second_instance_sees_the_writers_files(opened, directory):
    writer = opened()
    reader = opened()
    assert reader.query("t", "k0", None, None, 100) == []
    items = fill(writer, 20)
    # The reader knew no file: it lists the directory, then follows the header counts.
    assert reader.query("t", "k0", None, None, 100) == expected(items, "k0")
    more = fill(writer, 30, start=2000)  # more files; the reader's newest is sealed
    assert reader.query("t", "k0", None, None, 100) == expected(items + more, "k0")
    assert reader.end_offset == writer.end_offset
    assert writer.delete_below(3200) == 2  # ends at 1500 and 3100
    reader.refresh()
    assert [f.name for f in reader.files] == [f.name for f in writer.files]
    assert writer.truncate_from(4000) > 0
    assert reader.query("t", "k0", None, None, 100) == expected(
        [i for i in items + more if 3200 <= i[2] < 4000], "k0"
    )


def test_a_writer_in_another_process(opened, directory):
    reader = opened()
    reader.put("t", "k0", 0, T0)
    script = textwrap.dedent(f"""
        from pathlib import Path
        from storeadapter.engine.keyindex import KeyIndex
        index = KeyIndex(Path({str(directory)!r}), {SLOTS}, {ENTRIES})
        index.open()
        index.put_many([("t", f"k{{i % 3}}", 100 * i, {T0} + i) for i in range(1, 40)])
        index.truncate_from(3500)
        index.close()
    """)
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", script], cwd=root, check=True, timeout=60)
    items = [("t", f"k{i % 3}", 100 * i, T0 + i) for i in range(35)]
    for key in ("k0", "k1", "k2"):
        assert reader.query("t", key, None, None, 100) == expected(items, key)
    assert reader.end_offset == 3401


def test_two_writers_take_turns(opened, directory):
    first = opened()
    second = opened()
    items = []
    for turn in range(6):
        writer = first if turn % 2 == 0 else second
        items += fill(writer, 7, keys=3, start=turn * 1000, step=10)
    assert len(names(directory)) == 3
    flags = [f.flags() for f in first.files]
    assert flags[-1] == 0
    for index in (first, second):
        index.refresh()
        for key in ("k0", "k1", "k2"):
            assert index.query("t", key, None, None, 100) == expected(items, key)
    # A writer whose newest file was removed by the other starts over correctly.
    assert first.truncate_from(0) == 42
    second.put("t", "k0", 9000, T0)
    assert first.query("t", "k0", None, None, 10) == [9000]


def test_removed_flag_and_stale_temp_files(opened, directory):
    index = opened()
    fill(index, 20)
    index.close()
    last = directory / name(1600)
    with open(last, "r+b") as f:
        end_ms, end_offset, count, _flags = struct.unpack_from("<qQII", f.read(60), 36)
        f.seek(36)
        f.write(tail_bytes(end_ms, end_offset, count, FLAG_REMOVED))  # a crash while deleting
    (directory / ".00000000000000009999.tmp").write_bytes(b"partial")
    again = opened()
    assert not last.exists() and again.problems == []
    assert again.end_offset == 1501
    again.put("t", "x", 5000, T0)
    assert names(directory) == [name(0), name(5000)]
    assert not (directory / ".00000000000000009999.tmp").exists()


def test_header_layout(opened, directory):
    index = opened()
    index.put_many([("t", "a", 7, T0), ("t", "b", 90, T0 + 5)])
    raw = (directory / name(7)).read_bytes()
    assert len(raw) == HEADER_SIZE + SLOTS * SLOT_SIZE + ENTRIES * 24 == 64 + 64 + 384
    fields = HEADER.unpack_from(raw)
    assert fields[:7] == (b"TDMI", 3, 0, SLOTS, ENTRIES, T0, 7)
    assert fields[8:12] == (T0 + 5, 90, 2, 0)
    assert fields[7] == crc32c(raw[:32]) and fields[12] == crc32c(raw[36:60])
    ha, hb = key_hash("t", "a"), key_hash("t", "b")
    assert ENTRY.unpack_from(raw, 128)[:4] == (ha, 7, 0, 0)
    assert ENTRY.unpack_from(raw, 152)[:4] == (hb, 90, 5, 2 if ha % SLOTS == hb % SLOTS else 0)
    assert raw[128:152] == pack_entry(ha, 7, 0, 0)  # ends with the CRC32C of its 20 bytes
    at = 64 + (hb % SLOTS) * 8
    assert struct.unpack_from("<II", raw, at) == (2, crc32c(struct.pack("<QI", at, 2)))


def test_take_dirty(opened):
    index = opened()
    assert index.take_dirty() == []
    fill(index, 20)
    dirty = index.take_dirty()
    assert sorted(f.name for f in dirty) == [name(0), name(1600)]
    for f in dirty:
        f.sync()
        assert isinstance(f.fd, int)
    assert index.take_dirty() == []
