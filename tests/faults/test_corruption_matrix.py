"""Damage in every kind of store file, by every kind of fault (issue 8).

A store with a few segments, two topics, keyed messages, committed offsets and a
checkpoint is closed, one file is damaged, and the store is opened again. Per file kind
the engine either repairs and goes on or refuses with a typed error naming the file:

| file | decision |
| --- | --- |
| commit-log segment | repair: bad records reported and skipped, a garbage tail erased |
| consume-queue file | repair: a damaged entry is reported, its record found in the log |
| shared topic's block file | as a consume-queue file |
| time index | repair: damaged marks only slow ``offset_for_time`` down |
| shared topic's ``blocks/allocated`` | repair: the allocated run is found from the headers |
| key-index file | repair: a damaged file is skipped or removed, and reported |
| checkpoint | repair: a bad slot is ignored (the other one, or a full scan) |
| offsets journal | repair: cut at the first bad frame (offsets may go back, never forward) |
| shared state, recovery.json | repair: rewritten by the first opener |
| store.json, topics.json | refuse: StoreFormatError naming the file (no source to rebuild) |

Faults: a bit flip, truncation, a zeroed 4 KiB page, a garbage tail, and a length (or
count) field far too large. Under ``TIDEMARK_TEST_LAYOUT=shared`` every topic is
shared: queue t/0's entries are damaged in its blocks of t's shared block file, and the
time index (which a shared topic does not keep) gives way to ``blocks/allocated``, the
nearest equivalent (a shared topic's own file beside its entries, rebuilt from them). In
every case the store opens (or refuses as above), what it
found is reported, and every message whose record bytes were not touched is served by
``read()`` and ``get()``.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from storeadapter.engine import (
    Message,
    MessageStore,
    RecoveryReport,
    StoreError,
    StoreFormatError,
)
from storeadapter.engine.blockqueue import BLOCK_HEADER_SIZE, parse_header
from storeadapter.engine.queuebase import ENTRY_SIZE, pack_entry
from tests.engine.storetools import (
    read_everything,
    segment_paths,
    shared_layout_run,
    small_config,
)
from tests.faults.modulework import ModuleWork

work = ModuleWork("corruption-matrix")
module_work = work.fixture()

SEGMENT_BYTES = 16384
PAGE = 4096
FAULTS = ("bit-flip", "truncation", "zeroed-page", "garbage-tail", "huge-length")
#: The kinds of file damaged, in the layout the tests run under: a shared topic keeps no
#: time index, so under the shared layout ``blockends`` (that topic's published
#: allocation end) stands in its place; topic s is shared in both layouts.
KINDS = (
    "commitlog",
    "consumequeue",
    "blockqueue",
    *(("blockends",) if shared_layout_run() else ("timeindex", "blockends")),
    "keyindex",
    "checkpoint",
    "offsets-journal",
    "state",
    "recovery-json",
    "store-json",
    "topics-json",
)
REFUSED = {"store-json", "topics-json"}


BLOCK_ENTRIES = 8


def matrix_config():
    return small_config(
        segment_bytes=SEGMENT_BYTES,
        queue_file_entries=64,
        flush_interval_ms=600_000,  # no background flush: the checkpoint slots are known
        shared_block_entries=BLOCK_ENTRIES,  # small block files for the shared topic
        shared_blocks_per_file=16,
    )


@dataclass(frozen=True)
class Sent:
    message_id: str
    topic: str
    queue: int
    queue_offset: int
    commit_offset: int
    length: int
    body: bytes
    key: str


@dataclass(frozen=True)
class Template:
    path: Path
    sent: tuple[Sent, ...]
    offsets: dict
    tail: int


@work.cached
def template() -> Template:
    """The undamaged store, made once and copied for every case."""
    directory = work.directory("template")
    path = directory / "store"
    rng = random.Random(8)
    sent = []
    offsets = {}
    with MessageStore.open(path, matrix_config()) as store:
        store.create_topic("t", queues=2)
        store.create_topic("u", queues=1)
        store.create_topic("s", queues=3, layout="shared")
        for round_number in range(72):
            topic = ("u", "t", "t", "s")[round_number % 4]
            messages = [
                Message(rng.randbytes(rng.randint(40, 400)), key=f"k{rng.randrange(6)}")
                for _ in range(rng.randint(1, 6))
            ]
            for result, message in zip(store.append_batch(topic, messages), messages, strict=True):
                sent.append(
                    Sent(
                        result.message_id,
                        topic,
                        result.queue,
                        result.queue_offset,
                        result.commit_offset,
                        0,
                        message.body,
                        message.key,
                    )
                )
            for queue in range({"t": 2, "u": 1, "s": 3}[topic]):
                high = store.queue_range(topic, queue)[1]
                store.commit_offset("g", topic, queue, high)
                offsets[("g", topic, queue)] = high
        tail = store.stats().commit_log.tail
    ordered = sorted(sent, key=lambda s: s.commit_offset)
    ends = [s.commit_offset for s in ordered[1:]] + [tail]
    with_lengths = tuple(
        replace(s, length=end - s.commit_offset) for s, end in zip(ordered, ends, strict=True)
    )
    assert len(segment_paths(path)) >= 3
    return Template(path, with_lengths, offsets, tail)


# ------------------------------------------------------------------------ damage


def _flip(path: Path, at: int, bit: int = 2) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1 << bit
    path.write_bytes(data)


def _overwrite(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(data)


def _zero_page(path: Path, at: int) -> tuple[int, int]:
    start = at - at % PAGE
    end = min(start + PAGE, path.stat().st_size)
    _overwrite(path, start, bytes(end - start))
    return start, end


def _garbage(size: int) -> bytes:
    return random.Random(size).randbytes(size)


@dataclass
class Damage:
    """What was done: the file, and the commit-log range whose records it touched."""

    file: Path
    touched: tuple[int, int] | None = None


def damage_commitlog(store: Path, fault: str, info: Template) -> Damage:
    segments = segment_paths(store)
    first = segments[0]
    victim = next(s for s in info.sent if s.commit_offset > 2 * PAGE // 3)
    if fault == "bit-flip":
        _flip(first, victim.commit_offset + victim.length - 20)
        return Damage(first, (victim.commit_offset, victim.commit_offset + 1))
    if fault == "truncation":
        last = segments[-1]
        base = int(last.name)
        cut = (info.tail - base) // 2
        with open(last, "r+b") as handle:
            handle.truncate(cut)
        return Damage(last, (base + cut, info.tail))
    if fault == "zeroed-page":
        return Damage(first, _zero_page(first, PAGE))
    if fault == "garbage-tail":
        last = segments[-1]
        _overwrite(last, info.tail - int(last.name), _garbage(300))
        return Damage(last)
    _overwrite(first, victim.commit_offset, struct.pack("<I", 0x7FFFFFF0))
    return Damage(first, (victim.commit_offset, victim.commit_offset + 1))


def _queue_file(store: Path) -> Path:
    return store / "consumequeue" / "t" / "0" / "00000000000000000000"


def _entry_at(store: Path, index: int) -> tuple[Path, int]:
    """The file holding entry ``index`` of queue t/0, and where in it: its queue file,
    or (t shared) its block of t's shared block files."""
    blocks = store / "consumequeue" / "t" / "blocks"
    if not blocks.is_dir():
        return _queue_file(store), index * ENTRY_SIZE
    seq, slot = divmod(index, BLOCK_ENTRIES)
    block_bytes = BLOCK_HEADER_SIZE + BLOCK_ENTRIES * ENTRY_SIZE
    for path in sorted(p for p in blocks.iterdir() if p.name.isdigit()):
        data = path.read_bytes()
        for at in range(0, len(data), block_bytes):
            if parse_header(data[at : at + BLOCK_HEADER_SIZE]) == (0, seq):
                return path, at + BLOCK_HEADER_SIZE + slot * ENTRY_SIZE
    raise AssertionError(f"no block of t/0 holds entry {index}")


