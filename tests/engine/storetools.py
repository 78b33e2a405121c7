"""Helpers for the engine tests: damaging store files the way a crash or a bad disk would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from storeadapter.engine import MessageStore, StoreConfig, StoredMessage, fileio

SEGMENT_BYTES = 4096
MAX_MESSAGE_BYTES = 1024
QUEUE_FILE_ENTRIES = 64
# Small key-index files: the default ones are 420 MB (sparse), too big to copy in tests.
INDEX_SLOTS = 64
INDEX_ENTRIES = 512
# A small event index: the default's slot tables are 32 MB (sparse).
STREAM_INDEX_SLOTS = 64


#: ``TIDEMARK_TEST_LAYOUT=shared`` runs the engine tests with every topic shared (all
#: queues' entries in blocks of shared files, tiny blocks and files).
SHARED_LAYOUT = {"shared_layout_above": 0, "shared_block_entries": 4, "shared_blocks_per_file": 8}


def shared_layout_run() -> bool:
    """Whether the tests run with every topic shared (``TIDEMARK_TEST_LAYOUT=shared``)."""
    return os.environ.get("TIDEMARK_TEST_LAYOUT") == "shared"


def small_config(**overrides) -> StoreConfig:
    """The tests' store settings: tiny segments, queue files and index files."""
    settings = {
        "index_slots": INDEX_SLOTS,
        "index_entries": INDEX_ENTRIES,
        "stream_index_slots": STREAM_INDEX_SLOTS,
        "segment_bytes": SEGMENT_BYTES,
        "max_message_bytes": MAX_MESSAGE_BYTES,
        "queue_file_entries": QUEUE_FILE_ENTRIES,
    }
    if shared_layout_run():
        settings.update(SHARED_LAYOUT)
    return StoreConfig(**{**settings, **overrides})


def segment_paths(store_path: Path) -> list[Path]:
    """The commit-log segment files, in offset order."""
    return sorted((store_path / "commitlog").iterdir(), key=lambda p: p.name)


def queue_file_paths(store_path: Path, topic: str, queue: int) -> list[Path]:
    """The consume-queue files of one queue, in index order."""
    directory = store_path / "consumequeue" / topic / str(queue)
    files = [p for p in directory.iterdir() if len(p.name) == 20 and p.name.isdigit()]
    return sorted(files, key=lambda p: p.name)


def _segment_for(store_path: Path, commit_offset: int) -> tuple[Path, int]:
    for path in reversed(segment_paths(store_path)):
        base = int(path.name)
        if base <= commit_offset:
            return path, commit_offset - base
    raise AssertionError(f"no segment holds commit-log offset {commit_offset}")


def write_log_bytes(store_path: Path, commit_offset: int, data: bytes) -> None:
    """Overwrite commit-log bytes at ``commit_offset`` (the store must be closed)."""
    path, pos = _segment_for(store_path, commit_offset)
    assert pos + len(data) <= path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(pos)
        handle.write(data)


def read_log_bytes(store_path: Path, commit_offset: int, count: int) -> bytes:
    path, pos = _segment_for(store_path, commit_offset)
    with open(path, "rb") as handle:
        handle.seek(pos)
        return handle.read(count)


def flip_bit(store_path: Path, commit_offset: int, bit: int = 0) -> None:
    byte = read_log_bytes(store_path, commit_offset, 1)[0]
    write_log_bytes(store_path, commit_offset, bytes([byte ^ (1 << bit)]))


def record_length(store_path: Path, commit_offset: int) -> int:
    """The record's leading length field, read from the file."""
    return int.from_bytes(read_log_bytes(store_path, commit_offset, 4), "little")


def simulate_crash(store_path: Path, keep_checkpoint: bool = False) -> None:
    """Make a closed store look as if its process died: abort marker present and,
    unless ``keep_checkpoint``, no checkpoint, so recovery scans the whole log."""
    (store_path / "abort").touch()
    if not keep_checkpoint:
        (store_path / "checkpoint").unlink(missing_ok=True)


