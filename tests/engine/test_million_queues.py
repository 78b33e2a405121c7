"""bench/million.py at a small scale (20,000 queues): every phase checks out, and a put
phase killed in the middle recovers with every acknowledged message in place.

Both run in fresh processes: the bench forks its producer and readers, which must not
happen in a test process that may hold other threads (Spark's, say).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from tests.engine.million_producer import MESSAGES, SEED, load_bench

QUEUES = 20_000
REPO = Path(__file__).resolve().parents[2]
PRODUCER = Path(__file__).with_name("million_producer.py")


@pytest.mark.one_layout
def test_every_phase_at_twenty_thousand_queues_checks_out(tmp_path):
    command = [sys.executable, "bench/million.py", "--queues", str(QUEUES)]
    command += ["--messages", "60000", "--threads", "4", "--readers", "2"]
    command += ["--dir", str(tmp_path)]

    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)

    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["bad_checks"] == 0 and report["producer_errors"] == []
    assert report["consumed_messages"] > 0
    assert report["recovery_records"] is not None


@pytest.mark.one_layout
def test_a_put_phase_killed_in_the_middle_recovers_every_acknowledged_message(tmp_path):
    million = load_bench()
    path, acks = tmp_path / "store", tmp_path / "acks"
    child = subprocess.Popen(
        [sys.executable, str(PRODUCER), str(path), str(acks), str(QUEUES)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not acks.exists() or acks.read_text().count("\n") < 40:
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the producer acknowledged too little in 60 s"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    batches = json.loads(acks.read_text().splitlines()[-1])["batches"]
    plan = million.plan_queues(QUEUES, MESSAGES, 1, seed=SEED)[0]
    acknowledged: dict[int, int] = {}
    for queue in plan[: batches * 500]:
        acknowledged[queue] = acknowledged.get(queue, 0) + 1

    with MessageStore.open(path, million.config()) as store:
        assert store.stats(topics=False).last_recovery.clean_shutdown is False
        for queue in range(QUEUES):
            low, high = store.queue_range(million.TOPIC, queue)
            assert low == 0 and high >= acknowledged.get(queue, 0), queue
            found = store.read(million.TOPIC, queue, 0, max_messages=high + 1)
            assert [m.queue_offset for m in found] == list(range(high))
            assert all(m.body == million.body_of(queue, m.queue_offset) for m in found)


def test_the_bench_s_plans_are_not_walked_by_the_cyclic_collector():
    # The put's results drive the collector's passes inside the timed rounds; a full
    # pass walked the harness's 20M-int plans (~0.45 s each at a million queues:
    # docs/PERFORMANCE.md, mill33b-s50). The plans are the harness's, not the store's.
    import gc

    million = load_bench()
    plans = million.plan_queues(1000, 5000, 4, seed=SEED)
    assert sum(len(plan) for plan in plans) == 5000
    assert all(queue % 4 == t for t, plan in enumerate(plans) for queue in plan)
    # What the collector visits of a plan (its traversal): none of its items.
    assert not [r for plan in plans for r in gc.get_referents(plan) if isinstance(r, int)]


def _spin(seconds: float) -> None:
    # Python-level work: holds the GIL between the interpreter's switches, as the
    # harness's making of bodies and dicts does.
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_the_put_s_clock_times_every_put_and_none_of_the_harness_s_making_or_freeing():
    # The harness makes each round's batches (and frees the round before's) on the
    # producer threads; a thread that went on to that work while the timing thread had
    # not yet read its clock put the harness's work into the put's seconds and CPU.
    million = load_bench()
    events: list[tuple[str, float, float]] = []
    readings: list[float] = []

    class Batch:
        def __del__(self) -> None:
            now = time.perf_counter()
            events.append(("free", now, now))

    def make(plan, next_offset):
        began = time.perf_counter()
        _spin(0.02)
        events.append(("make", began, time.perf_counter()))
        return [Batch() for _ in range(2)]

    def put(batch) -> None:
        began = time.perf_counter()
        _spin(0.003)
        events.append(("put", began, time.perf_counter()))

    def clock() -> float:
        readings.append(time.perf_counter())
        return readings[-1]

    plans = million.plan_queues(1000, 4000, 4, seed=SEED)
    rounds = max(-(-len(plan) // 250) for plan in plans)
    seconds, _, _, errors = million.timed_rounds(plans, 250, make, put, clock)

    assert errors == []
    windows = list(zip(readings[0::2], readings[1::2], strict=True))
    assert len(windows) == rounds
    assert seconds == pytest.approx(sum(end - start for start, end in windows))
    puts = [(began, ended) for kind, began, ended in events if kind == "put"]
    assert len(puts) == 4 * rounds * 2
    assert all(any(s <= b and e <= w for s, w in windows) for b, e in puts)
    harness = [(kind, b, e) for kind, b, e in events if kind != "put"]
    assert len(harness) == 4 * rounds * 3  # each round's making, its two batches freed
    assert not [(k, b, e) for k, b, e in harness if any(b < w and e > s for s, w in windows)]
