"""Shared pieces of the event-stream fault tests: a writer of events that records what
was acknowledged, and the check of a store against those acknowledgements."""

from __future__ import annotations

import os
import random
from pathlib import Path

from storeadapter.engine import (
    DuplicateCommandError,
    MessageStore,
    WrongExpectedVersionError,
)
from storeadapter.engine.checks import check_event_index
from tests.faults.faultharness import arm_kill, fault_config

TOPIC = "accounts"
STREAMS = [f"s-{n}" for n in range(5)]


def create_stream_store(path: Path, mode: str = "sync") -> None:
    with MessageStore.open(path, fault_config(mode)) as store:
        store.create_stream_topic(TOPIC, queues=2)


def _ack(fd: int, stream: str, first: int, last: int, command: str) -> None:
    os.write(fd, f"{stream} {first} {last} {command}\n".encode())


def read_stream_acks(path: Path) -> list[tuple[str, int, int, str]]:
    """(stream, first version, last version, command id) of every acknowledged append."""
    if not path.exists():
        return []
    acks = []
    for line in path.read_text().splitlines():
        stream, first, last, command = line.split()
        acks.append((stream, int(first), int(last), command))
    return acks


def append_events_some(store: MessageStore, rng: random.Random, label: str, fd: int) -> None:
    """One append to a random stream at the version read just before: one event, or a
    group of two or three under one command."""
    stream = rng.choice(STREAMS)
    version = store.stream_version(TOPIC, stream)
    count = rng.choice([1, 1, 2, 3])
    command = f"{label}-{rng.getrandbits(40):x}"
    bodies = [f"{stream}:{version + i + 1}:{command};".encode() * rng.randint(1, 6)
              for i in range(count)]  # fmt: skip
    try:
        results = store.append_events(
            TOPIC, stream, bodies, expected_version=version, command_id=command
        )
    except WrongExpectedVersionError:
        return
    _ack(fd, stream, results[0].version, results[-1].version, command)


def write_events_until_killed(
    path: str, mode: str, acks: str, seed: int, kill: dict, limit: int, before: int = 0
) -> None:
    """A child: open the store, append ``before`` times, arm the kill point, append up to
    ``limit`` more times."""
    rng = random.Random(seed)
    fd = os.open(acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    store = MessageStore.open(path, fault_config(mode))
    for _ in range(before):
        append_events_some(store, rng, f"w{seed}", fd)
    arm_kill(**kill)
    for _ in range(limit):
        append_events_some(store, rng, f"w{seed}", fd)
    store.close()


def append_events_and_close(path: str, mode: str, acks: str, seed: int, count: int) -> None:
    """A child: append ``count`` times and close."""
    rng = random.Random(seed)
    fd = os.open(acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with MessageStore.open(path, fault_config(mode)) as store:
        for _ in range(count):
            append_events_some(store, rng, f"a{seed}", fd)


def check_streams(store: MessageStore, acks: list[tuple[str, int, int, str]]) -> None:
    """Every stream is versions 1..N with no gap; every acknowledged append is there with
    its command id on each of its versions; every event of a command came in one append
    (a group is whole); and each acknowledged command is refused again, with its version."""
    stored: dict[str, dict[int, str | None]] = {}
    for stream in STREAMS:
        events = store.read_stream(TOPIC, stream, max_count=10_000)
        versions = [e.version for e in events]
        assert versions == list(range(1, len(versions) + 1)), (stream, versions)
        assert store.stream_version(TOPIC, stream) == len(versions)
        stored[stream] = {e.version: e.command_id for e in events}
        for event in events:
            stream_id, version, command = event.body.split(b";")[0].split(b":")
            assert (stream_id.decode(), int(version)) == (stream, event.version), event
            assert command.decode() == event.command_id, event
        by_command: dict[str, list[int]] = {}
        for version, command in stored[stream].items():
            by_command.setdefault(command, []).append(version)
        for command, held in by_command.items():
            group = held[0], held[-1]
            assert held == list(range(group[0], group[1] + 1)), (stream, command, held)
    for stream, first, last, command in acks:
        for version in range(first, last + 1):
            assert stored[stream].get(version) == command, (stream, version, command)
        try:
            store.append_event(TOPIC, stream, b"again", command_id=command)
        except DuplicateCommandError as error:
            assert (error.first_version, error.version) == (first, last)
        else:
            raise AssertionError(f"{command} of {stream} was stored twice")


def check_index_clean(path: Path) -> None:
    assert check_event_index(path) == []
