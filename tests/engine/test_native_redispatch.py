"""Recovery's replay of the records past the checkpoint's ``dispatched`` offset, done
natively for a shared topic's queues whose entries are in place (issue 33, part 3:
``Run.replay_blocks``), held equal to the long way (``recovery.NATIVE_REPLAY = False``):
the same reads, the same report, the same bytes in the log, queue and index files, after
a SIGKILL, with entries lost, blocks lost, a torn tail and damage below the durable
watermark."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, recovery
from tests.engine.storetools import (
    SHARED_LAYOUT,
    read_everything,
    rescan_from_start,
    run_until_killed,
    segment_paths,
    small_config,
)

pytestmark = pytest.mark.one_layout  # its topics are laid out by hand, both ways

SHARED_QUEUES = 24
FLUSHED = 240  # records of topic "s" made durable and dispatched before the kill
PAST = 400  # records of topic "s" appended after, past ``dispatched``

CHILD = f"""
import os, random, signal, sys
from storeadapter.engine import MessageStore
from tests.engine.test_native_redispatch import config
store = MessageStore.open(sys.argv[1], config())
store.create_topic("s", queues={SHARED_QUEUES}, layout="shared")
store.create_topic("k", queues=4, layout="shared")
store.create_topic("f", queues=3, layout="files")
rng = random.Random(7)
def batch(n, start):
    return [{{"body": b"m%d" % (start + i), "queue": rng.randrange({SHARED_QUEUES})}}
            for i in range(n)]
for start in range(0, {FLUSHED}, 60):
    store.append_batch("s", batch(60, start))
store.append_batch("f", [b"f%d" % i for i in range(20)])
store.flush()  # the checkpoint: dispatched and flushed at the tail
for start in range({FLUSHED}, {FLUSHED + PAST}, 50):
    store.append_batch("s", batch(50, start))
    store.append("k", b"keyed%d" % start, key="key%d" % start)
    store.append("f", b"f%d" % start, tag="t")
os.kill(os.getpid(), signal.SIGKILL)
"""


def config():
    """No flush but the child's own: everything after it is past ``dispatched``."""
    return small_config(
        **{
            **SHARED_LAYOUT,
            "shared_layout_above": 1024,
            "flush_interval_ms": 600_000,
            "queue_flush_interval_ms": 600_000,
        }
    )


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("killed") / "store"
    run_until_killed(CHILD, path)
    return path


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _open(path: Path, native: bool, monkeypatch) -> tuple[dict, dict]:
    """Open (recover) the store at ``path`` with or without the native replay; its reads
    and its recovery report (timings and the native count left out)."""
    monkeypatch.setattr(recovery, "NATIVE_REPLAY", native)
    with MessageStore.open(path, config()) as store:
        report = store.stats(topics=False).last_recovery.as_dict()
        reads = {
            key: [
                (m.message_id, m.queue_offset, m.commit_offset, m.body, m.tag, m.keys)
                for m in found
            ]
            for key, found in read_everything(store).items()
        }
        keyed = [m.body for m in store.query_by_key("k", "key300")]
    for name in ("duration_ms", "finished_ms", "native_replayed", "native_ends"):
        report.pop(name)
    report["keyed"] = keyed
    return reads, report


def _files(path: Path) -> dict[str, bytes]:
    """The bytes of the log, queue and index files (what recovery writes or cuts)."""
    found = {}
    for part in ("commitlog", "consumequeue", "index"):
        for file in sorted((path / part).rglob("*")):
            if file.is_file():
                found[str(file.relative_to(path))] = file.read_bytes()
    return found


def _native_count(path: Path, monkeypatch) -> int:
    monkeypatch.setattr(recovery, "NATIVE_REPLAY", True)
    with MessageStore.open(path, config()) as store:
        return store.stats(topics=False).last_recovery.native_replayed


def test_a_sigkilled_shared_topic_reopens_with_its_entries_checked_natively(
    killed, tmp_path, monkeypatch
):
    path = _copy(killed, tmp_path / "store")
    monkeypatch.setattr(recovery, "NATIVE_REPLAY", True)
    with MessageStore.open(path, config()) as store:
        report = store.stats(topics=False).last_recovery
        assert report.clean_shutdown is False
        # Every record of "s" past the checkpoint was taken natively (its entries in
        # place: a SIGKILL keeps the page cache); the keyed ones went the long way.
        assert report.native_replayed == PAST
        bodies = []
        for queue in range(SHARED_QUEUES):
            low, high = store.queue_range("s", queue)
            found = store.read("s", queue, low, max_messages=high - low + 1)
            assert [m.queue_offset for m in found] == list(range(low, high))
            assert all(m.queue == queue and m.topic == "s" for m in found)
            bodies.extend(m.body for m in found)
        # Every acknowledged message readable, none twice, none pointing at another.
        assert sorted(bodies) == sorted(b"m%d" % i for i in range(FLUSHED + PAST))
        assert [m.body for m in store.query_by_key("k", "key290")] == [b"keyed290"]
        assert sum(store.queue_range("f", q)[1] for q in range(3)) == 20 + PAST // 50


