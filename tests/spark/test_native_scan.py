"""The Spark reader's native walk (``_native.read_members``) against the long way, the
Python walk it replaces: the same messages and the same reports of damage, for reads
narrowed by topic, queue and time, over segments with random damage (flipped bytes,
zeroed stretches) and records with tags, keys and properties."""

from __future__ import annotations

import random

import pytest

from storeadapter.engine import Message, StoredMessage, clock
from storeadapter.spark import logview, planning, scanning
from tests.engine.storetools import segment_paths

SELECTIONS = {
    "everything": {},
    "one topic": {"topics": {"orders"}},
    "some queues": {"queues": {0, 2}},
    "a time window": {"since_ms": 1_000_300, "until_ms": 1_000_700},
    "by queue offset": {"min_queue_offset": 5, "max_queue_offset": 30},
    "per queue": {
        "queue_starts": {"orders": {0: 10, 2: 40}, "audit": {1: 3}},
        "queue_ends": {"orders": {0: 50, 1: 20}},
    },
}


def _populate(store, rng: random.Random, monkeypatch) -> None:
    """240 messages, the n-th stored at 1,000,000 + 4n ms."""
    store.create_topic("orders", queues=3)
    store.create_topic("audit", queues=2)
    for number in range(240):
        monkeypatch.setattr(clock, "now_ms", lambda number=number: 1_000_000 + number * 4)
        topic = "orders" if number % 3 else "audit"
        message = Message(
            rng.randbytes(rng.randrange(0, 300)),
            key=f"k{number % 7}" if number % 2 else None,
            tag=rng.choice([None, "a", "b"]),
            properties={"n": str(number)} if number % 5 == 0 else None,
            born_time_ms=900_000 + number,
        )
        store.append_batch(topic, [message])


def _damage(store_path, rng: random.Random) -> None:
    segments = segment_paths(store_path)
    for _ in range(rng.randrange(0, 6)):
        path = rng.choice(segments)
        data = bytearray(path.read_bytes())
        at = rng.randrange(len(data))
        if rng.random() < 0.7:
            data[at] ^= 1 << rng.randrange(8)
        else:
            stretch = min(rng.randrange(1, 200), len(data) - at)
            data[at : at + stretch] = bytes(stretch)
        path.write_bytes(bytes(data))


def _read(snap, wanted, ranges) -> list:
    found = []
    for log_range in ranges:
        try:
            found.extend(scanning.read_range(log_range, wanted, snap.id_prefix))
        except Exception as error:  # the same refusal both ways
            found.append((type(error).__name__, str(error)))
    return found


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("selection", SELECTIONS, ids=list(SELECTIONS))
def test_the_native_walk_reads_what_the_long_way_reads(
    open_store, store_path, monkeypatch, seed, selection
):
    rng = random.Random(seed)
    store = open_store()
    _populate(store, rng, monkeypatch)
    store.close()
    _damage(store_path, rng)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection(**SELECTIONS[selection]).resolve(snap.topics)
    ranges = planning.plan_ranges(snap, wanted, split_bytes=rng.choice([700, 4096, 1 << 20]))

    native = _read(snap, wanted, ranges)
    monkeypatch.setattr(scanning, "NATIVE", False)
    long_way = _read(snap, wanted, ranges)

    assert native == long_way
    assert any(isinstance(item, StoredMessage) for item in native)
