"""A producer SIGKILLed at random moments, hundreds of times: what was acknowledged stays.

Each round the fork server forks a writer that opens the store and appends (single
messages and keyed batches, 4 KiB segments so that it rolls every dozen records,
16-entry consume-queue files); the test kills it after a random delay (some kills land
while it opens the store), then opens the store itself (recovery), checks it and closes
it. Every 40 rounds the check also runs retention, so the store stays small.

Promises checked after every kill:

* sync: every acknowledged message is present, at its queue and offset, body intact.
* async: acknowledged messages may be lost only at the end: if one is lost, so is every
  message acknowledged after it (what a crash can lose is the unflushed window).
* both: recovery finishes; every queue holds exactly min..max-1, every body is intact,
  no message is in two places, and the store notes no corruption.
"""

from __future__ import annotations

import random
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
)
from tests.faults.forkserver import ForkServer

ROUNDS = 210
RETENTION_EVERY = 40
SEED = 20261122
FAR_FUTURE_MS = 1 << 50


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _kill_round(server: ForkServer, tmp_path: Path, mode: str, seed: int, delay: float) -> list:
    """Fork a writer, SIGKILL it after ``delay`` s; return the messages it acknowledged."""
    acks = tmp_path / f"acks-{seed}.txt"
    child = server.spawn(
        WRITER,
        tmp_path / f"writer-{seed}.stderr",
        path=str(tmp_path / "store"),
        mode=mode,
        acks=str(acks),
        seed=seed,
    )
    time.sleep(delay)
    child.kill()
    outcome = child.wait()
    assert outcome.killed, f"seed {seed}: the writer ended by itself: {outcome}"
    return read_acks(acks)


def _crash_loop(server: ForkServer, tmp_path: Path, mode: str) -> dict:
    """Run the rounds; return the acks still expected, the lost ones and some counts."""
    path = tmp_path / "store"
    create_store(path, mode)
    rng = random.Random(f"{SEED}-{mode}")
    expected: list[Ack] = []
    lost: list[Ack] = []
    kills = checked = acknowledged = silent = 0
    for round_number in range(ROUNDS):
        seed = SEED + round_number
        context = f"{mode} round {round_number} (seed {SEED}, writer seed {seed})"
        acks = _kill_round(server, tmp_path, mode, seed, rng.uniform(0.0, 0.07))
        kills += 1
        acknowledged += len(acks)
        silent += not acks
        expected.extend(acks)
        with MessageStore.open(path, fault_config(mode)) as store:
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
            if round_number % RETENTION_EVERY == RETENTION_EVERY - 1:
                store.delete_expired(now_ms=FAR_FUTURE_MS)
    return {
        "kills": kills,
        "lost": lost,
        "checked": checked,
        "acknowledged": acknowledged,
        "silent": silent,
    }


def test_sync_sigkill_loop_loses_no_acknowledged_message(server, tmp_path):
    result = _crash_loop(server, tmp_path, "sync")
    assert result["kills"] >= 200
    assert result["lost"] == [], (
        f"seed {SEED}: sync mode lost acknowledged messages "
        f"{[a.message_id for a in result['lost'][:10]]}"
    )
    assert result["acknowledged"] > 1000, f"seed {SEED}: too few acknowledged: {result}"
    print(f"\nsync: {_summary(result)}")


def test_async_sigkill_loop_loses_at_most_the_newest_acknowledged(server, tmp_path):
    result = _crash_loop(server, tmp_path, "async")
    assert result["kills"] >= 200
    assert result["acknowledged"] > 1000, f"seed {SEED}: too few acknowledged: {result}"
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
        f"{result['acknowledged']} acknowledged, {result['checked']} message reads checked, "
        f"{len(result['lost'])} acknowledged lost"
    )
