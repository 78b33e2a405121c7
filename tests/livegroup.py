"""A live consumer group for tests: the project's own Consumer in a thread, fed by a
producer thread, committing several times a second, as an operator meets it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from storeadapter.engine import Consumer, MessageStore, StoreConfig

CONSUMER_ID = "live-consumer"


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class LiveGroup:
    """Group ``group`` consuming ``topic`` of ``store`` while a producer appends to it.

    ``commits_after(time_ms)`` counts the consumer's offset changes since then (each one a
    commit that moved an offset).
    """

    def __init__(
        self, store: MessageStore, config: StoreConfig, group: str, topic: str, queues: int
    ) -> None:
        self.store, self.group, self.topic, self.queues = store, group, topic, queues
        self.consumer = Consumer(
            store.path,
            group,
            topic,
            lambda message: None,
            consumer_id=CONSUMER_ID,
            config=config,
            heartbeat_interval_s=0.2,
            commit_interval_s=0.02,
            pull_timeout_s=0.01,
        )
        self._stop = threading.Event()
        self._producer = threading.Thread(target=self._produce, name="live-producer")

    def _produce(self) -> None:
        n = 0
        while not self._stop.wait(0.005):
            self.store.append(self.topic, f"m{n}".encode(), queue=n % self.queues)
            n += 1

    def start(self) -> LiveGroup:
        self._producer.start()
        self.consumer.start()
        wait_until(lambda: self.commits_after(0) >= self.queues, what="the first commits")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._producer.join()
        self.consumer.stop()

    def commits_after(self, time_ms: int) -> int:
        history = self.store.offset_history(self.group, limit=1000)
        return sum(1 for c in history if c.who == CONSUMER_ID and c.time_ms > time_ms)

    def __enter__(self) -> LiveGroup:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
