"""Bytes that decide carry their own check (issue 27, case 6): one flipped bit in an
index entry is found and reported, and never changes what a read decides."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from storeadapter.engine.cli import EXIT_CORRUPT, EXIT_OK, main
from storeadapter.engine.metadata import CHECKSUM_FIELD, FORMAT_VERSION, content_checksum
from storeadapter.engine.queuebase import entry_checked
from storeadapter.engine.tags import tag_hash
from tests.engine.storetools import small_config

ENTRY = struct.Struct("<QIQ")
BLOCK_HEADER = 16


def _entry_positions(store: Path, topic: str, queue: int) -> list[tuple[Path, int]]:
    """Where each written consume-queue entry of ``topic``/``queue`` is: (file, byte)."""
    queue_dir = store / "consumequeue" / topic / str(queue)
    if queue_dir.is_dir():
        path = sorted(p for p in queue_dir.iterdir() if p.name.isdigit())[0]
        data = path.read_bytes()
        return [
            (path, at)
            for at in range(0, len(data) - len(data) % 20, 20)
            if ENTRY.unpack_from(data, at)[1]
        ]
    config = small_config()
    block_bytes = BLOCK_HEADER + config.shared_block_entries * 20
    found = []
    blocks = store / "consumequeue" / topic / "blocks"
    for path in sorted(p for p in blocks.iterdir() if p.name.isdigit()):
        data = path.read_bytes()
        for start in range(0, len(data) - block_bytes + 1, block_bytes):
            owner, seq = struct.unpack_from("<IQ", data, start)
            if owner != queue:
                continue
            for slot in range(config.shared_block_entries):
                at = start + BLOCK_HEADER + slot * 20
                if ENTRY.unpack_from(data, at)[1]:
                    found.append((seq * config.shared_block_entries + slot, path, at))
    return [(path, at) for _, path, at in sorted(found)]


def _flip(path: Path, at: int, bit: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(at)
        byte = handle.read(1)[0]
        handle.seek(at)
        handle.write(bytes([byte ^ (1 << bit)]))


@pytest.fixture(params=["files", "shared"])
def tagged_store(request, tmp_path):
    """A closed store whose topic ``t`` has 10 messages tagged ``a`` in queue 0."""
    path = tmp_path / "store"
    with MessageStore.open(path, small_config()) as store:
        store.create_topic("t", queues=1, layout=request.param)
        sent = [store.append("t", f"m{i}".encode(), tag="a", queue=0) for i in range(10)]
        store.flush()
    return path, sent


@pytest.mark.parametrize("bit", [0, 13, 31, 45, 63])
def test_a_flipped_tag_hash_bit_never_makes_a_tag_filtered_read_skip_the_message(tagged_store, bit):
    path, sent = tagged_store
    entry_file, at = _entry_positions(path, "t", 0)[3]
    _flip(entry_file, at + 12 + bit // 8, bit % 8)

    with MessageStore.open(path, small_config()) as store:
        read = store.read("t", 0, 0, max_messages=32, tag="a")
        reported = {c["commit_offset"] for c in store.stats()["corruptions"]}

    assert [m.queue_offset for m in read] == list(range(10))
    assert sent[3].commit_offset in reported


def test_a_consumer_pulling_by_tag_past_a_flipped_entry_gets_its_message(tagged_store):
    path, sent = tagged_store
    entry_file, at = _entry_positions(path, "t", 0)[5]
    _flip(entry_file, at + 14, 2)

    with MessageStore.open(path, small_config()) as store:
        first = store.read("t", 0, 4, max_messages=1, tag="a")
        second = store.read("t", 0, 5, max_messages=1, tag="a")

    assert [m.queue_offset for m in first + second] == [4, 5]


def _write_entry_as_old(entry_file: Path, at: int, tag_hash64: int) -> None:
    """Give an entry the layout of an engine without entry checks (a 64-bit tag hash)."""
    with open(entry_file, "r+b") as handle:
        handle.seek(at + 12)
        handle.write(struct.pack("<Q", tag_hash64))


def _make_old(path: Path, tag: bytes) -> None:
    """Turn a closed store into one an engine of format version 1 wrote."""
    for entry_file, at in _entry_positions(path, "t", 0):
        _write_entry_as_old(entry_file, at, tag_hash(tag))
    identity = json.loads((path / "store.json").read_bytes())
    identity["format_version"] = 1
    identity[CHECKSUM_FIELD] = content_checksum(identity)
    (path / "store.json").write_text(json.dumps(identity))


def _all_checked(path: Path) -> bool:
    return all(
        entry_checked(entry_file.read_bytes(), at)
        for entry_file, at in _entry_positions(path, "t", 0)
    )


def test_an_old_stores_entries_get_their_checks_at_its_first_open(tagged_store):
    path, _sent = tagged_store
    _make_old(path, b"a")
    assert not _all_checked(path)

    with MessageStore.open(path, small_config()) as store:
        read = store.read("t", 0, 0, max_messages=32, tag="a")
        reported = store.stats()["corruptions"]

    assert [m.queue_offset for m in read] == list(range(10))
    assert reported == []
    assert _all_checked(path)
    assert json.loads((path / "store.json").read_bytes())["format_version"] == FORMAT_VERSION


def test_an_entry_without_a_check_is_verified_against_its_record_and_not_reported(
    tagged_store,
):
    path, _sent = tagged_store
    with MessageStore.open(path, small_config()) as store:
        entry_file, at = _entry_positions(path, "t", 0)[6]
        _write_entry_as_old(entry_file, at, tag_hash(b"a"))  # as an older engine left it

        read = store.read("t", 0, 0, max_messages=32, tag="a")
        reported = store.stats()["corruptions"]

    assert [m.queue_offset for m in read] == list(range(10))
    assert reported == []


def test_an_old_stores_damaged_entry_keeps_no_check_and_is_reported_when_read(tagged_store):
    path, sent = tagged_store
    _make_old(path, b"a")
    entry_file, at = _entry_positions(path, "t", 0)[2]
    _flip(entry_file, at + 15, 1)  # in the old 64-bit tag hash

    with MessageStore.open(path, small_config()) as store:
        read = store.read("t", 0, 0, max_messages=32, tag="a")
        reported = {c["commit_offset"] for c in store.stats()["corruptions"]}

    assert [m.queue_offset for m in read] == list(range(10))
    assert reported == {sent[2].commit_offset}
    assert not entry_checked(entry_file.read_bytes(), at)


def _verify(path: Path, capsys) -> tuple[int, str]:
    code = main(["--dir", str(path), "verify", "--quiet"])
    return code, capsys.readouterr().out


def test_verify_finds_an_entry_that_fails_its_check(tagged_store, capsys):
    path, _sent = tagged_store
    entry_file, at = _entry_positions(path, "t", 0)[4]
    _flip(entry_file, at + 17, 3)  # in the check itself

    code, out = _verify(path, capsys)

    assert code == EXIT_CORRUPT, out
    assert "fails its check" in out


def test_verify_takes_an_old_stores_entries_as_they_are(tagged_store, capsys):
    path, _sent = tagged_store
    _make_old(path, b"a")

    code, out = _verify(path, capsys)

    assert code == EXIT_OK, out