def damage_consumequeue(store: Path, fault: str, info: Template) -> Damage:
    """Queue t/0's entries, wherever the layout keeps them (the same entries hit)."""
    path, at = _entry_at(store, 0)
    if fault == "bit-flip":
        path, at = _entry_at(store, 5)
        _flip(path, at + 1)
    elif fault == "truncation":
        path, at = _entry_at(store, 10)
        with open(path, "r+b") as handle:
            handle.truncate(at + 7)
    elif fault == "zeroed-page":
        _zero_page(path, at)
    elif fault == "garbage-tail":
        count = sum(1 for s in info.sent if (s.topic, s.queue) == ("t", 0))
        path, at = _entry_at(store, count - 1)
        at += ENTRY_SIZE
        # In a block file: the rest of the queue's last block, not the next block.
        room = 200 if path == _queue_file(store) else ENTRY_SIZE * (-count % BLOCK_ENTRIES)
        _overwrite(path, at, _garbage(room))
    else:
        path, at = _entry_at(store, 5)
        _overwrite(path, at + 8, struct.pack("<I", 0x7FFFFFF0))
    return Damage(path)


def _block_file(store: Path) -> Path:
    return sorted((store / "consumequeue" / "s" / "blocks").iterdir())[0]


def damage_blockqueue(store: Path, fault: str, info: Template) -> Damage:
    path = _block_file(store)
    block = 16 + 8 * 20  # header, then 8 entries
    if fault == "bit-flip":
        _flip(path, block + 16 + 2 * 20 + 1)  # block 1, entry 2's commit offset
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(block * 3 + 50)
    elif fault == "zeroed-page":
        _zero_page(path, 0)
    elif fault == "garbage-tail":
        _overwrite(path, path.stat().st_size, _garbage(200))
    else:
        _overwrite(path, block + 16 + 2 * 20 + 8, struct.pack("<I", 0x7FFFFFF0))
    return Damage(path)


