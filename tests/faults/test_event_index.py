"""The event index under faults: a writer killed between its log write and its index
write (and inside the index write), a crash that lost the index, power loss during
event appends, and damage that the checker (``checks.check_event_index``) must find.

After each fault the store must hold every acknowledged append whole, each stream at
versions 1..N with no gap and no half group, every acknowledged command refused again
with the version it produced, and an index the checker finds nothing wrong with.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import DuplicateCommandError, MessageStore
from storeadapter.engine.checks import check_event_index
from storeadapter.engine.eventindex import (
    COUNT_AT,
    ENTRY_SIZE,
    HEADER_SIZE,
    SLOT_SIZE,
    EventIndex,
    counter_bytes,
    encode_entry,
    stream_hash,
)
from tests.faults.faultharness import fault_config, start_holder
from tests.faults.faultyfs import FaultyFS, skip_syncs
from tests.faults.forkserver import ForkServer
from tests.faults.modulework import ModuleWork
from tests.faults.soak import rounds
from tests.faults.streamharness import (
    STREAMS,
    TOPIC,
    append_events_some,
    check_index_clean,
    check_streams,
    create_stream_store,
    read_stream_acks,
)

work = ModuleWork("event-power-loss")
module_work = work.fixture()

ENGINE = "storeadapter.engine"
HARNESS = "tests.faults.streamharness"

KILLS = {
    "before-the-index-write": {"target": f"{ENGINE}.eventindex:EventIndex.put_runs", "nth": 3},
    "after-the-index-write": {
        "target": f"{ENGINE}.eventindex:EventIndex.put_runs",
        "when": "after",
        "nth": 3,
    },
    "between-index-entries-and-slots": {
        "target": f"{ENGINE}.fileio:pwrite_all",
        "caller": "EventIndex.put_runs",
        "when": "after",
        "nth": 4,
    },
    "between-index-slots-and-count": {
        "target": f"{ENGINE}.fileio:pwrite_all",
        "caller": "EventIndex.put_runs",
        "when": "after",
        "nth": 5,
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _kill_a_writer(server: ForkServer, tmp_path: Path, path: Path, kill: dict) -> None:
    outcome = server.run(
        f"{HARNESS}:write_events_until_killed",
        tmp_path / "killed.stderr",
        path=str(path),
        mode="sync",
        acks=str(tmp_path / "acks.txt"),
        seed=1,
        kill=kill,
        limit=200,
        before=8,
    )
    assert outcome.killed, outcome


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "beside-a-member"])
@pytest.mark.parametrize("kill", list(KILLS.values()), ids=list(KILLS))
def test_a_writer_killed_around_its_index_write_leaves_every_stream_whole(
    server, tmp_path, kill, beside
):
    """Alone, the next opener recovers (cuts the index at the checkpoint, indexes the log
    again); beside a member that keeps the store open, the next writer clears what the
    dead one left past the published tail, index entries included."""
    path = tmp_path / "store"
    create_stream_store(path)
    holder = start_holder(server, tmp_path, path, "sync") if beside else None
    _kill_a_writer(server, tmp_path, path, kill)

    outcome = server.run(
        f"{HARNESS}:append_events_and_close",
        tmp_path / "next.stderr",
        path=str(path),
        mode="sync",
        acks=str(tmp_path / "acks.txt"),
        seed=2,
        count=12,
    )
    assert outcome.exit_code == 0, outcome
    if holder is not None:
        holder.kill()
        assert holder.wait().killed

    with MessageStore.open(path, fault_config("sync")) as store:
        check_streams(store, read_stream_acks(tmp_path / "acks.txt"))
    check_index_clean(path)


def test_a_crash_that_lost_the_index_refuses_every_acknowledged_command_again(server, tmp_path):
    path = tmp_path / "store"
    create_stream_store(path)
    _kill_a_writer(server, tmp_path, path, KILLS["after-the-index-write"])
    (path / "consumequeue" / TOPIC / "events").unlink()

    with MessageStore.open(path, fault_config("sync")) as store:
        (report,) = store.last_recovery.event_indexes
        assert report["rebuilt"] == "it was missing"
        check_streams(store, read_stream_acks(tmp_path / "acks.txt"))
    check_index_clean(path)


def test_a_recovery_killed_while_it_rebuilds_the_index_ends_the_same_next_time(server, tmp_path):
    path = tmp_path / "store"
    create_stream_store(path)
    _kill_a_writer(server, tmp_path, path, KILLS["before-the-index-write"])
    (path / "consumequeue" / TOPIC / "events").unlink()
    outcome = server.run(
        "tests.faults.faultharness:open_until_killed",
        tmp_path / "recovery.stderr",
        path=str(path),
        mode="sync",
        kill={"target": f"{ENGINE}.eventindex:EventIndex.put", "when": "after"},
    )
    assert outcome.killed, outcome

    with MessageStore.open(path, fault_config("sync")) as store:
        check_streams(store, read_stream_acks(tmp_path / "acks.txt"))
    check_index_clean(path)


# ------------------------------------------------------------------------ power loss

OPERATIONS = 60
MID_OPERATION_EVERY = 7
VARIANTS = ("durable", "torn", "pages")
# Each variant opens every IMAGE_STRIDE-th image (make test: every image once, by the
# three variants in turn); make soak opens every image in each variant.
IMAGE_STRIDE = rounds(len(VARIANTS), 1)


class _Acks:
    def __init__(self) -> None:
        self.lines: list[tuple[str, int, int, str]] = []


@work.cached
def _power_loss_run(seed: int) -> tuple[list, Path]:
    """Event appends under FaultyFS (sync mode), with an image captured after every
    append and at every few file-system calls inside them."""
    directory = work.directory(f"seed{seed}")
    path = directory / "store"
    create_stream_store(path)
    rng = random.Random(seed)
    acks = _Acks()
    images = []
    calls = 0
    read, write = _pipe_to(acks)

    def mid_operation(op: str) -> None:
        nonlocal calls
        calls += 1
        if calls % MID_OPERATION_EVERY == 0:
            images.append(fs.capture(f"call {calls} ({op})", list(acks.lines)))

    with FaultyFS(path) as fs:
        fs.adopt()
        store = MessageStore.open(path, fault_config("sync", flush_interval_ms=600_000))
        fs.on_op = mid_operation
        try:
            for step in range(OPERATIONS):
                append_events_some(store, rng, f"p{seed}", write)
                read()
                images.append(fs.capture(f"after operation {step}", list(acks.lines)))
        finally:
            fs.on_op = None
            store.close()
    return images, directory


def _pipe_to(acks: _Acks):
    """A file descriptor the harness writes acknowledgements to, and a reader of them."""
    read_fd, write_fd = os.pipe()

    def read() -> None:
        data = b""
        while not data.endswith(b"\n"):
            data += os.read(read_fd, 65536)
        for line in data.decode().splitlines():
            stream, first, last, command = line.split()
            acks.lines.append((stream, int(first), int(last), command))

    return read, write_fd


@pytest.mark.parametrize("variant", VARIANTS)
def test_power_loss_during_event_appends_keeps_every_acknowledged_append_whole(variant):
    images, directory = _power_loss_run(1)
    rng = random.Random(VARIANTS.index(variant))
    failures = []
    for number, image in enumerate(images):
        if number % IMAGE_STRIDE != VARIANTS.index(variant) % IMAGE_STRIDE:
            continue
        path = directory / f"{variant}-{number}"
        image.materialize(
            path,
            torn=rng if variant == "torn" else None,
            pages=rng if variant == "pages" else None,
        )
        try:
            with skip_syncs(), MessageStore.open(path, fault_config("sync")) as store:
                check_streams(store, image.meta)
            problems = check_event_index(path)
            assert problems == [], problems
        except AssertionError as error:
            failures.append(f"{image.label}: {error}")
        shutil.rmtree(path)
    assert failures == []


# ------------------------------------------------------------ damage the checker finds


@pytest.fixture
def healthy(tmp_path) -> Path:
    """A closed store whose event index is whole: 5 streams, groups, commands."""
    path = tmp_path / "store"
    create_stream_store(path, "async")
    rng = random.Random(7)
    with MessageStore.open(path, fault_config("async")) as store:
        import os

        fd = os.open(tmp_path / "acks.txt", os.O_WRONLY | os.O_CREAT, 0o644)
        for _ in range(40):
            append_events_some(store, rng, "h", fd)
        os.close(fd)
    assert check_event_index(path) == []
    return path


def _index(path: Path) -> Path:
    return path / "consumequeue" / TOPIC / "events"


def _rewrite_entry(path: Path, number: int, **changes: int) -> None:
    """Give entry ``number`` other fields, with a valid CRC (damage a CRC cannot see)."""
    index = EventIndex.open(_index(path))
    try:
        entry = index.entry(number)._replace(**changes)
        with open(_index(path), "r+b") as handle:
            handle.seek(index.entries_at + (number - 1) * ENTRY_SIZE)
            handle.write(encode_entry(entry))
    finally:
        index.close()


def _reasons(path: Path) -> list[str]:
    return [problem["reason"] for problem in check_event_index(path)]


def test_the_checker_finds_a_flipped_bit_in_an_entry(healthy):
    index = EventIndex.open(_index(healthy))
    at = index.entries_at + 5 * ENTRY_SIZE + 10
    index.close()
    with open(_index(healthy), "r+b") as handle:
        handle.seek(at)
        byte = handle.read(1)[0]
        handle.seek(at)
        handle.write(bytes([byte ^ 0x10]))

    problems = check_event_index(healthy)

    assert any(p["entry"] == 6 and "CRC32C" in p["reason"] for p in problems), problems


def test_the_checker_finds_a_slot_that_lost_its_newest_entry(healthy):
    index = EventIndex.open(_index(healthy))
    table = index.slot_table()
    slot = next(i for i, held in enumerate(table) if held)
    index.close()
    with open(_index(healthy), "r+b") as handle:
        handle.seek(HEADER_SIZE + SLOT_SIZE * slot)
        handle.write(bytes(SLOT_SIZE))  # an empty slot, which passes its check

    assert any(f"stream slot {slot} holds entry 0" in r for r in _reasons(healthy))


def test_the_checker_finds_a_link_to_the_wrong_version(healthy):
    index = EventIndex.open(_index(healthy))
    entry = next(e for e in index.entries(1, index.count) if e is not None and e.version >= 3)
    index.close()

    _rewrite_entry(healthy, entry.number, version=entry.version + 1)

    reasons = _reasons(healthy)
    assert any("previous entry" in r or "jump entry" in r for r in reasons), reasons
    assert any("does not match its event" in r for r in reasons), reasons


def test_the_checker_finds_events_the_index_lost(healthy):
    index = EventIndex.open(_index(healthy))
    count = index.count
    index.close()
    with open(_index(healthy), "r+b") as handle:
        handle.seek(COUNT_AT)
        handle.write(counter_bytes(1, count - 3))  # with its check: damage it cannot see

    reasons = _reasons(healthy)

    assert sum("has no entry" in r for r in reasons) == 3, reasons


def test_the_checker_finds_an_entry_pointing_at_no_event(healthy):
    index = EventIndex.open(_index(healthy))
    entry = index.entry(4)
    index.close()

    _rewrite_entry(healthy, 4, commit_offset=entry.commit_offset + 1)

    assert any("no event of the topic starts there" in r for r in _reasons(healthy))


def test_the_checker_finds_an_unusable_header_and_a_missing_file(healthy):
    with open(_index(healthy), "r+b") as handle:
        handle.write(b"XXXX")
    assert any("unusable header" in r for r in _reasons(healthy))

    _index(healthy).unlink()
    assert _reasons(healthy) == ["the event index is missing"]


def _zero_an_entry_inside_a_chain(
    path: Path, newest_of_its_stream: bool = False
) -> tuple[str, int]:
    """Zero the entry before some stream's newest, or a stream's newest entry (not the
    file's last: below the checkpoint, where lookups walk); return its stream and
    version."""
    index = EventIndex.open(_index(path))
    newest = {}
    for entry in index.entries(1, index.count):
        newest[entry.stream_hash] = entry
    if newest_of_its_stream:
        victim = min(newest.values(), key=lambda e: e.number)
    else:
        victim = index.entry(min(e.previous for e in newest.values() if e.previous))
    at = index.entries_at + (victim.number - 1) * ENTRY_SIZE
    index.close()
    with open(_index(path), "r+b") as handle:
        handle.seek(at)
        handle.write(bytes(ENTRY_SIZE))
    stream = next(s for s in STREAMS if stream_hash(s) == victim.stream_hash)
    return stream, victim.version


def test_a_read_crossing_a_damaged_index_entry_repairs_the_index_and_answers(healthy):
    """Damage below the checkpoint is not looked for on open (that would read every
    entry): the first lookup crossing it indexes the events again from the last intact
    entry's record, reports it, and answers as if nothing happened."""
    acks = read_stream_acks(healthy.parent / "acks.txt")
    _zero_an_entry_inside_a_chain(healthy)

    with MessageStore.open(healthy, fault_config("async")) as store:
        versions = {stream: store.stream_version(TOPIC, stream) for stream in STREAMS}
        check_streams(store, acks)
        reported = store.stats().corruptions

    assert sum(versions.values()) == sum(last - first + 1 for _s, first, last, _c in acks)
    assert any("event index" in c.reason for c in reported), reported
    assert check_event_index(healthy) == []


def test_an_append_crossing_a_damaged_index_entry_repairs_the_index_first(healthy):
    acks = read_stream_acks(healthy.parent / "acks.txt")
    stream, version = _zero_an_entry_inside_a_chain(healthy, newest_of_its_stream=True)
    command = next(c for s, first, last, c in acks if s == stream and first <= version <= last)
    at = max(ack[2] for ack in acks if ack[0] == stream)

    with MessageStore.open(healthy, fault_config("async")) as store:
        with pytest.raises(DuplicateCommandError):
            store.append_event(TOPIC, stream, b"again", command_id=command)
        results = store.append_events(TOPIC, stream, [b"next"], expected_version=at)
        reported = store.stats().corruptions

    assert results[0].version == at + 1
    assert any("event index" in c.reason for c in reported), reported
    assert check_event_index(healthy) == []


@pytest.mark.parametrize("damaged", [1, 2], ids=["its-last-entry", "its-last-two-entries"])
def test_a_crash_recovery_cutting_inside_a_multi_event_append_loses_no_command(healthy, damaged):
    """The newest entries fail their check and are those of an append of three events:
    recovery's cut (after the last intact entry) would land inside that append, whose
    members before its last are linked into no slot."""
    acks_path = healthy.parent / "acks.txt"
    with MessageStore.open(healthy, fault_config("async")) as store:
        stream = STREAMS[0]
        version = store.stream_version(TOPIC, stream)
        results = store.append_events(
            TOPIC, stream, [f"{stream}:{version + i}:group;".encode() for i in (1, 2, 3)],
            expected_version=version, command_id="group",
        )  # fmt: skip
    with open(acks_path, "a") as acks:
        acks.write(f"{stream} {results[0].version} {results[-1].version} group\n")
    index = EventIndex.open(_index(healthy))
    count, entries_at = index.count, index.entries_at
    index.close()
    with open(_index(healthy), "r+b") as handle:
        for number in range(count - damaged + 1, count + 1):
            at = entries_at + (number - 1) * ENTRY_SIZE + 3
            handle.seek(at)
            byte = handle.read(1)[0]
            handle.seek(at)
            handle.write(bytes([byte ^ 0x10]))
    (healthy / "abort").touch()  # as after a crash: recovery looks at the index
    acks = read_stream_acks(acks_path)

    with MessageStore.open(healthy, fault_config("async", stream_cache_streams=1)) as store:
        check_streams(store, acks)
        for name in STREAMS:
            at = max((last for s, _first, last, _c in acks if s == name), default=0)
            (result,) = store.append_events(TOPIC, name, [b"next"], expected_version=at)
            assert result.version == at + 1

    assert check_event_index(healthy) == []
