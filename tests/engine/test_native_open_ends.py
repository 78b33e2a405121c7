"""An open after a crash looks at a shared topic's queue ends in one native pass
(issue 33: ``BlockIndex.unsettled_queues``, ``recovery.look_at_ends``) instead of loading,
trimming and moving every queue in Python; only the queues it does not find settled are
loaded. Held equal to the open that loads them all (``recovery.NATIVE_ENDS = False``):
the same reads, queue ranges, report and file bytes, after a SIGKILL, with retention
behind the queues, a torn tail, entries lost, whole blocks of entries zeroed, an entry
pointing at another queue's record, damage below the durable watermark and blocks lost.
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storeadapter.engine import MessageStore, recovery
from storeadapter.engine.blockqueue import BlockQueue
from storeadapter.engine.offsets import OffsetStore
from tests.engine.storetools import (
    SHARED_LAYOUT,
    read_everything,
    rescan_from_start,
    run_until_killed,
    segment_paths,
    small_config,
)

pytestmark = pytest.mark.one_layout  # its topics are laid out by hand, both ways

PER_BLOCK = SHARED_LAYOUT["shared_block_entries"]
BLOCK_BYTES = 16 + PER_BLOCK * 20

CHILD = """
import os, random, signal, sys, time
from storeadapter.engine import MessageStore
from tests.engine.test_native_open_ends import config
path, queues, retention = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
store = MessageStore.open(path, config())
store.create_topic("s", queues=queues, layout="shared")
store.create_topic("f", queues=3, layout="files")
rng = random.Random(11)
def batch(n, start, among):
    return [{"body": b"m%d" % (start + i), "queue": rng.randrange(among)} for i in range(n)]