def damage_timeindex(store: Path, fault: str, info: Template) -> Damage:
    path = store / "consumequeue" / "t" / "0" / "timeindex"
    if not path.exists():
        path.write_bytes(b"")
    if fault == "bit-flip":
        _flip(path, 0)
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(3)
    elif fault == "zeroed-page":
        _zero_page(path, 0)
    elif fault == "garbage-tail":
        _overwrite(path, path.stat().st_size, _garbage(100))
    else:
        _overwrite(path, 0, struct.pack("<Q", 0x7FFFFFFFFFFFFFF0))
    return Damage(path)


def damage_blockends(store: Path, fault: str, info: Template) -> Damage:
    path = store / "consumequeue" / "s" / "blocks" / "allocated"
    if fault == "bit-flip":
        _flip(path, 0)
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(3)
    elif fault == "zeroed-page":
        _zero_page(path, 0)
    elif fault == "garbage-tail":
        _overwrite(path, path.stat().st_size, _garbage(100))
    else:  # both slots' allocation ends
        _overwrite(path, 8, struct.pack("<Q", 1 << 60))
        _overwrite(path, 28 + 8, struct.pack("<Q", 1 << 60))
    return Damage(path)


def _index_file(store: Path) -> Path:
    return sorted(p for p in (store / "index").iterdir() if p.name.isdigit())[-1]


def damage_keyindex(store: Path, fault: str, info: Template) -> Damage:
    path = _index_file(store)
    if fault == "bit-flip":
        _flip(
            path, 64 + 8 * 64 + 24 * 3 + 5
        )  # entry 4's commit offset (8-byte slots, 24-byte entries)
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
    elif fault == "zeroed-page":
        _zero_page(path, 0)
    elif fault == "garbage-tail":
        _overwrite(path, path.stat().st_size, _garbage(200))
    else:
        _overwrite(path, 48, struct.pack("<I", 0x7FFFFFF0))  # count
    return Damage(path)


def damage_checkpoint(store: Path, fault: str, info: Template) -> Damage:
    path = store / "checkpoint"
    if fault == "bit-flip":  # in the newer slot: the older one is still there
        slots = path.read_bytes()
        newer = max((0, 64), key=lambda at: int.from_bytes(slots[at + 8 : at + 16], "little"))
        _flip(path, newer + 20)
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(10)
    elif fault == "zeroed-page":
        _zero_page(path, 0)
    elif fault == "garbage-tail":
        _overwrite(path, path.stat().st_size, _garbage(100))
    else:
        _overwrite(path, 16, struct.pack("<QQ", 1 << 60, 1 << 60))  # both slots' offsets
        _overwrite(path, 64 + 16, struct.pack("<QQ", 1 << 60, 1 << 60))
    return Damage(path)


