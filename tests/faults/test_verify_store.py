"""``verify`` checks every file of a store, not only the commit log (issue 17, case 12).

Each kind of damage below used to pass ``verify`` (exit 0). Now each exits 1 naming what
is wrong; a healthy store exits 0; and ``verify`` never changes a byte of the store.
Exit codes: 0 healthy, 1 damage found, 2 bad usage, 3 not a store (or unreadable).
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from storeadapter.engine import Message, MessageStore
from storeadapter.engine.checkpoint import read_checkpoint
from storeadapter.engine.checks.commit_log import check_commit_log
from storeadapter.engine.checks.key_index import check_key_index
from storeadapter.engine.checks.metadata_files import check_metadata
from storeadapter.engine.checks.queue_files import check_files_topic
from storeadapter.engine.cli import EXIT_CORRUPT, EXIT_OK, EXIT_STORE_ERROR, main
from storeadapter.engine.keyindex import ENTRY, ENTRY_SIZE, pack_entry
from storeadapter.engine.metadata import CHECKSUM_FIELD
from storeadapter.engine.offsetsnapshot import encode_snapshot
from storeadapter.engine.verify import verify_store
from tests.engine.storetools import queue_file_paths, segment_paths
from tests.faults.faultharness import QUEUES, TOPIC, fault_config
from tests.faults.faultyfs import FaultyFS


@pytest.fixture
def healthy(tmp_path) -> Path:
    path = tmp_path / "store"
    with MessageStore.open(path, fault_config("sync", segment_bytes=1 << 16)) as store:
        store.create_topic(TOPIC, queues=QUEUES, layout="files")
        for number in range(60):
            store.append(TOPIC, f"message {number}".encode() * 4, key=f"k{number % 7}")
        for queue in range(QUEUES):
            high = store.queue_range(TOPIC, queue)[1]
            store.commit_offset("g", TOPIC, queue, high // 2)
            store.commit_offset("g", TOPIC, queue, high)
    return path


def _verify(path: Path, capsys) -> tuple[int, str]:
    code = main(["--dir", str(path), "verify", "--quiet"])
    return code, capsys.readouterr().out


def _fingerprint(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def test_a_healthy_store_verifies(healthy, capsys):
    code, out = _verify(healthy, capsys)
    assert code == EXIT_OK, out


def test_verify_changes_nothing(healthy, capsys):
    before = _fingerprint(healthy)
    (healthy / "abort").touch()  # as if a process had it open
    before = _fingerprint(healthy)
    _verify(healthy, capsys)
    assert _fingerprint(healthy) == before


def test_a_zeroed_consume_queue_file_is_found(healthy, capsys):
    queue_file = queue_file_paths(healthy, TOPIC, 1)[0]
    queue_file.write_bytes(bytes(queue_file.stat().st_size))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"consumequeue/{TOPIC}/1" in out


def test_zeroed_key_index_files_are_found(healthy, capsys):
    for index_file in (healthy / "index").iterdir():
        if index_file.name.isdigit():
            index_file.write_bytes(bytes(index_file.stat().st_size))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "index/" in out


def test_a_flipped_bit_in_the_offsets_journal_is_found(healthy, capsys):
    journal = healthy / "offsets" / "journal-00000000"
    data = bytearray(journal.read_bytes())
    (length,) = struct.unpack_from("<I", data, 0)
    data[8 + length + 8 + 3] ^= 0x01  # inside the second frame's payload
    journal.write_bytes(bytes(data))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "offsets/journal-00000000" in out


def test_a_hand_edited_topics_json_is_found(healthy, capsys):
    topics = healthy / "topics.json"
    data = json.loads(topics.read_text())
    data["topics"][0]["queues"] = 2
    topics.write_text(json.dumps(data))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "topics.json" in out


def test_a_topics_json_edited_without_its_checksum_is_checked_against_the_log(healthy, capsys):
    topics = healthy / "topics.json"
    data = json.loads(topics.read_text())
    data["topics"][0]["queues"] = 2
    del data[CHECKSUM_FIELD]
    topics.write_text(json.dumps(data))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "queue 3" in out


def test_a_last_segment_cut_at_a_record_boundary_below_the_checkpoint_is_found(healthy, capsys):
    with MessageStore.open(healthy, fault_config("sync")) as store:
        offsets = sorted(
            m.commit_offset for q in range(QUEUES) for m in store.read(TOPIC, q, 0, 500)
        )
    last = segment_paths(healthy)[-1]
    cut = offsets[-3] - int(last.name)
    with open(last, "r+b") as handle:
        handle.truncate(cut)
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "checkpoint" in out


def test_a_directory_that_is_not_a_store_is_refused_with_a_sentence(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code = main(["--dir", str(tmp_path / "empty"), "verify", "--quiet"])
    assert code == EXIT_STORE_ERROR
    assert "not a Tidemark store" in capsys.readouterr().err
    assert list((tmp_path / "empty").iterdir()) == []


def _verify_json(path: Path, capsys) -> tuple[int, dict]:
    code = main(["--dir", str(path), "verify", "--quiet", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _write_checkpoint(path: Path, flushed: int, dispatched: int) -> None:
    """A new newest checkpoint slot (as Checkpoint.save writes one)."""
    data = bytearray((path / "checkpoint").read_bytes())
    sequence = max(struct.unpack_from("<Q", data, at + 8)[0] for at in (0, 64)) + 1
    slot = struct.pack("<4sHHQQQQq", b"TDMC", 1, 0, sequence, flushed, dispatched, dispatched, 0)
    at = (sequence % 2) * 64
    data[at : at + 64] = (slot + struct.pack("<I", crc32c(slot))).ljust(64, b"\0")
    (path / "checkpoint").write_bytes(bytes(data))


def test_a_queue_entry_pointing_at_another_record_is_found(healthy, capsys):
    queue_file = queue_file_paths(healthy, TOPIC, 2)[0]
    data = bytearray(queue_file.read_bytes())
    data[20:28] = data[40:48]  # entry 1 now names entry 2's record
    queue_file.write_bytes(bytes(data))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"consumequeue/{TOPIC}/2/00000000000000000000" in out
    assert "entry 1: does not point at its record" in out


def test_records_missing_from_the_end_of_a_queue_are_found(healthy, capsys):
    last = queue_file_paths(healthy, TOPIC, 0)[-1]
    last.write_bytes(bytes(last.stat().st_size))  # the whole queue reads as unwritten
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"consumequeue/{TOPIC}/0" in out
    assert "without an entry in the queue's files" in out


def test_queue_damage_past_the_checkpoint_is_a_note_the_next_open_mends(healthy, capsys):
    flushed = read_checkpoint(healthy / "checkpoint").commitlog_flushed
    _write_checkpoint(healthy, flushed, dispatched=0)  # as after a crash
    queue_file = queue_file_paths(healthy, TOPIC, 1)[0]
    queue_file.write_bytes(bytes(queue_file.stat().st_size))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_OK, out
    assert f"note: consumequeue/{TOPIC}/1" in out


def test_a_key_index_entry_naming_a_record_without_its_key_is_found(healthy, capsys):
    index_file = next(p for p in (healthy / "index").iterdir() if p.name.isdigit())
    data = bytearray(index_file.read_bytes())
    slots = struct.unpack_from("<I", data, 8)[0]
    first_entry = 64 + 8 * slots  # header, 8-byte slots (format version 3)
    _hash, offset, diff, previous, _crc = ENTRY.unpack_from(data, first_entry)
    data[first_entry : first_entry + ENTRY_SIZE] = pack_entry(12345, offset, diff, previous)
    index_file.write_bytes(bytes(data))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"index/{index_file.name}: entry 1: names a record without a key of its hash" in out


def test_keys_the_key_index_lost_below_its_end_are_found(healthy, capsys):
    index_file = next(p for p in (healthy / "index").iterdir() if p.name.isdigit())
    data = bytearray(index_file.read_bytes())
    slots = struct.unpack_from("<I", data, 8)[0]
    first_entry = 64 + 8 * slots  # header, 8-byte slots (format version 3)
    data[first_entry + ENTRY_SIZE * 10 : first_entry + ENTRY_SIZE * 20] = bytes(10 * ENTRY_SIZE)
    index_file.write_bytes(bytes(data))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "entries 11 to 20 (10): zeros, below the file's count" in out
    assert "10 keys of records between offsets" in out


def test_a_committed_offset_past_its_queue_end_is_found(healthy, capsys):
    journal = healthy / "offsets" / "journal-00000000"
    change = {"group": "g", "topic": TOPIC, "queue": 1, "old": None, "new": 500}
    change.update({"time_ms": 1, "who": "test", "reason": "commit"})
    payload = json.dumps(change, separators=(",", ":")).encode()
    with open(journal, "ab") as handle:
        handle.write(struct.pack("<II", len(payload), crc32c(payload)) + payload)
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"group g on {TOPIC}/1: committed offset 500 is past the queue's end" in out


def test_a_committed_offset_past_its_queue_end_in_a_columns_snapshot_is_found(healthy, capsys):
    positions = {"g": {TOPIC: {1: 500}}}
    (healthy / "offsets" / "snapshot.json").write_bytes(encode_snapshot(1, positions, {}, []))
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"group g on {TOPIC}/1: committed offset 500 is past the queue's end" in out


def test_a_torn_offsets_journal_tail_is_a_note_not_damage(healthy, capsys):
    journal = healthy / "offsets" / "journal-00000000"
    journal.write_bytes(journal.read_bytes()[:-10])  # the last commit cut short
    code, out = _verify(healthy, capsys)
    assert code == EXIT_OK, out
    assert "note: offsets/journal-00000000" in out
    assert "torn tail" in out


def test_a_missing_store_json_is_found(healthy, capsys):
    (healthy / "store.json").unlink()
    code, out = _verify(healthy, capsys)
    assert code == EXIT_CORRUPT, out
    assert "store.json: missing" in out


def test_json_output_lists_each_problem_with_its_kind_path_and_reason(healthy, capsys):
    queue_file = queue_file_paths(healthy, TOPIC, 1)[0]
    queue_file.write_bytes(bytes(queue_file.stat().st_size))
    code, report = _verify_json(healthy, capsys)
    assert code == EXIT_CORRUPT
    assert report["ok"] is False
    [problem] = report["problems"]
    assert problem["kind"] == "consumequeue"
    assert problem["path"] == f"consumequeue/{TOPIC}/1/00000000000000000000"
    assert problem["severity"] == "damage"
    assert "unwritten" in problem["reason"]
    assert report["counts"]["commitlog"]["records"] == 60


@pytest.fixture
def shared(tmp_path) -> Path:
    path = tmp_path / "shared"
    config = fault_config("sync", segment_bytes=1 << 16, shared_block_entries=4)
    with MessageStore.open(path, config) as store:
        store.create_topic(TOPIC, queues=QUEUES, layout="shared")
        for number in range(60):
            store.append(TOPIC, f"message {number}".encode(), key=f"k{number % 7}", tag="a")
    return path


def test_a_healthy_shared_topic_verifies(shared, capsys):
    code, out = _verify(shared, capsys)
    assert code == EXIT_OK, out
    assert "60 entries" in out


def test_a_damaged_block_header_of_a_shared_topic_is_found(shared, capsys):
    blocks = shared / "consumequeue" / TOPIC / "blocks" / ("0" * 20)
    data = bytearray(blocks.read_bytes())
    data[2 * (16 + 4 * 20)] ^= 0x01  # block 2's owner
    blocks.write_bytes(bytes(data))
    code, out = _verify(shared, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"consumequeue/{TOPIC}/blocks/{'0' * 20}: block 2: its header is unreadable" in out


def test_each_check_runs_alone_over_a_store_path(healthy):
    queue_file = queue_file_paths(healthy, TOPIC, 3)[0]
    queue_file.write_bytes(bytes(queue_file.stat().st_size))
    metadata, _ = check_metadata(healthy)
    with check_commit_log(healthy) as log:
        found, _ends = check_files_topic(healthy, metadata.topics[TOPIC], None, log, log.end)
        index = check_key_index(healthy, log, metadata.topics)
    assert [p.path for p in found.problems] == [f"consumequeue/{TOPIC}/3/00000000000000000000"]
    assert not index.problems


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_power_loss_leaves_notes_but_no_damage(tmp_path, mode, seed):
    """Unsynced pages lost at random: what is past the checkpoint the next open mends."""
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        store = MessageStore.open(path, fault_config(mode, segment_bytes=1 << 16))
        store.create_topic(TOPIC, queues=QUEUES, layout="files")
        for batch in range(3):
            messages = [Message(f"{batch}:{n}".encode() * 20, f"k{n}") for n in range(40)]
            store.append_batch(TOPIC, messages)
            if batch == 0:
                store.flush()
        image = fs.capture("three batches, one flushed")
        store.close()
    report = verify_store(image.materialize(tmp_path / "image", pages=random.Random(seed)))
    assert report.ok, "\n".join(p.line() for p in report.problems)


def test_a_damaged_event_index_is_found(tmp_path, capsys):
    path = tmp_path / "store"
    with MessageStore.open(path, fault_config("sync")) as store:
        store.create_stream_topic("accounts", queues=2)
        for version in range(1, 6):
            store.append_event("accounts", "acc-1", b"{}", expected_version=version - 1)
    events = path / "consumequeue" / "accounts" / "events"
    data = bytearray(events.read_bytes())
    data[-40] ^= 0xFF  # inside the newest entry
    events.write_bytes(bytes(data))
    code, out = _verify(path, capsys)
    assert code == EXIT_CORRUPT, out
    assert "consumequeue/accounts/events" in out