sent = 0
if retention:  # the first third of the queues written, then their records deleted
    for _ in range(6):
        store.append_batch("s", batch(40, sent, queues // 3))
        sent += 40
    store.flush()
    cut = store.stats().commit_log.tail
    now = int(time.time() * 1000) + 10 * 365 * 86_400_000
    store.delete_expired(now_ms=now, may_delete=lambda segment: segment["end"] <= cut)
for _ in range(8):
    store.append_batch("s", batch(50, sent, queues))
    sent += 50
store.append_batch("f", [b"f%d" % i for i in range(20)])
for queue in range(0, queues if retention else 0, 3):  # a group's positions (clamped)
    low, high = store.queue_range("s", queue)
    store.commit_offset("g", "s", queue, high)
store.flush()  # the checkpoint: dispatched and flushed at the tail
for _ in range(8):  # past ``dispatched``; the last quarter of the queues ends below it
    store.append_batch("s", batch(50, sent, queues - queues // 4))
    sent += 50
    store.append("f", b"f%d" % sent, tag="t")
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
            "retention_hours": 1,
        }
    )


def _killed(tmp_path_factory, queues: int, retention: bool) -> Path:
    path = tmp_path_factory.mktemp("killed") / "store"
    run_until_killed(CHILD, path, queues, int(retention))
    return path


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    return _killed(tmp_path_factory, 60, True)


@pytest.fixture(scope="module")
def killed_small(tmp_path_factory) -> Path:
    return _killed(tmp_path_factory, 30, False)


@pytest.fixture(scope="module")
def killed_large(tmp_path_factory) -> Path:
    return _killed(tmp_path_factory, 300, False)


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _open(path: Path, native: bool, monkeypatch) -> tuple[dict, dict, dict]:
    """Open (recover) the store at ``path`` with or without the native look at the ends;
    its reads, every queue's range and its recovery report (timings and native counts
    left out)."""
    monkeypatch.setattr(recovery, "NATIVE_ENDS", native)
    with MessageStore.open(path, config()) as store:
        report = store.stats(topics=False).last_recovery.as_dict()
        ranges = {
            (info.name, queue): store.queue_range(info.name, queue)
            for info in store.topics()
            for queue in range(info.queues)
        }
        reads = {
            key: [(m.message_id, m.queue_offset, m.commit_offset, m.body, m.tag) for m in found]
            for key, found in read_everything(store).items()
        }
        corruptions = sorted(str(c) for c in store.stats(topics=False).corruptions)
    for name in ("duration_ms", "finished_ms", "native_replayed", "native_ends"):
        report.pop(name)
    report["corruptions_seen"] = corruptions
    return reads, ranges, report


def _files(path: Path) -> dict[str, bytes]:
    """The bytes of the log, queue and index files (what recovery writes or cuts)."""
    found = {}
    for part in ("commitlog", "consumequeue", "index"):
        for file in sorted((path / part).rglob("*")):
            if file.is_file():
                found[str(file.relative_to(path))] = file.read_bytes()
    return found


def _block_files(path: Path) -> list[Path]:
    return sorted(f for f in (path / "consumequeue" / "s" / "blocks").iterdir() if f.name.isdigit())


def _used_blocks(data: bytes) -> list[int]:
    return [
        b
        for b in range(len(data) // BLOCK_BYTES)
        if any(data[b * BLOCK_BYTES : b * BLOCK_BYTES + 16])
    ]


def _last_entry_at(data: bytes, block: int) -> int | None:
    """Where the block's last written entry starts, or None."""
    for slot in range(PER_BLOCK - 1, -1, -1):
        at = block * BLOCK_BYTES + 16 + slot * 20
        if any(data[at : at + 20]):
            return at
    return None


def _last_used(segment: Path) -> int:
    return len(segment.read_bytes().rstrip(b"\0"))


def _torn_tail(path: Path, rng: random.Random) -> None:
    """Garbage over the last records' end and past it (a torn write past the watermark):
    their queues' last entries point past the tail found."""
    segment = [p for p in segment_paths(path) if _last_used(p)][-1]
    end = _last_used(segment)
    data = bytearray(segment.read_bytes())
    data[end - 300 : end + 70] = rng.randbytes(370)
    segment.write_bytes(bytes(data))


def _entries_lost(path: Path, rng: random.Random) -> None:
    """Zero entries here and there in the last block file (a power loss kept some of
    their writes)."""
    file = _block_files(path)[-1]
    data = bytearray(file.read_bytes())
    for block in _used_blocks(data):
        if rng.random() < 0.4:
            at = block * BLOCK_BYTES + 16 + 20 * rng.randrange(PER_BLOCK)
            data[at : at + 20] = bytes(20)
    file.write_bytes(bytes(data))


def _blocks_zeroed(path: Path, rng: random.Random) -> None:
    """Every entry of some blocks zeroed, their headers kept (the look at the queue's
    end goes back a block)."""
    for file in _block_files(path)[-2:]:
        data = bytearray(file.read_bytes())
        for block in _used_blocks(data):
            if rng.random() < 0.3:
                start = block * BLOCK_BYTES + 16
                data[start : start + PER_BLOCK * 20] = bytes(PER_BLOCK * 20)
        file.write_bytes(bytes(data))


def _change_last_entries(path: Path, rng: random.Random, change) -> None:
    """``change(data, at, lasts)`` a fifth of the blocks' last entries, in every block
    file (below ``dispatched`` too, where the replay does not write them again)."""
    for file in _block_files(path):
        data = bytearray(file.read_bytes())
        lasts = [at for at in (_last_entry_at(data, b) for b in _used_blocks(data)) if at]
        for at in rng.sample(lasts, len(lasts) // 5):
            change(data, at, lasts)
        file.write_bytes(bytes(data))


def _foreign_entries(path: Path, rng: random.Random) -> None:
    """Blocks' last entries replaced by another block's last entry (checks and all):
    they point at a record of another queue or queue offset."""

    def foreign(data: bytearray, at: int, lasts: list[int]) -> None:
        other = rng.choice(lasts)
        data[at : at + 20] = bytes(data[other : other + 20])

    _change_last_entries(path, rng, foreign)


def _far_entries(path: Path, rng: random.Random) -> None:
    """Blocks' last entries pointing far past the log's tail, or with a size that
    overflows (a dead writer's, a torn write)."""

    def far(data: bytearray, at: int, lasts: list[int]) -> None:
        offset, size = struct.unpack_from("<QI", data, at)
        if rng.random() < 0.5:
            struct.pack_into("<Q", data, at, offset + (1 << 40))
        else:
            struct.pack_into("<QI", data, at, (1 << 64) - 8, size)

    _change_last_entries(path, rng, far)


def _entries_out_of_order(path: Path, rng: random.Random) -> None:
    """First entries of blocks in the first block files (records below the log's start)
    swapped with those of blocks in the last ones (records above it): a queue's entries
    no longer rise with its offsets (its minimum is looked at in Python: a search's answer
    would depend on where it starts)."""
    files = _block_files(path)
    early, late = files[:3], files[-3:]
    datas = {file: bytearray(file.read_bytes()) for file in {*early, *late}}
    for _ in range(6):
        a_file, b_file = rng.choice(early), rng.choice(late)
        a_data, b_data = datas[a_file], datas[b_file]
        a = rng.choice(_used_blocks(a_data)) * BLOCK_BYTES + 16
        b = rng.choice(_used_blocks(b_data)) * BLOCK_BYTES + 16
        a_data[a : a + 20], b_data[b : b + 20] = b_data[b : b + 20], a_data[a : a + 20]
    for file, data in datas.items():
        file.write_bytes(bytes(data))


def _damage_below_watermark(path: Path, rng: random.Random) -> None:
    """Rescan the whole log with bytes of records below the durable watermark damaged,
    record headers among them: reported, skipped, their entries kept."""
    rescan_from_start(path)
    for segment in segment_paths(path)[1:-1:3]:
        data = bytearray(segment.read_bytes())
        at = rng.randrange(0, max(1, len(data.rstrip(b"\0")) - 40))
        data[at : at + 30] = rng.randbytes(30)
        segment.write_bytes(bytes(data))


def _lose_headers(path: Path, rng: random.Random) -> None:
    """Zero the headers of the last blocks allocated: unreadable blocks below the
    published end, the topic rebuilt (its queues loaded in Python both ways)."""
    file = _block_files(path)[-1]
    data = bytearray(file.read_bytes())
    for block in _used_blocks(data)[-3:]:
        data[block * BLOCK_BYTES : block * BLOCK_BYTES + 16] = bytes(16)
    file.write_bytes(bytes(data))


DAMAGES = [
    None,
    _torn_tail,
    _entries_lost,
    _blocks_zeroed,
    _foreign_entries,
    _far_entries,
    _entries_out_of_order,
    _damage_below_watermark,
    _lose_headers,
]
IDS = [
    "sigkill",
    "torn-tail",
    "entries-lost",
    "blocks-zeroed",
    "foreign-entries",
    "far-entries",
    "entries-out-of-order",
    "damage-below-watermark",
    "blocks-lost",
]


@pytest.mark.parametrize("seed", [3, 8])
@pytest.mark.parametrize("damage", DAMAGES, ids=IDS)
def test_the_native_look_at_the_ends_opens_as_loading_every_queue_does(
    killed, tmp_path, monkeypatch, damage, seed
):
    native = _copy(killed, tmp_path / "native")
    python = _copy(killed, tmp_path / "python")
    if damage is not None:
        damage(native, random.Random(seed))
        damage(python, random.Random(seed))
    assert _open(native, True, monkeypatch) == _open(python, False, monkeypatch)
    assert _files(native) == _files(python)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    damages=st.lists(st.sampled_from(DAMAGES[1:-1]), min_size=2, max_size=4, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_damages_together_open_as_loading_every_queue_does(
    killed, tmp_path_factory, monkeypatch, damages, seed
):
    """Several damages at once (torn tail, entries lost or foreign, blocks zeroed...),
    seeds drawn: the same reads, ranges, report and files both ways."""
    root = tmp_path_factory.mktemp("together")
    native = _copy(killed, root / "native")
    python = _copy(killed, root / "python")
    for damage in damages:
        damage(native, random.Random(seed))
        damage(python, random.Random(seed))
    assert _open(native, True, monkeypatch) == _open(python, False, monkeypatch)
    assert _files(native) == _files(python)
    shutil.rmtree(root)


def _counted_open(path: Path, native: bool, monkeypatch) -> tuple[int, int, int, int]:
    """Open the store at ``path``; how many of topic "s"'s queues were loaded and
    trimmed in Python during the open, how many the native pass found settled, and how
    many have entries."""
    loads = []
    trims = []
    load = BlockQueue._load
    trim = recovery.trim_queue_end

    def counted_load(queue):
        loads.append(queue.queue_id)
        return load(queue)

    def counted_trim(log, queue, topic, *args, **kwargs):
        if topic == b"s":
            trims.append(queue)
        return trim(log, queue, topic, *args, **kwargs)

    monkeypatch.setattr(recovery, "NATIVE_ENDS", native)
    monkeypatch.setattr(BlockQueue, "_load", counted_load)
    monkeypatch.setattr(recovery, "trim_queue_end", counted_trim)
    store = MessageStore.open(path, config())
    monkeypatch.undo()
    try:
        settled = store.stats(topics=False).last_recovery.native_ends
        used = sum(1 for q in range(store.topic("s").queues) if store.queue_range("s", q)[1])
    finally:
        store.close()
    return len(loads), len(trims), settled, used


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_an_open_after_a_sigkill_loads_no_shared_queue_in_python(
    killed_small, killed_large, tmp_path, monkeypatch, native
):
    """The Python calls per queue of the open (loads, trims) do not grow with the
    queues: none at all for a SIGKILLed writer's store, whose queues are all settled
    (loading every queue, as before, makes one of each per queue)."""
    counts = {}
    for name, source, queues in (("small", killed_small, 30), ("large", killed_large, 300)):
        counts[queues] = _counted_open(_copy(source, tmp_path / name), native, monkeypatch)
    for queues, (loads, trims, settled, used) in counts.items():
        assert used > queues * 0.8
        if native:  # every queue with entries settled natively
            assert (loads, trims, settled) == (0, 0, used)
        else:
            assert (loads, trims, settled) == (queues, queues, 0)


def test_queues_whose_minimum_moves_are_not_loaded_either(killed, tmp_path, monkeypatch):
    """With retention behind a third of the queues (their first entries below the log's
    start: their minimums move), the native pass finds them settled too: only the
    queues with a group's position are not loaded either: the clamp of positions past
    the ends finds natively that none is past its queue's end."""
    store = _copy(killed, tmp_path / "store")
    loads, trims, settled, used = _counted_open(store, True, monkeypatch)
    assert (trims, settled, loads) == (0, used, 0)


def _commit_past_ends(path: Path, queues: list[int]) -> None:
    """Group "g" of the SIGKILLed store at ``path`` committed past the ends of
    ``queues`` (as a commit of a record a power loss then took)."""
    offsets = OffsetStore(path / "offsets")
    offsets.commit_many("g", "s", dict.fromkeys(queues, 1_000_000), "test", "past the end")
    offsets.close()


def test_the_clamp_loads_only_the_queues_whose_position_is_past_their_end(
    killed, tmp_path, monkeypatch
):
    """Of a group's positions on a third of the queues, two past their queues' ends:
    the clamp loads those two queues only (before: every queue with a position)."""
    store = _copy(killed, tmp_path / "store")
    _commit_past_ends(store, [3, 7])
    loads, trims, settled, used = _counted_open(store, True, monkeypatch)
    assert (trims, settled, loads) == (0, used, 2)


def test_positions_past_their_ends_are_set_back_and_reported_as_by_the_loads(
    killed, tmp_path, monkeypatch
):
    """A position past its queue's end is set back to the end and reported, the same
    with the native look as when every queue is loaded (``NATIVE_ENDS = False``)."""
    found = {}
    for native in (True, False):
        store = _copy(killed, tmp_path / f"store-{native}")
        _commit_past_ends(store, [3, 7])
        found[native] = _open(store, native, monkeypatch)
        with MessageStore.open(store, config()) as reopened:
            found[native] += ({q: reopened.committed_offset("g", "s", q) for q in range(60)},)
    clamped = found[True][2]["offsets_clamped"]
    assert [(c["queue"], c["committed"]) for c in clamped] == [(3, 1_000_000), (7, 1_000_000)]
    assert all(found[True][1][("s", c["queue"])][1] == c["end"] for c in clamped)
    assert found[True][3][3] == clamped[0]["end"]
    assert found[True] == found[False]


def test_a_position_one_past_its_end_is_told_from_positions_at_their_ends(
    killed, tmp_path, monkeypatch
):
    """Positions at their queues' ends on every queue, and one past the end (inside
    the queue's last block) on two: the clamp loads and sets back those two only."""
    _reads, ranges, _report = _open(_copy(killed, tmp_path / "ends"), False, monkeypatch)
    ends = {queue: end for (topic, queue), (_low, end) in ranges.items() if topic == "s"}
    positions = {queue: end + (queue in (5, 9)) for queue, end in ends.items()}
    stores = [_copy(killed, tmp_path / name) for name in ("counted", "reported")]
    for store in stores:
        offsets = OffsetStore(store / "offsets")
        offsets.commit_many("h", "s", positions, "test", "at or past the end")
        offsets.close()
    loads, _trims, _settled, _used = _counted_open(stores[0], True, monkeypatch)
    assert loads == 2
    _reads, _ranges, report = _open(stores[1], True, monkeypatch)
    clamped = [
        (c["group"], c["queue"], c["committed"], c["end"]) for c in report["offsets_clamped"]
    ]
    assert clamped == [("h", 5, ends[5] + 1, ends[5]), ("h", 9, ends[9] + 1, ends[9])]
