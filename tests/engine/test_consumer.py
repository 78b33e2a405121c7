"""The consumer client: delivery, the sliding commit window, retries, the DLQ, operator
resets, rebalancing, and a group of real processes with one killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from storeadapter.engine import (
    LAST_ERROR,
    ORIGIN_MESSAGE_ID,
    ORIGIN_QUEUE,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_TOPIC,
    RETRY_AT_MS,
    RETRY_COUNT,
    RETRY_PROPERTIES,
    Consumer,
    MessageNotFoundError,
    MessageStore,
    dlq_topic,
    redrive_dlq,
    retry_topic,
)
from storeadapter.engine.membership import group_members
from tests.engine.storetools import read_all

REPO = Path(__file__).resolve().parents[2]
CONSUMER = Path(__file__).with_name("consumer_process.py")

FAST = {"member_timeout_s": 1.0, "heartbeat_interval_s": 0.05, "pull_timeout_s": 0.01}


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


class Recorder:
    """A handler that records every body it sees (thread-safe)."""

    def __init__(self, fail=lambda message, attempt: False, before=None) -> None:
        self.lock = threading.Lock()
        self.seen: list[bytes] = []
        self.messages = []
        self.times: dict[bytes, list[float]] = {}
        self.fail = fail
        self.before = before

    def __call__(self, message) -> None:
        if self.before is not None:
            self.before(message)
        with self.lock:
            attempt = len(self.times.setdefault(message.body, []))
            self.times[message.body].append(time.monotonic())
        if self.fail(message, attempt):
            raise RuntimeError(f"cannot handle {message.body!r} (attempt {attempt})")
        with self.lock:
            self.seen.append(message.body)
            self.messages.append(message)

    def counts(self) -> Counter:
        with self.lock:
            return Counter(self.seen)


def _consumer(store_path, config, handler, topics=("t",), group="g", **kwargs) -> Consumer:
    return Consumer(store_path, group, list(topics), handler, config=config, **{**FAST, **kwargs})


def _committed_to_end(store: MessageStore, group: str, topic: str) -> bool:
    return all(
        store.committed_offset(group, topic, q) == store.queue_range(topic, q)[1]
        for q in range(store.topic(topic).queues)
    )


# ------------------------------------------------------------------- delivery


def test_every_message_is_handled_once_and_committed(store, store_path, config):
    bodies = [f"m{i}".encode() for i in range(200)]
    store.append_batch("t", bodies)
    active, most = [0], [0]
    lock = threading.Lock()

    def before(message):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.0005)
        with lock:
            active[0] -= 1

    handler = Recorder(before=before)

    with _consumer(store_path, config, handler) as consumer:
        wait_until(lambda: len(handler.counts()) == 200, what="all messages")
        more = [f"late{i}".encode() for i in range(20)]
        store.append_batch("t", more)  # appended while it runs
        wait_until(lambda: len(handler.counts()) == 220, what="late messages")
        wait_until(lambda: _committed_to_end(store, "g", "t"), what="commits")
        assert consumer.assigned_queues() == [(retry_topic("g"), 0)] + [("t", q) for q in range(4)]

    assert handler.counts() == Counter(bodies + more)
    assert all(count == 1 for count in handler.counts().values())
    assert most[0] == 1  # threads=1: one at a time
    for queue in range(4):  # and in queue order
        offsets = [m.queue_offset for m in handler.messages if m.queue == queue]
        assert offsets == sorted(offsets)
    assert store.topic(retry_topic("g")).queues == 1
    assert group_members(store_path, "g", 10.0) == []  # it left the group on stop


def test_threads_handle_concurrently(store, store_path, config):
    store.append_batch("t", [f"m{i}".encode() for i in range(8)])
    barrier = threading.Barrier(4, timeout=10)
    handler = Recorder(before=lambda message: barrier.wait())

    with _consumer(store_path, config, handler, threads=4):
        # Four handlers can only pass the barrier together.
        wait_until(lambda: len(handler.counts()) == 8, what="all messages")


def test_a_slow_early_message_holds_the_commit_back_while_later_ones_finish(
    open_store, store_path, config
):
    store = open_store()
    store.create_topic("w", queues=1)
    store.append_batch("w", [f"m{i}".encode() for i in range(20)])
    release = threading.Event()

    def before(message):
        if message.body == b"m3":
            release.wait(20)

    handler = Recorder(before=before)
    with _consumer(store_path, config, handler, topics=["w"], threads=4):
        wait_until(lambda: len(handler.counts()) == 19, what="all but the slow one")
        time.sleep(0.3)  # several commit rounds
        assert store.committed_offset("g", "w", 0) == 3  # the lowest unfinished offset
        release.set()
        wait_until(lambda: store.committed_offset("g", "w", 0) == 20, what="the full commit")

    assert handler.counts() == Counter(f"m{i}".encode() for i in range(20))


def test_the_window_bounds_how_far_reading_runs_ahead_of_a_stuck_message(
    open_store, store_path, config
):
    store = open_store()
    store.create_topic("w", queues=1)
    store.append_batch("w", [f"m{i}".encode() for i in range(100)])
    release = threading.Event()
    handler = Recorder(before=lambda m: m.body == b"m0" and release.wait(20))
    slow_ticks = {"heartbeat_interval_s": 2.0, "member_timeout_s": 10.0}

    with _consumer(
        store_path, config, handler, topics=["w"], threads=4, max_window=5, **slow_ticks
    ):
        wait_until(lambda: len(handler.counts()) == 4, what="m1 to m4")
        time.sleep(0.2)
        assert set(handler.counts()) == {f"m{i}".encode() for i in range(1, 5)}
        release.set()
        # Finished offsets leave the window at once, not at the next commit round.
        wait_until(lambda: len(handler.counts()) == 100, timeout=1.5, what="the rest")


def test_a_restarted_consumer_resumes_from_the_committed_offset(store, store_path, config):
    store.append_batch("t", [f"a{i}".encode() for i in range(40)])
    first = Recorder()
    with _consumer(store_path, config, first):
        wait_until(lambda: len(first.counts()) == 40)
    assert _committed_to_end(store, "g", "t")

    store.append_batch("t", [f"b{i}".encode() for i in range(10)])
    second = Recorder()
    with _consumer(store_path, config, second):
        wait_until(lambda: len(second.counts()) == 10)
        time.sleep(0.1)

    assert second.counts() == Counter(f"b{i}".encode() for i in range(10))


# -------------------------------------------------------------- retry and DLQ


def test_a_failed_message_is_retried_after_its_delay_and_then_succeeds(store, store_path, config):
    original = store.append("t", b"flaky", key="k1", tag="tg", properties={"a": "1"})
    store.append_batch("t", [b"fine1", b"fine2"])
    handler = Recorder(fail=lambda message, attempt: message.body == b"flaky" and attempt == 0)

    with _consumer(store_path, config, handler, retry_delays_s=(0.4, 5)):
        wait_until(lambda: b"flaky" in handler.counts(), what="the retry")
        wait_until(lambda: _committed_to_end(store, "g", "t"), what="commits on t")
        wait_until(lambda: _committed_to_end(store, "g", retry_topic("g")), what="retry commit")

    first_try, second_try = handler.times[b"flaky"]
    assert second_try - first_try >= 0.3  # not before RETRY_AT_MS
    assert handler.counts() == Counter([b"flaky", b"fine1", b"fine2"])
    redelivered = next(m for m in handler.messages if m.body == b"flaky")
    assert redelivered.topic == "t"  # the origin restored for the handler
    assert redelivered.queue == original.queue
    assert redelivered.queue_offset == original.queue_offset
    assert redelivered.message_id == original.message_id
    assert redelivered.keys == ["k1"] and redelivered.tag == "tg"
    assert redelivered.properties["a"] == "1"
    assert redelivered.properties[RETRY_COUNT] == "1"
    [copy] = read_all(store, retry_topic("g"), 0)
    assert copy.properties[ORIGIN_TOPIC] == "t"
    assert copy.properties[ORIGIN_QUEUE] == str(original.queue)
    assert copy.properties[ORIGIN_QUEUE_OFFSET] == str(original.queue_offset)
    assert copy.properties[ORIGIN_MESSAGE_ID] == original.message_id
    assert int(copy.properties[RETRY_AT_MS]) >= copy.store_time_ms + 350
    assert "cannot handle" in copy.properties[LAST_ERROR]


def test_a_message_failing_every_retry_goes_to_the_dlq(store, store_path, config):
    bad = store.append("t", b"poison", key="pk", tag="red", properties={"user": "x"})
    store.append_batch("t", [f"ok{i}".encode() for i in range(10)])
    handler = Recorder(fail=lambda message, attempt: message.body == b"poison")

    with _consumer(store_path, config, handler, max_retries=3, retry_delays_s=(0.02, 0.05)):
        wait_until(lambda: dlq_messages(store) != [], what="the DLQ message")
        wait_until(lambda: _committed_to_end(store, "g", retry_topic("g")), what="retry commit")
        wait_until(lambda: _committed_to_end(store, "g", "t"), what="commits on t")

    assert len(handler.times[b"poison"]) == 4  # the first try and 3 retries
    assert handler.counts() == Counter(f"ok{i}".encode() for i in range(10))
    retries = read_all(store, retry_topic("g"), 0)
    assert [m.properties[RETRY_COUNT] for m in retries] == ["1", "2", "3"]
    [dead] = dlq_messages(store)
    assert dead.body == b"poison"
    assert dead.keys == ["pk"] and dead.tag == "red" and dead.properties["user"] == "x"
    assert dead.properties[ORIGIN_TOPIC] == "t"
    assert dead.properties[ORIGIN_QUEUE] == str(bad.queue)
    assert dead.properties[ORIGIN_QUEUE_OFFSET] == str(bad.queue_offset)
    assert dead.properties[ORIGIN_MESSAGE_ID] == bad.message_id
    assert dead.properties[RETRY_COUNT] == "4"
    assert RETRY_AT_MS not in dead.properties
    assert "RuntimeError" in dead.properties[LAST_ERROR]


def dlq_messages(store: MessageStore, group: str = "g") -> list:
    if dlq_topic(group) not in {t.name for t in store.topics()}:
        return []
    return read_all(store, dlq_topic(group), 0)


def test_a_retry_waiting_for_its_time_does_not_block_other_topics(store, store_path, config):
    store.append("t", b"later")
    handler = Recorder(fail=lambda message, attempt: message.body == b"later" and attempt == 0)

    with _consumer(store_path, config, handler, retry_delays_s=(30,)):
        wait_until(lambda: len(read_all(store, retry_topic("g"), 0)) == 1, what="the retry copy")
        store.append_batch("t", [b"n1", b"n2"])
        wait_until(lambda: len(handler.counts()) == 2, what="new messages")
        time.sleep(0.2)
        assert store.committed_offset("g", retry_topic("g"), 0) in (None, 0)  # not past it

    assert b"later" not in handler.counts()


def test_a_due_retry_is_handled_while_an_earlier_one_still_waits(store, store_path, config):
    store.create_topic(retry_topic("g"), queues=1)
    now_ms = time.time_ns() // 1_000_000
    for body, due in ((b"wait", now_ms + 60_000), (b"due", now_ms)):
        origin = store.append("t", body, queue=0)
        store.append(
            retry_topic("g"),
            body,
            properties={
                ORIGIN_TOPIC: "t",
                ORIGIN_QUEUE: "0",
                ORIGIN_QUEUE_OFFSET: str(origin.queue_offset),
                ORIGIN_MESSAGE_ID: origin.message_id,
                RETRY_COUNT: "1",
                RETRY_AT_MS: str(due),
            },
        )
    store.commit_offset("g", "t", 0, 2)  # the originals were handled (and failed)
    handler = Recorder()

    with _consumer(store_path, config, handler):
        wait_until(lambda: b"due" in handler.counts(), what="the due retry")
        time.sleep(0.2)
        assert store.committed_offset("g", retry_topic("g"), 0) in (None, 0)

    assert handler.counts() == Counter([b"due"])


def test_redrive_sends_dlq_messages_back_once(store, store_path, config):
    store.append("t", b"d1", key="k", tag="tg", properties={"p": "v"})
    store.append("t", b"d2")
    handler = Recorder(fail=lambda message, attempt: True)
    with _consumer(store_path, config, handler, max_retries=0):
        wait_until(lambda: len(dlq_messages(store)) == 2, what="two DLQ messages")
    dead = {m.body: m for m in dlq_messages(store)}
    before = {q: store.queue_range("t", q)[1] for q in range(4)}

    only = redrive_dlq(store, "g", [dead[b"d1"].message_id])
    again = redrive_dlq(store, "g")

    assert [r.topic for r in only] == ["t"]
    assert len(again) == 2
    assert only[0].message_id in {r.message_id for r in again}  # d1 was not stored twice
    grown = sum(store.queue_range("t", q)[1] - before[q] for q in range(4))
    assert grown == 2
    redriven = store.get(only[0].message_id)
    assert redriven.body == b"d1" and redriven.keys == ["k"] and redriven.tag == "tg"
    assert redriven.properties["p"] == "v"
    assert not set(RETRY_PROPERTIES) & set(redriven.properties)
    assert len(redrive_dlq(store, "g")) == 2
    assert sum(store.queue_range("t", q)[1] - before[q] for q in range(4)) == 2

    second = Recorder()
    with _consumer(store_path, config, second):
        wait_until(lambda: len(second.counts()) == 2, what="the redriven messages")
    assert second.counts() == Counter([b"d1", b"d2"])


def test_redrive_of_an_unknown_id_or_an_empty_dlq(store):
    assert redrive_dlq(store, "g") == []
    with pytest.raises(MessageNotFoundError):
        redrive_dlq(store, "g", ["0" * 24])


# ---------------------------------------------------------------- operator reset


def test_an_operator_reset_of_an_idle_consumer_is_consumed_again_not_overwritten(
    open_store, store_path, config
):
    store = open_store()
    store.create_topic("r", queues=1)
    store.append_batch("r", [f"m{i}".encode() for i in range(50)])
    handler = Recorder()

    with _consumer(store_path, config, handler, topics=["r"]):
        wait_until(lambda: store.committed_offset("g", "r", 0) == 50, what="the first commit")
        operator = open_store()
        operator.commit_offset("g", "r", 0, 10, who="operator", reason="reset")
        wait_until(lambda: handler.counts()[b"m49"] == 2, what="consumption from the reset")
        wait_until(lambda: store.committed_offset("g", "r", 0) == 50, what="the commit")

    counts = handler.counts()
    assert all(counts[f"m{i}".encode()] == 1 for i in range(10))
    assert all(counts[f"m{i}".encode()] == 2 for i in range(10, 50))
    _assert_reset_respected(store, "r", 10)


def test_an_operator_reset_while_busy_wins_over_the_consumer_window(open_store, store_path, config):
    store = open_store()
    store.create_topic("r", queues=1)
    store.append_batch("r", [f"m{i}".encode() for i in range(300)])
    after_reset: list[bytes] = []
    reset_done = threading.Event()

    def before(message):
        time.sleep(0.002)
        if reset_done.is_set():
            after_reset.append(message.body)

    handler = Recorder(before=before)
    with _consumer(store_path, config, handler, topics=["r"], threads=2):
        wait_until(lambda: (store.committed_offset("g", "r", 0) or 0) >= 50, what="progress")
        # Counted from just before the reset: a message the consumer takes again in the
        # instant after the commit and before the event was set would otherwise be missed.
        # Messages below 50 were handled before this point, so they appear only if taken again.
        reset_done.set()
        open_store().commit_offset("g", "r", 0, 0, who="operator", reason="reset")
        wait_until(lambda: store.committed_offset("g", "r", 0) == 300, timeout=20)

    # Everything from the reset offset was handled (again) after the reset.
    assert set(after_reset) >= {f"m{i}".encode() for i in range(300)}
    _assert_reset_respected(store, "r", 0)


def _assert_reset_respected(store: MessageStore, topic: str, reset_to: int) -> None:
    history = list(reversed(store.offset_history("g", topic, 0)))  # oldest first
    reset_index = max(i for i, c in enumerate(history) if c.who == "operator")
    after = history[reset_index + 1 :]
    assert after, "the consumer committed nothing after the reset"
    assert after[0].old == reset_to  # its first commit after the reset started from it
    assert all(c.old <= c.new for c in after)


# ------------------------------------------------------------------ rebalance


def test_two_consumers_share_the_queues_and_one_takes_all_when_the_other_leaves(
    store, store_path, config
):
    handler_a, handler_b = Recorder(), Recorder()
    a = _consumer(store_path, config, handler_a, consumer_id="a").start()
    b = _consumer(store_path, config, handler_b, consumer_id="b").start()
    try:
        wait_until(
            lambda: (
                a.assigned_queues() == [(retry_topic("g"), 0), ("t", 0), ("t", 1)]
                and b.assigned_queues() == [("t", 2), ("t", 3)]
            ),
            what="the split",
        )
        wait_until(  # what they report follows at their next heartbeat at the latest
            lambda: (
                [(m["consumer_id"], len(m["queues"])) for m in group_members(store_path, "g", 10.0)]
                == [("a", 3), ("b", 2)]
            ),
            what="the split reported",
        )
        store.append_batch("t", [f"m{i}".encode() for i in range(100)])
        wait_until(lambda: len(handler_a.counts()) + len(handler_b.counts()) == 100)
        assert handler_a.counts() and handler_b.counts()

        a.stop()
        wait_until(lambda: len(b.assigned_queues()) == 5, what="b taking a's queues")
        store.append_batch("t", [f"n{i}".encode() for i in range(40)])
        wait_until(lambda: sum(1 for x in handler_b.counts() if x.startswith(b"n")) == 40)
    finally:
        a.stop()
        b.stop()
    assert not set(handler_a.seen) & set(handler_b.seen)  # clean hand-over: no duplicates


def test_run_forever_returns_when_a_handler_calls_stop(store, store_path, config):
    store.append_batch("t", [b"a", b"b", b"stop"])
    seen = []

    def handle(message):
        seen.append(message.body)
        if message.body == b"stop":
            consumer.stop()

    consumer = _consumer(store_path, config, handle)
    runner = threading.Thread(target=consumer.run_forever)
    runner.start()
    runner.join(10)

    assert not runner.is_alive() and not consumer.running
    assert b"stop" in seen
    assert group_members(store_path, "g", 10.0) == []


def test_a_missing_topic_is_reported_at_start(store, store_path, config):
    with pytest.raises(Exception, match="does not exist"):
        _consumer(store_path, config, Recorder(), topics=["nope"]).start()


# ------------------------------------------------------------ real processes


def _start_consumer(store_path: Path, consumer_id: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(CONSUMER),
            str(store_path),
            "g",
            consumer_id,
            str(out),
            "--sleep-ms",
            "3",
            "--member-timeout-s",
            "1.0",
            "--heartbeat-s",
            "0.2",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def _holders(store_path: Path) -> dict[str, set[tuple[str, int]]]:
    return {
        m["consumer_id"]: {tuple(q) for q in m["queues"]}
        for m in group_members(store_path, "g", 1.0)
    }


def test_a_killed_member_s_queues_move_to_the_others_and_nothing_is_lost(
    open_store, store_path, tmp_path
):
    store = open_store()
    store.create_topic("t", queues=6)
    all_queues = {("t", q) for q in range(6)}
    outs = {cid: tmp_path / f"{cid}.out" for cid in ("c0", "c1", "c2")}
    children = {cid: _start_consumer(store_path, cid, out) for cid, out in outs.items()}
    try:
        wait_until(
            lambda: (
                {cid: len(qs - {(retry_topic("g"), 0)}) for cid, qs in _holders(store_path).items()}
                == {"c0": 2, "c1": 2, "c2": 2}
            ),
            timeout=15,
            what="three members with two queues each",
        )
        first = [f"a{i}" for i in range(600)]
        store.append_batch("t", [body.encode() for body in first])
        wait_until(lambda: len(_lines(outs["c1"])) >= 20, what="c1 at work")

        children["c1"].send_signal(signal.SIGKILL)
        children["c1"].wait(10)
        killed_at = time.monotonic()
        wait_until(
            lambda: (
                set(_holders(store_path)) == {"c0", "c2"}
                and set().union(*_holders(store_path).values()) >= all_queues
            ),
            timeout=5,
            what="c1's queues reassigned",
        )
        assert time.monotonic() - killed_at < 1.0 + 3.0  # member timeout + a few heartbeats

        second = [f"b{i}" for i in range(200)]
        store.append_batch("t", [body.encode() for body in second])
        expected = set(first + second)
        wait_until(
            lambda: set().union(*(_lines(out) for out in outs.values())) >= expected,
            timeout=15,
            what="every message handled",
        )
    finally:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for cid, child in children.items():
            _, stderr = child.communicate(timeout=20)
            if cid != "c1":
                assert child.returncode == 0, stderr.decode()

    handled = [line for out in outs.values() for line in _lines(out)]
    assert set(handled) == expected  # at least once, and nothing unknown
    assert _committed_to_end(store, "g", "t")  # the survivors committed on their way out
