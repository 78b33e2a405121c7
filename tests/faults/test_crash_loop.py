"""A producer SIGKILLed at random moments, again and again (40 rounds of each mode in
``make test``, 170 in ``make soak``): what was acknowledged stays.

Each round the fork server forks a writer that opens the store and appends (single
messages and keyed batches, 4 KiB segments so that it rolls every dozen records,
16-entry consume-queue files); the test kills it at a random moment, most often once it
acknowledged something, three times in ten early (while it may be opening, or
recovering, the store), then opens the store itself (recovery), checks it and closes
it. A quarter of the rounds fork two writers and kill one while the other goes on over
what it left, then the other. Two rounds in ten check a copy instead, so that the
next writer finds the store crashed and recovers it itself. Every 8 rounds or so the
check also runs retention, so the store stays small. A last test kills writers while
another process keeps the store open throughout (no recovery runs until it dies too).

Promises checked after every kill:

* sync: every acknowledged message is present, at its queue and offset, body intact.
* async: acknowledged messages may be lost only at the end: if one is lost, so is every
  message acknowledged after it (what a crash can lose is the unflushed window).
* both: recovery finishes; every queue holds exactly min..max-1, every body is intact,
  no message is in two places, and the store notes no corruption.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import (
    WRITER,
    Ack,
    check_store,
    create_store,
    fault_config,
    read_acks,
    read_native,
)
from tests.faults.forkserver import Child, ForkServer
from tests.faults.soak import rounds

ROUNDS = rounds(40, 170)  # make test, make soak (TIDEMARK_SOAK=1)
RETENTION_EVERY = 8
PAIRS = 0.25  # share of rounds with two writers, one killed while the other goes on
IN_COPY = 0.2  # share of rounds checked on a copy, leaving the writer to recover
EARLY = 0.3  # share of kills at any moment from the start, opening included
SEED = 20261122
FAR_FUTURE_MS = 1 << 50


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _spawn_writer(server: ForkServer, tmp_path: Path, mode: str, seed: int) -> Child:
    return server.spawn(
        WRITER,
        tmp_path / f"writer-{seed}.stderr",
        path=str(tmp_path / "store"),
        mode=mode,
        acks=str(tmp_path / f"acks-{seed}.txt"),
        seed=seed,
        native=str(tmp_path / f"native-{seed}.txt"),
    )


def _killed_acks(child: Child, tmp_path: Path, seed: int) -> list[Ack]:
    child.kill()
    outcome = child.wait()
    assert outcome.killed, f"seed {SEED}: writer {seed} ended by itself: {outcome}"
    return read_acks(tmp_path / f"acks-{seed}.txt")


def _native_calls(tmp_path: Path) -> tuple[int, int]:
    """(append calls, of which the store core wrote) of every writer so far."""
    done = [read_native(report) for report in tmp_path.glob("native-*.txt")]
    return sum(d[0] for d in done), sum(d[1] for d in done)


def _wait_before_kill(child: Child, tmp_path: Path, seed: int, rng: random.Random) -> None:
    """Sleep until a random moment: in three rounds in ten early (the writer may still
    be opening or recovering the store), else once it acknowledged something."""
    if rng.random() < EARLY:
        time.sleep(rng.uniform(0.0, 0.03))
        return
    acks = tmp_path / f"acks-{seed}.txt"
    deadline = time.monotonic() + 10
    while not (acks.exists() and acks.stat().st_size) and time.monotonic() < deadline:
        assert child.poll() is None, f"seed {SEED}: writer {seed} ended: {child.poll()}"
        time.sleep(0.002)
    time.sleep(rng.uniform(0.0, 0.04))


def _kill_round(
    server: ForkServer, tmp_path: Path, mode: str, seed: int, rng: random.Random
) -> tuple[list[Ack], int]:
    """Fork a writer and SIGKILL it at a random moment; or fork two, kill one and, a
    little later, the other (which went on over what the first left). Return the
    messages acknowledged, in log order, and the number of kills."""
    if rng.random() < PAIRS:
        first = _spawn_writer(server, tmp_path, mode, seed)
        second = _spawn_writer(server, tmp_path, mode, seed + ROUNDS)
        _wait_before_kill(first, tmp_path, seed, rng)
        acks = _killed_acks(first, tmp_path, seed)
        time.sleep(rng.uniform(0.0, 0.04))
        acks += _killed_acks(second, tmp_path, seed + ROUNDS)
        return sorted(acks, key=lambda ack: ack.commit_offset), 2
    child = _spawn_writer(server, tmp_path, mode, seed)
    _wait_before_kill(child, tmp_path, seed, rng)
    return _killed_acks(child, tmp_path, seed), 1


def _crash_loop(server: ForkServer, tmp_path: Path, mode: str) -> dict:
    """Run the rounds; return the lost acks and some counts."""
    path = tmp_path / "store"
    create_store(path, mode)
    rng = random.Random(f"{SEED}-{mode}")
    expected: list[Ack] = []
    lost: list[Ack] = []
    kills = checked = acknowledged = silent = since_retention = 0
    for round_number in range(ROUNDS):
        seed = SEED + round_number
        context = f"{mode} round {round_number} (seed {SEED}, writer seed {seed})"
        acks, killed = _kill_round(server, tmp_path, mode, seed, rng)
        kills += killed
        acknowledged += len(acks)
        silent += not acks
        expected.extend(acks)
        in_copy = rng.random() < IN_COPY
        if in_copy:  # check a copy: the next writer then recovers the store itself
            shutil.rmtree(tmp_path / "copy", ignore_errors=True)
            shutil.copytree(path, tmp_path / "copy")
        with MessageStore.open(tmp_path / "copy" if in_copy else path, fault_config(mode)) as store:
            if acks:  # else the kill may have come before the writer opened the store
                assert store.last_recovery.clean_shutdown is False, context
            found = check_store(store, expected, context=context)
            checked += len(found.messages)
            lost_now = found.lost
            assert expected[len(expected) - len(lost_now) :] == lost_now, (
                f"{context}: lost acknowledged messages that are not the last ones: "
                f"{[a.message_id for a in lost_now[:5]]}"
            )
            lost.extend(lost_now)
            expected = expected[: len(expected) - len(lost_now)]
            removed = set(found.removed)
            expected = [a for a in expected if a not in removed]
            since_retention += 1
            if not in_copy and since_retention >= RETENTION_EVERY:
                store.delete_expired(now_ms=FAR_FUTURE_MS)
                since_retention = 0
    calls, native = _native_calls(tmp_path)
    return {
        "calls": calls,
        "native": native,
        "kills": kills,
        "lost": lost,
        "checked": checked,
        "acknowledged": acknowledged,
        "silent": silent,
    }


def test_sync_sigkill_loop_loses_no_acknowledged_message(server, tmp_path):
    result = _crash_loop(server, tmp_path, "sync")
    assert result["kills"] >= ROUNDS
    assert result["lost"] == [], (
        f"seed {SEED}: sync mode lost acknowledged messages "
        f"{[a.message_id for a in result['lost'][:10]]}"
    )
    assert result["acknowledged"] > ROUNDS, f"seed {SEED}: too few acknowledged: {result}"
    assert result["native"] > ROUNDS // 6, f"seed {SEED}: the store core wrote too little: {result}"
    print(f"\nsync: {_summary(result)}")


def test_async_sigkill_loop_loses_at_most_the_newest_acknowledged(server, tmp_path):
    result = _crash_loop(server, tmp_path, "async")
    assert result["kills"] >= ROUNDS
    assert result["acknowledged"] > ROUNDS, f"seed {SEED}: too few acknowledged: {result}"
    assert result["native"] > ROUNDS // 6, f"seed {SEED}: the store core wrote too little: {result}"
    print(f"\nasync: {_summary(result)}")
    # Stronger than promised: a killed process leaves what it wrote in the page cache,
    # so even the unflushed window survives. (Power loss is tests/faults/test_power_loss*.)
    assert result["lost"] == [], (
        f"seed {SEED}: a SIGKILL in async mode lost acknowledged messages "
        f"{[a.message_id for a in result['lost'][:10]]}"
    )


def _summary(result: dict) -> str:
    return (
        f"{result['kills']} kills ({result['silent']} before any acknowledgement), "
        f"{result['native']} of {result['calls']} append calls written by the store core, "
        f"{result['acknowledged']} acknowledged, {result['checked']} message reads checked, "
        f"{len(result['lost'])} acknowledged lost"
    )


MEMBER_ROUNDS = rounds(8, 20)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sigkill_loop_beside_a_long_lived_member_loses_nothing(server, tmp_path, mode):
    """Writers killed again and again while another process (a console, a consumer)
    keeps the store open all along: no one recovers it; each writer, and the checks,
    join it and must cope with what the dead left. At the end the member dies too and
    a full recovery must agree."""
    path = tmp_path / "store"
    create_store(path, mode)
    ready = tmp_path / "member-ready"
    member = server.spawn(
        "tests.faults.faultharness:hold_open",
        tmp_path / "member.stderr",
        path=str(path),
        mode=mode,
        ready=str(ready),
    )
    while not ready.exists():
        assert member.poll() is None, member.poll()
        time.sleep(0.01)
    rng = random.Random(f"{SEED}-member-{mode}")
    expected: list[Ack] = []
    for round_number in range(MEMBER_ROUNDS):
        context = f"{mode} round {round_number} beside a member (seed {SEED})"
        acks, _ = _kill_round(server, tmp_path, mode, SEED + round_number, rng)
        expected.extend(acks)
        with MessageStore.open(path, fault_config(mode)) as store:
            found = check_store(store, expected, context=context)
            assert found.lost == [], f"{context}: lost {found.lost[:3]}"
    member.kill()
    assert member.wait().killed
    with MessageStore.open(path, fault_config(mode)) as store:
        assert store.last_recovery.clean_shutdown is False
        found = check_store(store, expected, context=f"{mode}: recovered after the member")
        assert found.lost == [], f"{mode}: lost {found.lost[:3]}"
    assert len(expected) > MEMBER_ROUNDS
