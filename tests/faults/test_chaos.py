"""The stress run's processes on one store, with one of them SIGKILLed and started
again every ~0.4 s for 6 s (longer on a machine too slow for retention to have deleted a
segment by then, at most 40 s): producers (sync and async), consumers, and the retention
loop. The console reader is never killed and must never fail, whoever dies around it.

Afterwards, as in test_stress: every acknowledged message is stored, intact, at its
queue and offset, unless retention removed its whole segment; queues are contiguous;
nothing is reported corrupt; committed offsets are within the queues, and every message
still stored below them was handled (at-least-once).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import QUEUES, TOPIC, check_store, create_store, fault_config
from tests.faults.faultharness import read_acks as read_ack_file
from tests.faults.forkserver import Child, ForkServer
from tests.faults.stressroles import GROUP

RUN_S = 6.0
MAX_RUN_S = 40.0
SEED = 4242
ROLES = "tests.faults.stressroles"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


class Cast:
    """The killable processes, each started again under a new incarnation number (its
    own output files: a killed process may leave a cut last line)."""

    def __init__(self, server: ForkServer, root: Path, path: Path, stop_at: float) -> None:
        self.server, self.root, self.path, self.stop_at = server, root, path, stop_at
        self.stop_file = root / "stop"
        self.running: dict[str, Child] = {}
        self.incarnation = 0
        self.kills = 0

    def start(self, name: str) -> None:
        self.incarnation += 1
        tag = f"{name}.{self.incarnation}"
        common = {"stop_at": self.stop_at, "stop_file": str(self.stop_file)}
        if name.startswith("producer"):
            target = "produce"
            kwargs = {
                "path": str(self.path),
                "mode": "sync" if name.endswith(("0", "1")) else "async",
                "acks": str(self.root / f"{tag}.acks"),
                "seed": self.incarnation,
            }
        elif name.startswith("consumer"):
            target = "consume"
            kwargs = {
                "path": str(self.path),
                "consumer_id": name,
                "out": str(self.root / f"{tag}.handled"),
            }
        elif name == "retention":
            target = "expire"
            kwargs = {"path": str(self.path), "out": str(self.root / f"{tag}.log")}
            kwargs["keep_ms"] = 1500  # type: ignore[assignment]
        else:
            target = "browse"
            kwargs = {"path": str(self.path), "out": str(self.root / "console.log")}
            kwargs["seed"] = 7  # type: ignore[assignment]
        self.running[name] = self.server.spawn(
            f"{ROLES}:{target}", self.root / f"{tag}.stderr", **common, **kwargs
        )

    def kill_and_restart(self, name: str) -> None:
        child = self.running[name]
        child.kill()
        outcome = child.wait()
        assert outcome.killed or outcome.exit_code == 0, f"{name}: {outcome}"
        self.kills += outcome.killed
        if not self.stop_file.exists() and time.time() < self.stop_at - 0.5:
            self.start(name)
        else:
            del self.running[name]


def retention_deleted(root: Path) -> bool:
    return any('"deleted"' in log.read_text() for log in root.glob("retention.*.log"))


@pytest.fixture(scope="module")
def chaos(server, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("chaos")
    path = root / "store"
    create_store(path)
    started = time.time()
    cast = Cast(server, root, path, started + MAX_RUN_S)
    killable = [f"producer-{n}" for n in range(4)] + ["consumer-0", "consumer-1", "retention"]
    for name in [*killable, "console"]:
        cast.start(name)
    rng = random.Random(SEED)
    while time.time() < cast.stop_at - 0.6 and not (
        time.time() - started >= RUN_S and retention_deleted(root)
    ):
        time.sleep(rng.uniform(0.2, 0.6))
        cast.kill_and_restart(rng.choice(killable))
    cast.stop_file.touch()
    give_up = time.time() + 60
    while any(child.poll() is None for child in cast.running.values()):
        if time.time() > give_up:
            for child in cast.running.values():
                child.kill()
            break
        time.sleep(0.1)
    return {
        "root": root,
        "path": path,
        "kills": cast.kills,
        "last": {name: child.wait() for name, child in cast.running.items()},
    }


def test_the_console_reader_and_the_last_incarnations_end_cleanly(chaos):
    for name, outcome in chaos["last"].items():
        assert outcome.exit_code == 0, f"seed {SEED}: {name}: {outcome}"
        assert "Traceback" not in outcome.stderr, f"seed {SEED}: {name}: {outcome.stderr}"
    for stderr in chaos["root"].glob("*.stderr"):  # killed incarnations too
        text = stderr.read_text()
        assert "Traceback" not in text, f"seed {SEED}: {stderr.name}:\n{text[-3000:]}"
    assert int((chaos["root"] / "console.log").read_text()) > 10
    assert chaos["kills"] >= 6


def test_no_acknowledged_message_is_lost_whoever_dies(chaos):
    root = chaos["root"]
    acked = [ack for f in sorted(root.glob("producer-*.acks")) for ack in read_ack_file(f)]
    with MessageStore.open(chaos["path"], fault_config("async")) as store:
        found = check_store(store, acked, context=f"chaos (seed {SEED})")
    assert found.lost == [], f"seed {SEED}: lost {len(found.lost)}, e.g. {found.lost[:3]}"
    assert found.present and found.removed, (len(found.present), len(found.removed))
    print(
        f"\nchaos: {chaos['kills']} kills, {len(acked)} acknowledged, "
        f"{len(found.present)} stored, {len(found.removed)} removed by retention"
    )


def test_consumers_never_commit_past_what_they_handled_whoever_dies(chaos):
    root = chaos["root"]
    handled = set()
    for out in root.glob("consumer-*.handled"):
        for line in out.read_text().split("\n")[:-1]:
            message_id, _queue, _offset, intact = line.split()
            assert intact == "1", f"seed {SEED}: a damaged body was handed out: {message_id}"
            handled.add(message_id)
    with MessageStore.open(chaos["path"], fault_config("async")) as store:
        found = check_store(store, [], context=f"chaos consumers (seed {SEED})")
        for queue in range(QUEUES):
            committed = store.committed_offset(GROUP, TOPIC, queue)
            high = store.queue_range(TOPIC, queue)[1]
            assert committed is not None and committed <= high, (queue, committed, high)
            for message in found.messages.values():
                if message.queue == queue and message.queue_offset < committed:
                    assert message.message_id in handled, f"seed {SEED}: unhandled {message}"
