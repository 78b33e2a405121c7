"""bench/million.py at a small scale (20,000 queues): every phase checks out, and a put
phase killed in the middle recovers with every acknowledged message in place."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

from storeadapter.engine import MessageStore

QUEUES = 20_000
BENCH = Path(__file__).resolve().parents[2] / "bench" / "million.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("million_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_phase_at_twenty_thousand_queues_checks_out(tmp_path):
    million = load_bench()
    args = argparse.Namespace(
        queues=QUEUES, messages=120_000, threads=4, readers=2, dir=str(tmp_path), keep=False
    )

    report = million.run(args)

    assert report["ok"], report
    assert report["bad_checks"] == 0 and report["producer_errors"] == []
    assert report["consumed_messages"] > 0
    assert report["recovery_records"] is not None


def _produce_until_killed(path: Path, acks: Path) -> None:
    """Child: append batches in random queue order; after each, record every queue's
    acknowledged count (one JSON line per batch)."""
    million = load_bench()
    store = MessageStore.open(path, million.config())
    store.create_topic(million.TOPIC, queues=QUEUES, layout="shared")
    plan = million.plan_queues(QUEUES, 2_000_000, 1, seed=5)[0]
    sent: dict[int, int] = {}
    with open(acks, "w") as out:
        for start in range(0, len(plan), 500):
            batch = []
            for queue in plan[start : start + 500]:
                offset = sent.get(queue, 0)
                sent[queue] = offset + 1
                batch.append({"body": million.body_of(queue, offset), "queue": queue})
            store.append_batch(million.TOPIC, batch)
            out.write(json.dumps({"batches": start // 500 + 1}) + "\n")
            out.flush()
    os._exit(0)


def test_a_put_phase_killed_in_the_middle_recovers_every_acknowledged_message(tmp_path):
    million = load_bench()
    path, acks = tmp_path / "store", tmp_path / "acks"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _produce_until_killed(path, acks)
        finally:
            os._exit(1)
    deadline = time.monotonic() + 60
    while not acks.exists() or acks.read_text().count("\n") < 40:
        assert time.monotonic() < deadline, "the producer acknowledged too little in 60 s"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    batches = json.loads(acks.read_text().splitlines()[-1])["batches"]
    plan = million.plan_queues(QUEUES, 2_000_000, 1, seed=5)[0]
    acknowledged: dict[int, int] = {}
    for queue in plan[: batches * 500]:
        acknowledged[queue] = acknowledged.get(queue, 0) + 1

    with MessageStore.open(path, million.config()) as store:
        assert store.stats(topics=False)["last_recovery"]["clean_shutdown"] is False
        for queue in range(QUEUES):
            low, high = store.queue_range(million.TOPIC, queue)
            assert low == 0 and high >= acknowledged.get(queue, 0), queue
            found = store.read(million.TOPIC, queue, 0, max_messages=high + 1)
            assert [m.queue_offset for m in found] == list(range(high))
            assert all(m.body == million.body_of(queue, m.queue_offset) for m in found)
