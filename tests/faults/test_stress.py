"""Everything at once on one store directory, for a bounded time (6 s; 15 s in make
soak): 4 producers (2 sync, 2 async), 2 group consumers, retention in a loop (with a
clock that expires everything older than a second or two) and a process doing what the
console does.

Afterwards: every process ended cleanly with nothing on stderr; every acknowledged
message is readable, intact, at its queue and offset, unless retention removed it, and
retention removed only whole oldest segments (exactly the messages below the log's
first remaining segment are gone); queues are contiguous; the group's committed offsets
are within its queues; every message below a committed offset that is still stored was
handled by a consumer (at-least-once), and every handled body was intact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import (
    QUEUES,
    TOPIC,
    check_store,
    create_store,
    fault_config,
    read_acks,
)
from tests.faults.forkserver import Child, ForkServer
from tests.faults.soak import rounds
from tests.faults.stressroles import GROUP

RUN_S = rounds(6.0, 15.0)  # seconds: make test, make soak (TIDEMARK_SOAK=1)
ROLES = "tests.faults.stressroles"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


@pytest.fixture(scope="module")
def stressed(server, tmp_path_factory) -> dict:
    """Run the processes against one store; return where their records are."""
    root = tmp_path_factory.mktemp("stress")
    path = root / "store"
    create_store(path)
    stop_at = time.time() + RUN_S
    children: dict[str, Child] = {}
    for number, mode in enumerate(["sync", "sync", "async", "async"]):
        name = f"producer-{number}-{mode}"
        children[name] = server.spawn(
            f"{ROLES}:produce",
            root / f"{name}.stderr",
            path=str(path),
            mode=mode,
            acks=str(root / f"{name}.acks"),
            seed=number,
            stop_at=stop_at,
        )
    for number in range(2):
        name = f"consumer-{number}"
        children[name] = server.spawn(
            f"{ROLES}:consume",
            root / f"{name}.stderr",
            path=str(path),
            consumer_id=name,
            out=str(root / f"{name}.handled"),
            stop_at=stop_at,
        )
    children["retention"] = server.spawn(
        f"{ROLES}:expire",
        root / "retention.stderr",
        path=str(path),
        out=str(root / "retention.log"),
        stop_at=stop_at,
        keep_ms=1500,
    )
    children["console"] = server.spawn(
        f"{ROLES}:browse",
        root / "console.stderr",
        path=str(path),
        out=str(root / "console.log"),
        stop_at=stop_at,
        seed=7,
    )
    give_up = stop_at + 60
    while any(child.poll() is None for child in children.values()):
        if time.time() > give_up:
            for child in children.values():
                child.kill()
            break
        time.sleep(0.1)
    return {
        "root": root,
        "path": path,
        "outcomes": {name: child.wait() for name, child in children.items()},
    }


def test_every_process_ends_cleanly(stressed):
    for name, outcome in stressed["outcomes"].items():
        assert outcome.exit_code == 0, f"{name}: {outcome}"
        assert "Traceback" not in outcome.stderr and "Error" not in outcome.stderr, (
            f"{name}: {outcome.stderr[-3000:]}"
        )


def test_acknowledged_messages_are_readable_unless_retention_removed_their_segment(stressed):
    root, path = stressed["root"], stressed["path"]
    acked = [ack for f in sorted(root.glob("producer-*.acks")) for ack in read_acks(f)]
    deleted = [
        segment
        for line in (root / "retention.log").read_text().splitlines()
        for segment in json.loads(line)["deleted"]
    ]
    with MessageStore.open(path, fault_config("async")) as store:
        found = check_store(store, acked, context="after the stress run")
        segments = store.stats().segments
    assert found.lost == [], f"lost {len(found.lost)} acknowledged, e.g. {found.lost[:3]}"
    assert found.log_min == segments[0].base
    assert deleted, "retention deleted nothing: the run proved little"
    assert max(end for _, end in deleted) == found.log_min
    assert all(a.commit_offset < found.log_min for a in found.removed)
    # Enough of both for the run to prove something; how many depends on the machine's
    # speed (retention keeps 1.5 s), so the bar is low (986 kept at a load of 10).
    assert len(found.present) > 200 and len(found.removed) > 200, (
        f"{len(found.present)} present, {len(found.removed)} removed"
    )
    print(
        f"\nstress: {len(acked)} acknowledged, {len(found.present)} still stored, "
        f"{len(found.removed)} removed by retention in {len(deleted)} segments"
    )


def test_consumers_committed_within_queues_and_handled_what_they_committed(stressed):
    root, path = stressed["root"], stressed["path"]
    handled: dict[str, int] = {}
    for name in ("consumer-0", "consumer-1"):
        lines = (root / f"{name}.handled").read_text().splitlines()
        assert lines, f"{name} handled nothing"
        for line in lines:
            message_id, _queue, _offset, intact = line.split()
            assert intact == "1", f"{name} was handed a damaged body: {message_id}"
            handled[message_id] = handled.get(message_id, 0) + 1
    with MessageStore.open(path, fault_config("async")) as store:
        found = check_store(store, [], context="consumers")
        for queue in range(QUEUES):
            committed = store.committed_offset(GROUP, TOPIC, queue)
            low, high = store.queue_range(TOPIC, queue)
            assert committed is not None and 0 <= committed <= high, (queue, committed, high)
            for message in found.messages.values():
                if message.queue == queue and message.queue_offset < committed:
                    assert message.message_id in handled, f"committed past unhandled {message}"


def test_the_console_reader_kept_reading(stressed):
    calls = int((stressed["root"] / "console.log").read_text())
    assert calls > 10