def rescan_from_start(store_path: Path) -> None:
    """Make recovery scan a closed store's whole log again while its checkpoint still
    says how far the log is durable (as sync-mode fsyncs leave it: the durable watermark
    ahead of what was dispatched)."""
    from storeadapter.engine.checkpoint import Checkpoint, read_checkpoint

    state = read_checkpoint(store_path / "checkpoint")
    assert state is not None, "the store has no checkpoint"
    (store_path / "checkpoint").unlink()
    checkpoint = Checkpoint(store_path / "checkpoint")
    checkpoint.save(state.commitlog_flushed, 0, 0)
    checkpoint.close()


def copy_store(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    (target / "lock").unlink(missing_ok=True)
    return target


def read_all(store: MessageStore, topic: str, queue: int) -> list[StoredMessage]:
    """Every readable message of a queue, from its minimum offset to its maximum."""
    low, high = store.queue_range(topic, queue)
    messages: list[StoredMessage] = []
    offset = low
    while offset < high:
        result = store.read_result(topic, queue, offset, 100)
        messages.extend(result.messages)
        assert result.next_offset > offset, "read_result made no progress"
        offset = result.next_offset
    return messages


def assert_dense_and_unique(store: MessageStore, topic: str) -> list[bytes]:
    """Every queue of ``topic`` readable at each offset of its range, and no body twice;
    the bodies read."""
    bodies = []
    for queue in range(store.topic(topic).queues):
        low, high = store.queue_range(topic, queue)
        messages = read_all(store, topic, queue)
        assert [m.queue_offset for m in messages] == list(range(low, high))
        bodies.extend(m.body for m in messages)
    assert len(bodies) == len(set(bodies)), sorted(bodies)
    return bodies


def read_everything(store: MessageStore) -> dict[tuple[str, int], list[StoredMessage]]:
    """Every readable message of every queue of every topic."""
    return {
        (info.name, queue): read_all(store, info.name, queue)
        for info in store.topics()
        for queue in range(info.queues)
    }


def tail(store: MessageStore) -> int:
    return store.stats().commit_log.tail


def lose_queue_files(store_path: Path, topic: str, queues=None, how: str = "deleted") -> None:
    """Lose consume-queue files of ``topic``, as a disk fault would: ``deleted`` or
    ``zeroed``. With files per queue, those of ``queues`` (default all); in a shared topic
    every block file (its blocks mix all queues)."""
    root = store_path / "consumequeue" / topic
    blocks = root / "blocks"
    if blocks.is_dir():
        directories = [blocks]
    elif queues is None:
        directories = [d for d in root.iterdir() if d.is_dir()]
    else:
        directories = [root / str(q) for q in queues]
    for directory in directories:
        for path in directory.iterdir():
            if not path.is_file():
                continue
            if how == "deleted":
                path.unlink()
            else:
                path.write_bytes(bytes(path.stat().st_size))


def stall_fdatasync(monkeypatch) -> threading.Event:
    """Make every fdatasync wait (at most 30 s) until the returned event is set."""
    release = threading.Event()
    real = fileio.fdatasync

    def stalled(fd: int) -> None:
        release.wait(timeout=30)
        real(fd)

    monkeypatch.setattr(fileio, "fdatasync", stalled)
    return release


def append_in_another_process(store_path: Path, topic: str, count: int, acks: Path) -> list[str]:
    """Have producer_process.py append ``count`` messages to ``topic`` of the store at
    ``store_path`` in a process of its own; the message ids it acknowledged, in order."""
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("producer_process.py")), str(store_path)]
        + [topic, str(count), str(acks)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr.decode()
    return acks.read_text().split()


def run_until_killed(script: str, *args: object) -> subprocess.CompletedProcess:
    """Run ``script`` (Python source) in a child process, from the repository, with
    ``args`` as its argv; the child must end SIGKILLed (by its own fault plan or itself).
    Its finished process (stdout and stderr as text)."""
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr[-2000:]
    return child


def memory_kept_by(work: Callable[[], None]) -> int:
    """Bytes Python's allocator holds more after a second run of ``work`` than before it
    (the first run warms whatever is made once)."""
    work()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def preads_counted(monkeypatch) -> list[int]:
    """The sizes of the seam's ``pread`` calls from now on (``fileio.pread`` replaced by
    one that notes each size, then reads as it would)."""
    seen: list[int] = []
    genuine = fileio.pread

    def counting(fd, size, offset):
        seen.append(size)
        return genuine(fd, size, offset)

    monkeypatch.setattr(fileio, "pread", counting)
    return seen
