"""Bytes that decide carry their own check (issue 27, case 6): one flipped bit in an
index entry is found and reported, and never changes what a read decides."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from storeadapter.engine import (
    STATUS_DUPLICATE,
    DuplicateCommandError,
    MessageStore,
    WrongExpectedVersionError,
)
from storeadapter.engine.checks import check_event_index
from storeadapter.engine.cli import EXIT_CORRUPT, EXIT_OK, main
from storeadapter.engine.eventindex import ENTRY_SIZE as EVENT_ENTRY_SIZE
from storeadapter.engine.eventindex import HEADER_SIZE, INDEXED_TO_AT, SLOT_SIZE, EventIndex
from storeadapter.engine.keyindex import ENTRY_SIZE as KEY_ENTRY_SIZE
from storeadapter.engine.keyindex import HEADER_SIZE as KEY_HEADER_SIZE
from storeadapter.engine.keyindex import SLOT_SIZE as KEY_SLOT_SIZE
from storeadapter.engine.metadata import CHECKSUM_FIELD, FORMAT_VERSION, content_checksum
from storeadapter.engine.queuebase import entry_checked
from storeadapter.engine.tags import tag_hash
from tests.engine.storetools import small_config

ENTRY = struct.Struct("<QIQ")
#: Where each field of a key index file's header is (docs/FORMAT.md, "Key index").
KEY_HEADER_FIELDS = {
    "magic": 0, "version": 4, "slots": 8, "capacity": 12, "begin_ms": 16,
    "begin_offset": 24, "head_check": 32, "end_ms": 36, "end_offset": 44, "count": 52,
    "flags": 56, "tail_check": 60,
}  # fmt: skip
BLOCK_HEADER = 16


def _allocated_blocks(path: Path, block_bytes: int) -> bytes:
    """The front of a block file up to its first never-written block: blocks are
    allocated in order, and a file is tens of MB of zeros past them."""
    zero = bytes(block_bytes)
    blocks = []
    with open(path, "rb") as handle:
        while (block := handle.read(block_bytes)) and block != zero:
            blocks.append(block)
    return b"".join(blocks)


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
        data = _allocated_blocks(path, block_bytes)
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
        reported = {c.commit_offset for c in store.stats().corruptions}

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
        reported = store.stats().corruptions

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
        reported = store.stats().corruptions

    assert [m.queue_offset for m in read] == list(range(10))
    assert reported == []


def test_an_old_stores_damaged_entry_keeps_no_check_and_is_reported_when_read(tagged_store):
    path, sent = tagged_store
    _make_old(path, b"a")
    entry_file, at = _entry_positions(path, "t", 0)[2]
    _flip(entry_file, at + 15, 1)  # in the old 64-bit tag hash

    with MessageStore.open(path, small_config()) as store:
        read = store.read("t", 0, 0, max_messages=32, tag="a")
        reported = {c.commit_offset for c in store.stats().corruptions}

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


# ---------------------------------------------------------------- the event index


def _stream_store(path: Path) -> None:
    """A closed store whose stream topic ``s`` has streams a..e at versions 1..4, each
    event appended with a command id."""
    with MessageStore.open(path, small_config(stream_cache_streams=1)) as store:
        store.create_stream_topic("s", queues=2)
        for version in range(1, 5):
            for stream in "abcde":
                store.append_event(
                    "s", stream, b"e", expected_version=version - 1,
                    command_id=f"{stream}-{version}",
                )  # fmt: skip


def _event_index(path: Path) -> Path:
    return path / "consumequeue" / "s" / "events"


def _damage(path: Path, at: int, bit: int = 0) -> None:
    _flip(_event_index(path), at, bit)


@pytest.fixture
def stream_store(tmp_path) -> Path:
    path = tmp_path / "store"
    _stream_store(path)
    return path


def _slot_positions(path: Path) -> list[int]:
    """Byte positions of the stream slots that hold an entry."""
    index = EventIndex.open(_event_index(path))
    try:
        table = index.slot_table()
        return [HEADER_SIZE + slot * SLOT_SIZE for slot, held in enumerate(table) if held]
    finally:
        index.close()


@pytest.mark.parametrize("bit", [0, 3, 9, 17, 30])
def test_a_flipped_bit_in_a_stream_slot_never_makes_a_stream_read_as_new(stream_store, bit):
    for at in _slot_positions(stream_store):
        _damage(stream_store, at + bit // 8, bit % 8)

    with MessageStore.open(stream_store, small_config(stream_cache_streams=1)) as store:
        versions = {stream: store.stream_version("s", stream) for stream in "abcde"}
        with pytest.raises(WrongExpectedVersionError):
            store.append_event("s", "c", b"again", expected_version=0)
        reported = store.stats().corruptions

    assert versions == dict.fromkeys("abcde", 4)
    assert reported


def test_a_flipped_bit_in_the_event_index_header_rebuilds_it_from_the_topics_start(
    stream_store,
):
    with open(_event_index(stream_store), "rb") as handle:
        handle.seek(INDEXED_TO_AT)
        (indexed_to,) = struct.unpack("<Q", handle.read(8))
    highest = indexed_to.bit_length() - 1
    _damage(stream_store, INDEXED_TO_AT + highest // 8, highest % 8)  # inside an early record

    with MessageStore.open(stream_store, small_config(stream_cache_streams=1)) as store:
        with pytest.raises(DuplicateCommandError):
            store.append_event("s", "b", b"again", expected_version=4, command_id="b-2")
        versions = {stream: store.stream_version("s", stream) for stream in "abcde"}

    assert versions == dict.fromkeys("abcde", 4)


def test_the_newest_event_index_entry_failing_its_crc_is_indexed_again(stream_store):
    index = EventIndex.open(_event_index(stream_store))
    newest_at = index.entries_at + (index.count - 1) * EVENT_ENTRY_SIZE
    index.close()
    _damage(stream_store, newest_at + 3, 4)
    (stream_store / "abort").touch()  # as after a crash: recovery looks at the index

    with MessageStore.open(stream_store, small_config(stream_cache_streams=1)) as store:
        version = store.stream_version("s", "e")
        with pytest.raises(DuplicateCommandError):
            store.append_event("s", "e", b"again", expected_version=4, command_id="e-4")

    assert version == 4


def test_verify_finds_a_stream_slot_that_fails_its_check(stream_store):
    _damage(stream_store, _slot_positions(stream_store)[0] + 1, 5)

    reasons = [problem["reason"] for problem in check_event_index(stream_store)]

    assert any("fails its check" in reason for reason in reasons), reasons


def test_an_event_index_of_the_version_before_checks_is_rebuilt_at_the_first_open(
    stream_store,
):
    with open(_event_index(stream_store), "r+b") as handle:
        handle.seek(4)
        handle.write(struct.pack("<H", 1))  # as an engine before slot checks wrote it

    with MessageStore.open(stream_store, small_config(stream_cache_streams=1)) as store:
        versions = {stream: store.stream_version("s", stream) for stream in "abcde"}
        rebuilt = store.last_recovery.event_indexes[0]["rebuilt"]

    assert versions == dict.fromkeys("abcde", 4)
    assert "unknown version 1" in rebuilt
    assert check_event_index(stream_store) == []


# ---------------------------------------------------------------- the key index


def _key_index_file(path: Path) -> Path:
    return sorted(p for p in (path / "index").iterdir() if p.name.isdigit())[0]


@pytest.mark.parametrize("field_at", [0, 2, 5, 13])  # key hash, commit offset, time diff
def test_a_flipped_key_index_entry_never_lets_a_retried_message_be_stored_twice(tmp_path, field_at):
    path = tmp_path / "store"
    with MessageStore.open(path, small_config()) as store:
        store.create_topic("t", queues=2)
        for i in range(6):
            store.append("t", f"pay {i}".encode(), dedup_id=f"payment-{i}")
    index_file = _key_index_file(path)
    with open(index_file, "rb") as handle:
        _magic, _version, _, slots = struct.unpack("<4sHHI", handle.read(12))
    entries_at = KEY_HEADER_SIZE + slots * KEY_SLOT_SIZE
    _flip(index_file, entries_at + 3 * KEY_ENTRY_SIZE + field_at, 1)  # entry 4: payment-3

    with MessageStore.open(path, small_config()) as store:
        again = store.append("t", b"pay 3", dedup_id="payment-3")
        stored = sum(len(store.read("t", q, 0, max_messages=64)) for q in range(2))
        reported = store.stats().corruptions

    assert again.status == STATUS_DUPLICATE
    assert stored == 6
    assert reported


def test_verify_finds_a_key_index_entry_that_fails_its_check(tmp_path, capsys):
    path = tmp_path / "store"
    with MessageStore.open(path, small_config()) as store:
        store.create_topic("t", queues=2)
        for i in range(6):
            store.append("t", f"pay {i}".encode(), key=f"k{i}")
    index_file = _key_index_file(path)
    with open(index_file, "rb") as handle:
        _magic, _version, _, slots = struct.unpack("<4sHHI", handle.read(12))
    _flip(index_file, KEY_HEADER_SIZE + slots * KEY_SLOT_SIZE + 2 * KEY_ENTRY_SIZE + 9, 0)

    code, out = _verify(path, capsys)

    assert code == EXIT_CORRUPT, out
    assert "fails its check" in out


@pytest.mark.parametrize("version", [1, 2])  # before entry checks; before slot and header checks
def test_a_key_index_of_a_version_before_checks_is_indexed_again_at_the_first_open(
    tmp_path, version
):
    path = tmp_path / "store"
    with MessageStore.open(path, small_config()) as store:
        store.create_topic("t", queues=2)
        for i in range(6):
            store.append("t", f"pay {i}".encode(), key=f"k{i}", dedup_id=f"payment-{i}")
    with open(_key_index_file(path), "r+b") as handle:
        handle.seek(4)
        handle.write(struct.pack("<H", version))  # as an engine before the checks wrote it

    with MessageStore.open(path, small_config()) as store:
        found = [len(store.query_by_key("t", f"k{i}")) for i in range(6)]
        again = store.append("t", b"pay 2", dedup_id="payment-2")

    assert found == [1] * 6
    assert again.status == STATUS_DUPLICATE


def _payments(path: Path) -> None:
    with MessageStore.open(path, small_config()) as store:
        store.create_topic("t", queues=2)
        for i in range(6):
            store.append("t", f"pay {i}".encode(), key=f"k{i}", dedup_id=f"payment-{i}")


def _retry_and_look_up(path: Path) -> tuple[str, int, list[int], bool]:
    """Retry payment-3 and look its key up: (status, messages stored, lookups, reported)."""
    with MessageStore.open(path, small_config()) as store:
        again = store.append("t", b"pay 3", key="k3", dedup_id="payment-3")
        stored = sum(len(store.read("t", q, 0, max_messages=64)) for q in range(2))
        found = [len(store.query_by_key("t", f"k{i}")) for i in range(6)]
        stats = store.stats()
        reported = bool(stats.corruptions or stats.index_problems)
    return again.status, stored, found, reported


def _used_slot_positions(index_file: Path) -> list[int]:
    """The byte of every slot that holds an entry number."""
    data = index_file.read_bytes()
    slots = struct.unpack_from("<I", data, 8)[0]
    return [
        KEY_HEADER_SIZE + slot * KEY_SLOT_SIZE
        for slot in range(slots)
        if struct.unpack_from("<I", data, KEY_HEADER_SIZE + slot * KEY_SLOT_SIZE)[0]
    ]


@pytest.mark.parametrize("bit", [0, 1, 5, 12, 31])
def test_a_flipped_bit_in_a_key_index_slot_never_lets_a_key_or_a_retry_be_missed(tmp_path, bit):
    path = tmp_path / "store"
    _payments(path)
    index_file = _key_index_file(path)
    for at in _used_slot_positions(index_file):
        _flip(index_file, at + bit // 8, bit % 8)

    status, stored, found, reported = _retry_and_look_up(path)

    assert status == STATUS_DUPLICATE
    assert stored == 6
    assert found == [1] * 6
    assert reported


@pytest.mark.parametrize("field", KEY_HEADER_FIELDS)
def test_a_flipped_bit_in_a_key_index_header_field_indexes_the_file_again(tmp_path, field):
    path = tmp_path / "store"
    _payments(path)
    index_file = _key_index_file(path)
    _flip(index_file, KEY_HEADER_FIELDS[field], 1)

    status, stored, found, reported = _retry_and_look_up(path)

    assert status == STATUS_DUPLICATE
    assert stored == 6
    assert found == [1] * 6
    assert reported


def test_verify_finds_a_key_index_slot_that_fails_its_check(tmp_path, capsys):
    path = tmp_path / "store"
    _payments(path)
    index_file = _key_index_file(path)
    _flip(index_file, _used_slot_positions(index_file)[0] + 1, 3)

    code, out = _verify(path, capsys)

    assert code == EXIT_CORRUPT, out
    assert "hash slots fail their check" in out


@pytest.mark.parametrize("field", ["slots", "end_offset"])
def test_verify_finds_a_key_index_header_field_that_fails_its_check(tmp_path, capsys, field):
    path = tmp_path / "store"
    _payments(path)
    _flip(_key_index_file(path), KEY_HEADER_FIELDS[field], 2)

    code, out = _verify(path, capsys)

    assert code == EXIT_CORRUPT, out
    assert "fails its check" in out