def _journal(store: Path) -> Path:
    return sorted((store / "offsets").glob("journal-*"))[-1]


def damage_offsets_journal(store: Path, fault: str, info: Template) -> Damage:
    path = _journal(store)
    size = path.stat().st_size
    if fault == "bit-flip":
        _flip(path, size // 2)
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(size // 2)
    elif fault == "zeroed-page":
        _zero_page(path, size // 2)
    elif fault == "garbage-tail":
        _overwrite(path, size, _garbage(100))
    else:
        _overwrite(path, size // 2, struct.pack("<I", 0x7FFFFFF0))
    return Damage(path)


def _damage_small_file(path: Path, fault: str, huge: tuple[int, bytes]) -> Damage:
    if fault == "bit-flip":
        _flip(path, 0, bit=3)
    elif fault == "truncation":
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
    elif fault == "zeroed-page":
        _zero_page(path, 0)
    elif fault == "garbage-tail":
        _overwrite(path, path.stat().st_size, _garbage(100))
    else:
        _overwrite(path, *huge)
    return Damage(path)


def damage_state(store: Path, fault: str, info: Template) -> Damage:
    return _damage_small_file(store / "state", fault, (16, struct.pack("<Q", 1 << 60)))


def damage_recovery_json(store: Path, fault: str, info: Template) -> Damage:
    path = store / "recovery.json"
    huge = json.dumps({"tail": 1 << 60, "corruptions": [{"length": 1 << 60}]}).encode()
    return _damage_small_file(path, fault, (0, huge))


def _json_field(path: Path, field: str, value: int) -> tuple[int, bytes]:
    data = json.loads(path.read_bytes())
    if "topics" in data:
        data["topics"][0][field] = value
    else:
        data[field] = value
    path.write_bytes(b"")
    return 0, json.dumps(data).encode()


def damage_store_json(store: Path, fault: str, info: Template) -> Damage:
    path = store / "store.json"
    huge = _json_field(path, "queue_file_entries", 1 << 60) if fault == "huge-length" else None
    return _damage_small_file(path, fault, huge)


def damage_topics_json(store: Path, fault: str, info: Template) -> Damage:
    path = store / "topics.json"
    huge = _json_field(path, "queues", 1 << 40) if fault == "huge-length" else None
    return _damage_small_file(path, fault, huge)


DAMAGE = {
    "commitlog": damage_commitlog,
    "consumequeue": damage_consumequeue,
    "blockqueue": damage_blockqueue,
    "timeindex": damage_timeindex,
    "blockends": damage_blockends,
    "keyindex": damage_keyindex,
    "checkpoint": damage_checkpoint,
    "offsets-journal": damage_offsets_journal,
    "state": damage_state,
    "recovery-json": damage_recovery_json,
    "store-json": damage_store_json,
    "topics-json": damage_topics_json,
}


# ---------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    error: StoreError | None
    damage: Damage
    recovery: RecoveryReport | None = None
    corruptions: list | None = None
    index_problems: list | None = None
    offsets_dropped_bytes: int | None = None
    checkpoint_problems: list | None = None
    not_read: list | None = None  # intact messages read() did not serve
    not_got: list | None = None  # intact messages get() did not serve
    not_found_by_key: list | None = None  # intact messages query_by_key() did not find
    offsets: dict | None = None
    appended: object = None
    placed: dict | None = None  # what read() served, per queue


def intact(info: Template, damage: Damage) -> list[Sent]:
    if damage.touched is None:
        return list(info.sent)
    low, high = damage.touched
    return [s for s in info.sent if s.commit_offset + s.length <= low or s.commit_offset >= high]


@work.cached
def outcome(kind: str, fault: str) -> Outcome:
    info = template()
    path = work.directory(f"{kind}-{fault}") / "store"
    shutil.copytree(info.path, path)
    damage = DAMAGE[kind](path, fault, info)
    try:
        store = MessageStore.open(path, matrix_config())
    except StoreError as error:
        return Outcome(error, damage)
    with store:
        everything = read_everything(store)
        read_ids = {m.message_id: m.body for messages in everything.values() for m in messages}
        not_read = [s for s in intact(info, damage) if read_ids.get(s.message_id) != s.body]
        not_got = []
        for sent in intact(info, damage):
            try:
                if store.get(sent.message_id).body != sent.body:
                    not_got.append(sent)
            except StoreError:
                not_got.append(sent)
        not_found_by_key = [
            s
            for s in intact(info, damage)
            if s.message_id
            not in {m.message_id for m in store.query_by_key(s.topic, s.key, limit=1000)}
        ]
        stats = store.stats()
        offsets = {key: store.committed_offset(*key) for key in info.offsets}
        appended = {
            (topic, 0): store.append(topic, b"after the damage", queue=0).queue_offset
            for topic in ("t", "s")
        }
        return Outcome(
            None,
            damage,
            stats.last_recovery,
            stats.corruptions,
            stats.index_problems,
            stats.offsets_dropped_bytes,
            stats.checkpoint_problems,
            not_read,
            not_got,
            not_found_by_key,
            offsets,
            appended,
            everything,
        )


# ------------------------------------------------------------------------- tests

CASES = [(kind, fault) for kind in KINDS for fault in FAULTS]


def _cases(kinds=KINDS, leave_out=()) -> list:
    params = []
    for kind, fault in CASES:
        if kind not in kinds or (kind, fault) in leave_out:
            continue
        params.append(pytest.param(kind, fault, id=f"{kind}-{fault}"))
    return params


OPENED_KINDS = tuple(k for k in KINDS if k not in REFUSED)


@pytest.mark.parametrize(("kind", "fault"), _cases())
def test_damaged_store_opens_or_refuses_with_a_typed_error_naming_the_file(kind, fault):
    result = outcome(kind, fault)

    if kind in REFUSED:
        assert isinstance(result.error, StoreFormatError)
        assert result.damage.file.name in str(result.error)
    else:
        assert result.error is None


@pytest.mark.parametrize(("kind", "fault"), _cases(OPENED_KINDS))
def test_every_intact_message_is_served_by_read_after_damage(kind, fault):
    assert outcome(kind, fault).not_read == []


@pytest.mark.parametrize(("kind", "fault"), _cases(OPENED_KINDS))
def test_every_intact_message_is_served_by_get_after_damage(kind, fault):
    assert outcome(kind, fault).not_got == []


@pytest.mark.parametrize(
    ("kind", "fault"), _cases(OPENED_KINDS, leave_out={("keyindex", "bit-flip")})
)
def test_every_intact_message_is_found_by_key_after_damage(kind, fault):
    """(A flipped bit inside a key-index entry is undetectable: it has no CRC, and at
    worst loses that one candidate, so that case is left out.)"""
    assert outcome(kind, fault).not_found_by_key == []


def _log_report(result: Outcome) -> set[int]:
    found = {c.commit_offset for c in result.recovery.corruptions + result.corruptions}
    if result.recovery.truncated_at is not None:
        found.add(result.recovery.truncated_at)
    return found


def _reported(kind: str, fault: str, result: Outcome) -> bool:
    """Whether the engine said what it found, where it can tell."""
    if kind == "commitlog":
        if fault == "garbage-tail":
            return result.recovery.truncated_at == template().tail
        low, high = result.damage.touched
        return any(low <= offset < high or offset == low for offset in _log_report(result)) or (
            fault == "zeroed-page" and any(low <= o <= high for o in _log_report(result))
        )
    if kind in ("consumequeue", "blockqueue"):
        return fault == "garbage-tail" or bool(result.corruptions)  # past the end: a leftover
    if kind == "keyindex":  # a flipped entry fails its CRC when a lookup crosses it
        return bool(result.index_problems) or (fault == "bit-flip" and bool(result.corruptions))
    if kind == "checkpoint":  # recovery starts from the older slot, or scans the whole log
        started = result.recovery.started_at
        if fault == "bit-flip":
            began = started < template().tail
        else:
            began = started == (template().tail if fault == "garbage-tail" else 0)
        return began and bool(result.checkpoint_problems)
    if kind == "offsets-journal":
        return result.offsets_dropped_bytes > 0
    return True  # time index, allocation end, state, recovery.json: rebuilt, nothing lost


@pytest.mark.parametrize(("kind", "fault"), _cases(OPENED_KINDS))
def test_damage_is_reported(kind, fault):
    result = outcome(kind, fault)
    assert _reported(kind, fault, result), result


@pytest.mark.parametrize(("kind", "fault"), _cases(OPENED_KINDS))
def test_committed_offsets_survive_damage_or_go_back_only_when_the_journal_is_hit(kind, fault):
    result = outcome(kind, fault)
    for key, committed in template().offsets.items():
        if kind == "offsets-journal":
            assert 0 <= result.offsets[key] <= committed
        else:
            assert result.offsets[key] == committed


@pytest.mark.parametrize(("kind", "fault"), _cases(OPENED_KINDS))
def test_appends_after_damage_never_reuse_a_queue_offset(kind, fault):
    result = outcome(kind, fault)
    for key, queue_offset in result.appended.items():
        kept = intact(template(), result.damage)
        assert queue_offset == max(s.queue_offset for s in kept if (s.topic, s.queue) == key) + 1


@pytest.mark.parametrize(("kind", "fault"), _cases(OPENED_KINDS))
def test_read_never_serves_a_message_under_another_entry_after_damage(kind, fault):
    for (topic, queue), messages in outcome(kind, fault).placed.items():
        assert {(m.topic, m.queue) for m in messages} <= {(topic, queue)}
        offsets = [m.queue_offset for m in messages]
        assert offsets == sorted(set(offsets))


def test_an_entry_pointing_at_another_intact_record_is_reported_and_the_right_one_served(
    tmp_path,
):
    """A damaged entry may still point at a valid record (of another entry): read()
    checks the record's topic, queue and queue offset, not only its frame."""
    info = template()
    path = tmp_path / "store"
    shutil.copytree(info.path, path)
    fifth, at_fifth = _entry_at(path, 5)
    sixth, at_sixth = _entry_at(path, 6)
    entry = sixth.read_bytes()[at_sixth : at_sixth + ENTRY_SIZE]
    _overwrite(fifth, at_fifth, entry)  # entry 5 := entry 6
    expected = [s for s in info.sent if (s.topic, s.queue) == ("t", 0)]

    with MessageStore.open(path, matrix_config()) as store:
        served = store.read("t", 0, 0, max_messages=1000)
        reported = [c.commit_offset for c in store.stats().corruptions]

    assert [(m.queue_offset, m.body) for m in served] == [
        (s.queue_offset, s.body) for s in sorted(expected, key=lambda s: s.queue_offset)
    ]
    assert reported == [int.from_bytes(entry[:8], "little")]


@pytest.mark.parametrize("damage", ["bit-flip", "bit-flip-past-the-tail", "another-queues-record"])
def test_a_damaged_last_entry_is_reported_its_message_served_and_its_offset_kept(tmp_path, damage):
    """The last entry of a queue damaged (a bit of its commit offset flipped, below or
    past the tail, or made a checked entry of another queue's record): the store must
    not take it for a dead writer's leftover and hand its queue offset out again. Its
    message is served, the damage reported, and the next append follows it."""
    info = template()
    path = tmp_path / "store"
    shutil.copytree(info.path, path)
    expected = sorted(
        (s for s in info.sent if (s.topic, s.queue) == ("t", 0)), key=lambda s: s.queue_offset
    )
    other = next(s for s in info.sent if (s.topic, s.queue) == ("t", 1))
    last, at = _entry_at(path, len(expected) - 1)
    if damage == "bit-flip":
        _flip(last, at + 1)
    elif damage == "bit-flip-past-the-tail":
        _flip(last, at + 5)  # the commit offset's bit 42
    else:
        _overwrite(last, at, pack_entry(other.commit_offset, other.length, 0))

    with MessageStore.open(path, matrix_config()) as store:
        served = store.read("t", 0, 0, max_messages=1000)
        appended = store.append("t", b"after the damage", queue=0).queue_offset
        reported = store.stats().corruptions

    assert [(m.queue_offset, m.body) for m in served] == [
        (s.queue_offset, s.body) for s in expected
    ]
    assert appended == len(expected)
    assert reported
