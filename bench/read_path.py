"""CPU time of the read path, per call and per message (issue 29's read items).

Fills a store (4 queues, batches of 500, async, 32 MiB segments), then times with
``time.process_time`` (this process's CPU, so other processes on the machine weigh less
than on the wall clock), best of ``--passes``:

* ``read_at_end``: reads at a queue's end (no entry to read, nothing found): the fixed
  cost of a read without its entries' ``pread``;
* ``read_1``: reads of one message, walking every queue: the fixed cost of a read with
  its ``pread``, plus one message;
* ``read_32``: reads of 32 (the default ``max_messages``), per read and per message;
* ``read_500``: reads of 500 (the batch ``make bench`` compares with SQLite), per message;
* ``get_hot`` / ``get_random``: ``get`` of one id again and again / of random ids;
* ``sqlite_queue_500``: the plain SQLite queue table (bench/peers/sqlite_queue.py, issue
  29's peer for reads) read back in batches of 500, per message, the same bodies and
  count, in the same process; ``read_500_ratio`` is its CPU per message over Tidemark's.

Prints one JSON line and a table. ``python bench/read_path.py --sizes 50 1024``
(``--no-gc``: the same with the garbage collector off, to see its share).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

# The engine of the tree this file is in (not whichever one the environment installed),
# as bench/recovery_scan.py does: a before/after runs each tree's copy in turn.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

TOPIC = "bench"
QUEUES = 4


def _fill(path: Path, size: int, count: int) -> MessageStore:
    store = MessageStore.open(path, StoreConfig(segment_bytes=32 << 20, flush_mode="async"))
    store.create_topic(TOPIC, queues=QUEUES)
    body = random.Random(size).randbytes(size)
    for start in range(0, count, 500):
        store.append_batch(TOPIC, [body] * min(500, count - start))
    store.flush()
    return store


def _reads(store: MessageStore, batch: int, limit: int) -> tuple[float, int, int]:
    """CPU seconds, calls and messages of reading every queue in reads of ``batch``,
    at most ``limit`` messages in all."""
    read = store.read
    calls = total = 0
    started = time.process_time()
    for queue in range(QUEUES):
        offset = 0
        while total < limit:
            messages = read(TOPIC, queue, offset, batch)
            calls += 1
            if not messages:
                break
            offset += len(messages)
            total += len(messages)
    return time.process_time() - started, calls, total


def _at_end(store: MessageStore, high: int) -> float:
    read = store.read
    started = time.process_time()
    for _ in range(40_000):
        read(TOPIC, 0, high, 32)
    return time.process_time() - started


def _gets(store: MessageStore, ids: list[str]) -> float:
    get = store.get
    started = time.process_time()
    for message_id in ids:
        get(message_id)
    return time.process_time() - started


def _sqlite_queue(size: int, count: int, passes: int, workdir: Path) -> float:
    """CPU seconds of the best read-back of the SQLite queue peer, batches of 500."""
    from peers.sqlite_queue import SqliteQueuePeer

    peer = SqliteQueuePeer()
    peer.setup(workdir, size)
    try:
        body = random.Random(size).randbytes(size)
        peer.append([body] * count, 500)
        peer.finish_append()
        best = None
        for _ in range(passes):
            started = time.process_time()
            total = sum(len(batch) for batch in peer.batches(500))
            seconds = time.process_time() - started
            if total != count:
                raise SystemExit(f"sqlite_queue read {total} of {count}")
            best = seconds if best is None else min(best, seconds)
        return best
    finally:
        peer.teardown()


def measure(size: int, count: int, passes: int, workdir: Path) -> dict:
    path = workdir / f"read-{size}"
    shutil.rmtree(path, ignore_errors=True)
    store = _fill(path, size, count)
    try:
        result: dict = {"size": size, "count": count}
        for name, batch, limit in (
            ("read_1", 1, 40_000),
            ("read_32", 32, count),
            ("read_500", 500, count),
        ):
            best = None
            for _ in range(passes):
                seconds, calls, total = _reads(store, batch, limit)
                if best is None or seconds < best[0]:
                    best = (seconds, calls, total)
            seconds, calls, total = best
            result[name] = {
                "ns_per_call": round(seconds / calls * 1e9),
                "ns_per_message": round(seconds / total * 1e9),
                "calls": calls,
                "messages": total,
            }
        high = store.queue_range(TOPIC, 0)[1]
        best = min(_at_end(store, high) for _ in range(passes))
        result["read_at_end"] = {"ns_per_call": round(best / 40_000 * 1e9)}
        rng = random.Random(7)
        ids = []
        for queue in range(QUEUES):
            high = store.queue_range(TOPIC, queue)[1]
            for offset in rng.sample(range(high), 5_000):
                ids.append(store.read(TOPIC, queue, offset, 1)[0].message_id)
        rng.shuffle(ids)
        hot = [ids[0]] * len(ids)
        for name, wanted in (("get_hot", hot), ("get_random", ids)):
            best = min(_gets(store, wanted) for _ in range(passes))
            result[name] = {"ns_per_call": round(best / len(wanted) * 1e9)}
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    peer = _sqlite_queue(size, count, passes, workdir)
    result["sqlite_queue_500"] = {"ns_per_call": round(peer / count * 1e9)}
    result["read_500_ratio"] = round(peer / count * 1e9 / result["read_500"]["ns_per_message"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 1024])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--no-gc", action="store_true", help="time with the collector off")
    args = parser.parse_args()
    if args.no_gc:
        gc.disable()
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        results = [measure(s, args.count, args.passes, Path(workdir)) for s in args.sizes]
    print(json.dumps(results))
    print(f"{'size':>6} {'figure':<12} {'ns/call':>9} {'ns/msg':>8}")
    for result in results:
        names = ("read_at_end", "read_1", "read_32", "read_500", "get_hot", "get_random")
        for name in (*names, "sqlite_queue_500"):
            figure = result[name]
            print(
                f"{result['size']:>6} {name:<12} {figure['ns_per_call']:>9,} "
                f"{figure.get('ns_per_message', figure['ns_per_call']):>8,}"
            )
        print(
            f"{result['size']:>6} read_500, messages per CPU second, Tidemark / sqlite_queue: "
            f"{result['read_500_ratio']}x"
        )


if __name__ == "__main__":
    main()
