"""Batches of 500 dict items of 50 B bodies, run alone against one checkout, to compare
two checkouts in the same minute (docs/PERFORMANCE.md, "Issue 31 (part 6)"):

    .venv/bin/python bench/dict_batches.py CHECKOUT tag|keyed|sqlite [COUNT] [WARM]

``tag``: ``{body, tag}``; ``keyed``: ``{body, key, tag, properties}``; ``sqlite``: the
plain SQLite queue (bench/peers/sqlite_queue.py, bytes rows, 500 a transaction) beside
them. Opens a new async store (4 queues), appends WARM (default 2,000) items, then
COUNT (default 200,000) more, and prints the rate and the thread CPU a message of the
COUNT. For cachegrind, run it with COUNT and with 0 and subtract.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

BATCH = 500


def items(kind: str, start: int, count: int) -> list:
    body = b"x" * 50
    if kind == "tag":
        return [{"body": body, "tag": f"t{i % 8}"} for i in range(start, start + count)]
    return [
        {"body": body, "key": f"k{i}", "tag": f"t{i % 8}", "properties": {"r": "eu"}}
        for i in range(start, start + count)
    ]


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] not in ("tag", "keyed", "sqlite"):
        sys.exit(__doc__)
    root, kind = Path(sys.argv[1]).resolve(), sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    warm = int(sys.argv[4]) if len(sys.argv) > 4 else 2_000
    sys.path[:0] = [str(root), str(root / "bench")]
    work = Path(tempfile.mkdtemp())
    try:
        if kind == "sqlite":
            from peers.sqlite_queue import SqliteQueuePeer

            peer = SqliteQueuePeer()
            peer.setup(work, 50)
            bodies = [b"x" * 50] * count
            started = time.thread_time()
            peer.append(bodies, BATCH)
            peer.finish_append()
            cpu = time.thread_time() - started
            peer.teardown()
        else:
            from storeadapter.engine import MessageStore, StoreConfig

            store = MessageStore.open(work / "s", StoreConfig(flush_mode="async"))
            store.create_topic("t", queues=4)
            for at in range(0, warm, BATCH):
                store.append_batch("t", items(kind, at, min(BATCH, warm - at)))
            batches = [items(kind, warm + at, BATCH) for at in range(0, count, BATCH)]
            started = time.thread_time()
            for batch in batches:
                store.append_batch("t", batch)
            cpu = time.thread_time() - started
            store.close()
    finally:
        shutil.rmtree(work)
    if count:
        print(f"{root.name} {kind}: {cpu / count * 1e6:.2f} µs thread CPU a message")


if __name__ == "__main__":
    main()
