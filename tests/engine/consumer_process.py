"""A group consumer run as its own process by the consumer tests.

    python consumer_process.py STORE GROUP CONSUMER_ID OUT [--topic t] [--sleep-ms N]
        [--member-timeout-s S] [--heartbeat-s S] [--threads N]

Consumes TOPIC as CONSUMER_ID of GROUP and appends each handled body to OUT, one per
line, flushed before the handler returns (so a SIGKILL loses no line of a message it
handled). SIGTERM stops it cleanly: running handlers finish, offsets are committed,
the member leaves the group.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time

from storeadapter.engine.consumer import Consumer
from tests.engine.storetools import (
    small_config,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("group")
    parser.add_argument("consumer_id")
    parser.add_argument("out")
    parser.add_argument("--topic", default="t")
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument("--member-timeout-s", type=float, default=1.0)
    parser.add_argument("--heartbeat-s", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    config = small_config()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    write_lock = threading.Lock()

    with open(args.out, "a", encoding="utf-8") as out:

        def handle(message) -> None:
            if args.sleep_ms:
                time.sleep(args.sleep_ms / 1000)
            with write_lock:
                out.write(message.body.decode() + "\n")
                out.flush()

        consumer = Consumer(
            args.store,
            args.group,
            [args.topic],
            handle,
            args.consumer_id,
            config=config,
            threads=args.threads,
            member_timeout_s=args.member_timeout_s,
            heartbeat_interval_s=args.heartbeat_s,
            pull_timeout_s=0.02,
        )
        consumer.start()
        try:
            while not done.wait(0.05):
                pass
        finally:
            consumer.stop()


if __name__ == "__main__":
    main()