def _zero_entries(path: Path, rng: random.Random) -> None:
    """Zero entries of the blocks past the checkpoint (a power loss kept their headers,
    not all of their entries)."""
    blocks = sorted((path / "consumequeue" / "s" / "blocks").iterdir())
    files = [b for b in blocks if b.name.isdigit()]
    block_bytes = 16 + SHARED_LAYOUT["shared_block_entries"] * 20
    for file in files[-2:]:
        data = bytearray(file.read_bytes())
        for block in range(len(data) // block_bytes):
            if rng.random() < 0.5:
                at = block * block_bytes + 16 + 20 * rng.randrange(4)
                data[at : at + 20] = bytes(20)
        file.write_bytes(bytes(data))


def _lose_headers(path: Path, rng: random.Random) -> None:
    """Zero the headers of the last blocks allocated (lost with their pages)."""
    files = sorted(
        f for f in (path / "consumequeue" / "s" / "blocks").iterdir() if f.name.isdigit()
    )
    block_bytes = 16 + SHARED_LAYOUT["shared_block_entries"] * 20
    data = bytearray(files[-1].read_bytes())
    used = [
        b
        for b in range(len(data) // block_bytes)
        if any(data[b * block_bytes : b * block_bytes + 16])
    ]
    for block in used[-3:]:
        data[block * block_bytes : block * block_bytes + 16] = bytes(16)
    files[-1].write_bytes(bytes(data))


def _last_used(segment: Path) -> int:
    data = segment.read_bytes()
    return len(data.rstrip(b"\0"))


def _torn_tail(path: Path, rng: random.Random) -> None:
    """Garbage over the last record's end and past it (a torn write past the watermark)."""
    segment = [p for p in segment_paths(path) if _last_used(p)][-1]
    end = _last_used(segment)
    data = bytearray(segment.read_bytes())
    data[end - 30 : end + 70] = rng.randbytes(100)
    segment.write_bytes(bytes(data))


def _damage_below_watermark(path: Path, rng: random.Random) -> None:
    """Rescan the whole log, with bytes of an early record (below the durable watermark)
    damaged: reported, skipped, the rest replayed."""
    rescan_from_start(path)
    segment = segment_paths(path)[0]
    data = bytearray(segment.read_bytes())
    data[400:420] = rng.randbytes(20)
    segment.write_bytes(bytes(data))


def _index_lost_after_a_clean_close(path: Path, rng: random.Random) -> None:
    """Recovered and closed cleanly, then the key index lost: the next open replays the
    whole log to rebuild it, its queues not loaded first (no crash)."""
    with MessageStore.open(path, config()):
        pass
    shutil.rmtree(path / "index")


@pytest.mark.parametrize(
    "damage",
    [
        None,
        _zero_entries,
        _lose_headers,
        _torn_tail,
        _damage_below_watermark,
        _index_lost_after_a_clean_close,
    ],
    ids=[
        "sigkill",
        "entries-lost",
        "blocks-lost",
        "torn-tail",
        "damage-below-watermark",
        "index-lost-clean",
    ],
)
def test_the_native_replay_recovers_what_the_long_way_does(killed, tmp_path, monkeypatch, damage):
    native = _copy(killed, tmp_path / "native")
    long_way = _copy(killed, tmp_path / "long")
    if damage is not None:
        damage(native, random.Random(3))
        damage(long_way, random.Random(3))
    counted = _copy(native, tmp_path / "counted")
    assert _open(native, True, monkeypatch) == _open(long_way, False, monkeypatch)
    assert _files(native) == _files(long_way)
    taken = _native_count(counted, monkeypatch)
    if damage is None:
        assert taken == PAST
    elif damage is _zero_entries:
        assert 0 < taken < PAST  # the queues whose entries differ went the long way
    elif damage is _index_lost_after_a_clean_close:
        assert taken == FLUSHED + PAST  # the whole log again, every entry in place
    elif damage is _lose_headers:
        assert taken == 0  # unreadable blocks below the published end: a rebuild, the long way
