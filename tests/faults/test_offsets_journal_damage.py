"""Damage in the offsets journal (issue 17, case 10), and commits that do not hold the
store's write lock across their fsync (case 13).

One bad frame in the middle of the journal loses that one change: replay skips to the
next frame that validates, instead of cutting the journal there and erasing every group's
later offsets (a mass redelivery). The damaged bytes are moved aside into a file the
recovery report names, never destroyed; so are those of a torn tail.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

from storeadapter.engine import MessageStore, fileio
from tests.faults.faultharness import QUEUES, TOPIC, create_store, fault_config

GROUPS = ("g1", "g2", "g3")
ROUNDS = 5
_FRAME = struct.Struct("<II")


def _committed_store(path: Path) -> None:
    create_store(path, "sync")
    with MessageStore.open(path, fault_config("sync")) as store:
        store.append_batch(TOPIC, [b"m"] * (4 * QUEUES * ROUNDS))
        for round_number in range(1, ROUNDS + 1):
            for group in GROUPS:
                for queue in range(QUEUES):
                    store.commit_offset(group, TOPIC, queue, 2 * round_number)


def _frames(journal: Path) -> list[tuple[int, int]]:
    """(start, length) of every frame."""
    data = journal.read_bytes()
    frames, pos = [], 0
    while pos + _FRAME.size <= len(data):
        length, _crc = _FRAME.unpack_from(data, pos)
        if not length:
            break
        frames.append((pos, _FRAME.size + length))
        pos += _FRAME.size + length
    return frames


def _damage(path: Path, start: int, at: int) -> bytes:
    data = bytearray(path.read_bytes())
    data[start + at] ^= 0x20
    path.write_bytes(bytes(data))
    return bytes(data)


def test_one_bad_frame_loses_that_change_alone_and_its_bytes_are_kept(tmp_path):
    path = tmp_path / "store"
    _committed_store(path)
    journal = path / "offsets" / "journal-00000000"
    start, length = _frames(journal)[3]  # g1's first commit on queue 3
    damaged = _damage(journal, start, _FRAME.size + 5)
    with MessageStore.open(path, fault_config("sync")) as store:
        for group in GROUPS:
            for queue in range(QUEUES):
                assert store.committed_offset(group, TOPIC, queue) == 2 * ROUNDS, (group, queue)
        damage = store.stats().last_recovery.offsets_damage
        assert len(damage) == 1, damage
        kept = path / "offsets" / damage[0]["kept_in"]
        assert damage[0]["length"] == length
        assert kept.read_bytes() == damaged[start : start + length]


def test_a_torn_journal_tail_is_cut_but_its_bytes_are_kept(tmp_path):
    path = tmp_path / "store"
    _committed_store(path)
    journal = path / "offsets" / "journal-00000000"
    start, _length = _frames(journal)[-1]
    torn = journal.read_bytes()[start : start + 11]
    with open(journal, "r+b") as handle:
        handle.truncate(start + 11)
    with MessageStore.open(path, fault_config("sync")) as store:
        assert store.committed_offset(GROUPS[-1], TOPIC, QUEUES - 1) == 2 * (ROUNDS - 1)
        assert store.committed_offset(GROUPS[0], TOPIC, 0) == 2 * ROUNDS
        damage = store.stats().last_recovery.offsets_damage
        assert [d["length"] for d in damage] == [11]
        assert (path / "offsets" / damage[0]["kept_in"]).read_bytes() == torn


def test_an_append_does_not_wait_for_an_offset_commits_fsync(tmp_path, monkeypatch):
    path = tmp_path / "store"
    create_store(path, "async")
    store = MessageStore.open(path, fault_config("async", flush_interval_ms=600_000))
    store.append(TOPIC, b"to commit past", queue=0)
    release = threading.Event()
    stalled = threading.Event()
    real = fileio.fdatasync

    def slow_journal_sync(fd: int) -> None:
        if "journal-" in os.readlink(f"/proc/self/fd/{fd}"):
            stalled.set()
            release.wait(timeout=30)
        real(fd)

    monkeypatch.setattr(fileio, "fdatasync", slow_journal_sync)
    committer = threading.Thread(target=store.commit_offset, args=("g", TOPIC, 0, 1))
    committer.start()
    try:
        assert stalled.wait(timeout=30), "the commit never reached its fsync"
        appended = threading.Event()
        appender = threading.Thread(
            target=lambda: (store.append(TOPIC, b"meanwhile"), appended.set()), daemon=True
        )
        appender.start()
        done_while_stalled = appended.wait(timeout=10)
    finally:
        release.set()
        committer.join()
    store.close()
    assert done_while_stalled, "the append waited for the offset commit's fsync"
