"""The processes of the stress test, each run by the fork server until a wall-clock
deadline (``stop_at``, seconds since the epoch) or, when the test names a ``stop_file``,
until that file exists, then ending cleanly (exit code 0).

Each writes what it did to its own file, one line per event, with one ``write`` per
line (O_APPEND), so the test can read them after every process ended.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

from storeadapter import summaries
from storeadapter.access import close_all, store_at
from storeadapter.engine import MessageStore, StoredMessage, clock
from storeadapter.engine.consumer import Consumer
from tests.faults.faultharness import (
    QUEUES,
    TOPIC,
    AckWriter,
    append_some,
    body_is_intact,
    fault_config,
)

GROUP = "g"


def _line(fd: int, text: str) -> None:
    os.write(fd, (text + "\n").encode())


def _open_log(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def going(stop_at: float, stop_file: str | None) -> bool:
    """Before the deadline, and the test has not made ``stop_file`` (a run that lasts until
    what it is there to show has happened, however slow the machine)."""
    return time.time() < stop_at and not (stop_file and os.path.exists(stop_file))


def produce(
    path: str, mode: str, acks: str, seed: int, stop_at: float, stop_file: str | None = None
) -> None:
    """Append (single messages and keyed batches) until the deadline."""
    rng = random.Random(seed)
    writer = AckWriter(acks)
    with MessageStore.open(path, fault_config(mode)) as store:
        number = 0
        while going(stop_at, stop_file):
            number += append_some(store, rng, f"s{seed}", number, writer)


def consume(
    path: str,
    consumer_id: str,
    out: str,
    stop_at: float,
    threads: int = 1,
    stop_file: str | None = None,
) -> None:
    """Consume topic ``t`` as a member of group ``g`` until the deadline, then stop
    (committing) and leave. Each handled message: ``id queue offset intact``."""
    fd = _open_log(out)
    lock = threading.Lock()

    def handle(message: StoredMessage) -> None:
        with lock:
            _line(
                fd,
                f"{message.message_id} {message.queue} {message.queue_offset} "
                f"{int(body_is_intact(message.body))}",
            )

    consumer = Consumer(
        path,
        GROUP,
        [TOPIC],
        handle,
        consumer_id,
        config=fault_config("async"),
        threads=threads,
        member_timeout_s=2.0,
        heartbeat_interval_s=0.2,
        pull_timeout_s=0.02,
    )
    consumer.start()
    try:
        while going(stop_at, stop_file):
            time.sleep(0.05)
    finally:
        consumer.stop()


def expire(path: str, out: str, stop_at: float, keep_ms: int, stop_file: str | None = None) -> None:
    """Run retention in a loop, with a clock that makes every segment whose newest
    record is older than ``keep_ms`` expire. Each run: a JSON line of what it deleted."""
    fd = _open_log(out)
    with MessageStore.open(path, fault_config("async")) as store:
        retention_ms = int(store.config.retention_hours * 3_600_000)
        while going(stop_at, stop_file):
            report = store.delete_expired(now_ms=clock.now_ms() + retention_ms - keep_ms)
            if report.deleted_segments:
                deleted = [(s["base"], s["end"]) for s in report.deleted_segments]
                _line(fd, json.dumps({"deleted": deleted}))
            time.sleep(0.15)


def browse(path: str, out: str, stop_at: float, seed: int, stop_file: str | None = None) -> None:
    """What the console does, in a loop: summaries, stats, ranges, reads, key lookups."""
    rng = random.Random(seed)
    fd = _open_log(out)
    store = store_at(path, fault_config("async"))
    calls = 0
    while going(stop_at, stop_file):
        summaries.topic_summaries(store)
        summaries.store_totals(store)
        summaries.queue_rows(store, TOPIC)
        summaries.group_summaries(store)
        summaries.topic_group_summaries(store, TOPIC)
        summaries.segment_rows(store)
        store.stats()
        queue = rng.randrange(QUEUES)
        low, high = store.queue_range(TOPIC, queue)
        for offset in (low, max(low, high - 5), rng.randrange(low, high + 1)):
            for message in store.read(TOPIC, queue, offset, max_messages=8):
                assert body_is_intact(message.body), message.message_id
        for message in store.query_by_key(TOPIC, f"k{rng.randrange(16)}", limit=8):
            assert body_is_intact(message.body), message.message_id
        calls += 1
        time.sleep(0.01)
    _line(fd, str(calls))
    close_all()
