"""The consumer commits on an interval, as Kafka clients do (``auto.commit.interval.ms``):
a consumer whose offset does not move still commits it, so a stuck consumer shows as
Burrow's STALL (commits go on, the offset stays) rather than STOP (no commits)."""

from __future__ import annotations

import threading

from storeadapter.engine import clock
from storeadapter.engine.consumer import Consumer
from tests.engine.test_consumer import FAST, wait_until


class FakeClock:
    def __init__(self) -> None:
        self.ms = clock.now_ms()

    def now_ms(self) -> int:
        return self.ms


def test_a_consumer_stuck_on_a_message_keeps_committing_its_offset(
    open_store, store_path, config, monkeypatch
):
    fake = FakeClock()
    monkeypatch.setattr(clock, "now_ms", fake.now_ms)
    store = open_store()
    store.create_topic("t", queues=1)
    store.append_batch("t", [b"first", b"stuck", b"third"])
    release = threading.Event()

    def handle(message):
        if message.body == b"stuck":
            release.wait(30)

    consumer = Consumer(store_path, "g", ["t"], handle, config=config, **FAST)
    with consumer:
        wait_until(lambda: store.committed_offset("g", "t", 0) == 1, what="the first commit")
        first = store.last_commit_times("g")[("t", 0)]
        fake.ms += 60_000  # a minute passes with the handler stuck

        wait_until(
            lambda: store.last_commit_times("g")[("t", 0)] > first,
            what="a commit of the unmoved offset",
        )
        assert store.committed_offset("g", "t", 0) == 1
        release.set()
