"""A million queues on one machine: a scaled version of the design contest's benchmark.

    .venv/bin/python bench/million.py [--queues Q] [--messages N] [--threads T]
                                      [--readers P] [--dir PATH] [--keep]

One shared topic of Q queues (all queues' consume-queue entries in shared block files).

1. put: T threads append N messages of 40-60 bytes in random queue order, in batches of
   500 (``append_batch`` with an explicit queue per message). The batches (the bodies
   the harness derives) are made in rounds of 400,000 messages outside the clock; the
   put's rate, its CPU a message (the producer process's, timed parts only) and the
   harness's CPU a message for making and freeing them (not in the rate) are reported.
   Thread t owns the queues q with q % T == t, so each queue has one producer and
   message k of queue q lands at queue offset k; its body is derived from (q, k) and
   checked later. The writing process is then killed (SIGKILL), and the store
   reopened: recovery time.
2. reopen after a clean close: open time.
3. index check: for every queue, 10 messages read at a random offset, each checked;
   P reader processes split the queues.
4. consume: 20% of the queues (chosen at random) read from start to end, checked; the
   same P processes.

   Both read in rounds (CHECK_ROUND queues, CONSUME_ROUND messages): a round's reads are
   timed, then its messages checked against the bodies the harness derives, outside the
   clock. The rates count the reads alone; the readers' CPU for the reads
   (``check_cpu_us_per_read``, ``consume_cpu_us_per_msg``) and for the harness's checks
   (``*_harness_cpu_us_*``, not in the rates) are reported beside them.

Prints a table, then one JSON line with put_msgs_per_s, check_reads_per_s,
consume_msgs_per_s, peak_rss_bytes (the largest of every process), open_files (the most
any process had open), store_bytes, reopen_after_kill_s, reopen_clean_s (and the opening
process's CPU for each, ``*_cpu_s``), recovery_records (scanned past the checkpoint),
recovery_native_replayed (of those, checked natively in place) and ok (every check
passed). Timings only: no test asserts them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

TOPIC = "m"
BATCH = 500
#: Messages (all threads together) whose batches are made before each timed part of the put.
ROUND = 400_000
CHECK_READ = 10
CONSUME_SHARE = 0.2
READ_BATCH = 256
#: Queues the index check reads (timed) before checking their messages (not timed), and
#: messages the consume phase reads (timed, whole queues) before checking them. Small: a
#: round's messages held at once (~0.7 MB at 2,048) are freed together, and the larger the
#: round, the more of the interpreter's memory arenas each round gives back and takes
#: anew, page faults and all (0.6 a queue read at 2,048 queues a round, 0.09 at 64).
CHECK_ROUND = 64
CONSUME_ROUND = 2048
TARGETS = {
    "put_msgs_per_s": 1_000_000,
    "check_reads_per_s": 300_000,
    "consume_msgs_per_s": 2_000_000,
    "peak_rss_bytes": 4 << 30,
    "reopen_clean_s": 10,
    "reopen_after_kill_s": 60,
}


def config() -> StoreConfig:
    # Small key index: these messages have no keys.
    return StoreConfig(flush_mode="async", index_slots=1 << 16, index_entries=1 << 18)


def body_of(queue: int, offset: int) -> bytes:
    """The body of message ``offset`` of ``queue``: 40 to 60 bytes derived from both."""
    digest = hashlib.blake2b(f"{queue}:{offset}".encode(), digest_size=32).digest()
    size = 40 + digest[0] % 21
    return (digest + digest)[:size]


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def plan_queues(queues: int, messages: int, threads: int, seed: int) -> list[array]:
    """Per thread, the queue of each message it sends, in random order. Arrays, not
    lists: the put's results drive the cyclic collector's passes inside the timed
    rounds, and a full pass walked every item of a list (20M, ~0.45 s a pass at a
    million queues); an array is not walked."""
    rng = random.Random(seed)
    per_thread = [array("I") for _ in range(threads)]
    for _ in range(messages):
        queue = rng.randrange(queues)
        per_thread[queue % threads].append(queue)
    return per_thread


def make_batches(plan: Sequence[int], next_offset: dict[int, int]) -> list[list[dict]]:
    """The ``append_batch`` arguments for ``plan``'s messages (bodies derived here)."""
    batches = []
    for start in range(0, len(plan), BATCH):
        batch = []
        for queue in plan[start : start + BATCH]:
            offset = next_offset.get(queue, 0)
            next_offset[queue] = offset + 1
            batch.append({"body": body_of(queue, offset), "queue": queue})
        batches.append(batch)
    return batches


def timed_rounds(
    plans: Sequence[array],
    per_thread: int,
    make: Callable[[array, dict[int, int]], list],
    put: Callable[[object], None],
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float, float, list[BaseException]]:
    """Each plan's messages by its own thread, in rounds of ``per_thread``: all threads
    first make their round's batches (``make``: the harness's work, outside the clock),
    then all ``put`` them, timed. (seconds, CPU seconds) of the process over the timed
    parts, the harness's CPU seconds (the making, and the freeing of the round before's
    batches), the errors raised by ``put``.

    The timing thread reads its clocks with every producer held at a barrier: the
    round's start before any producer puts (``go``), its end before any producer goes
    on to free and make (``counted``). With two barriers a round, the producer that
    last reached one ran on, and the timing thread waited for the GIL behind the
    producers' making of bodies: that time and CPU went into the put's figures, 0.04–0.15
    µs of CPU a put at 100,000 queues (docs/PERFORMANCE.md, put33-s57)."""
    threads = len(plans)
    errors: list[BaseException] = []
    rounds = max(-(-len(plan) // per_thread) for plan in plans)
    made, go, done, counted = (threading.Barrier(threads + 1) for _ in range(4))

    def put_all(batches: list) -> None:
        # A function of its own: its loop's last batch is let go as it returns, not
        # held by the caller's frame into the next round's timed part.
        try:
            if not errors:
                for batch in batches:
                    put(batch)
        except BaseException as error:  # reported, not raised in a thread
            errors.append(error)

    def produce(plan: array) -> None:
        next_offset: dict[int, int] = {}
        for round_ in range(rounds):
            batches = make(plan[round_ * per_thread : (round_ + 1) * per_thread], next_offset)
            made.wait()
            go.wait()
            put_all(batches)
            done.wait()
            counted.wait()
            del batches  # the harness's items freed outside the clock, as they were made

    workers = [threading.Thread(target=produce, args=(plan,)) for plan in plans]
    for worker in workers:
        worker.start()
    seconds = cpu = 0.0
    cpu_mark = time.process_time()
    harness_cpu = 0.0
    for _ in range(rounds):
        made.wait()
        started, cpu_started = clock(), time.process_time()
        harness_cpu += cpu_started - cpu_mark
        go.wait()
        done.wait()
        seconds += clock() - started
        cpu_mark = time.process_time()
        cpu += cpu_mark - cpu_started
        counted.wait()
    for worker in workers:
        worker.join()
    return seconds, cpu, harness_cpu, errors


def put_phase(path: Path, queues: int, messages: int, threads: int, report_fd: int) -> None:
    """Child process: create the topic, run the producers (``timed_rounds``), report,
    then wait to be killed. Only the puts count in ``put_s`` and ``put_cpu_s`` (the
    process's CPU over the timed parts); ``harness_cpu_s`` is the making's (and the
    freeing of the round before's batches)."""
    store = MessageStore.open(path, config())
    store.create_topic(TOPIC, queues=queues, layout="shared")
    plans = plan_queues(queues, messages, threads, seed=1)
    made_batches: list[int] = []

    def make(plan: array, next_offset: dict[int, int]) -> list[list[dict]]:
        batches = make_batches(plan, next_offset)
        made_batches.append(len(batches))
        return batches

    def put(batch: list[dict]) -> None:
        store.append_batch(TOPIC, batch)

    seconds, cpu, harness_cpu, errors = timed_rounds(plans, max(1, ROUND // threads), make, put)
    appender = getattr(store, "_appender", None)
    result = {
        "native_batches": getattr(appender, "batched", 0),
        "batches": sum(made_batches),
        "put_s": seconds,
        "put_cpu_s": cpu,
        "harness_cpu_s": harness_cpu,
        "errors": [repr(e) for e in errors],
        "rss": peak_rss(),
        "open_files": open_files(),
    }
    os.write(report_fd, json.dumps(result).encode())
    os.close(report_fd)
    signal.pause()  # killed here, without a close: the next open recovers


def expected_counts(queues: int, messages: int, threads: int) -> list[int]:
    counts = [0] * queues
    for plan in plan_queues(queues, messages, threads, seed=1):
        for queue in plan:
            counts[queue] += 1
    return counts


def check_worker(path: str, queue_ids: list[int], counts: list[int], seed: int, out) -> None:
    """Reader process: the index check, then the consume phase, over ``queue_ids``.

    Both work in rounds: the reads of a round are timed (wall and this process's CPU),
    then their messages are checked against the bodies the harness derives (``body_of``,
    the harness's own work, outside the clock: its CPU is reported apart)."""
    store = MessageStore.open(Path(path), config())
    rng = random.Random(seed)
    bad = 0
    check_s = check_cpu = check_harness = 0.0
    for first in range(0, len(queue_ids), CHECK_ROUND):
        round_ = queue_ids[first : first + CHECK_ROUND]
        starts = [rng.randrange(0, max(1, counts[q] - CHECK_READ + 1)) for q in round_]
        started, cpu = time.perf_counter(), time.process_time()
        found = [
            store.read(TOPIC, queue, start, max_messages=CHECK_READ)
            for queue, start in zip(round_, starts, strict=True)
        ]
        checked = time.process_time()
        check_s += time.perf_counter() - started
        check_cpu += checked - cpu
        for queue, start, messages in zip(round_, starts, found, strict=True):
            want = min(CHECK_READ, counts[queue] - start)
            if len(messages) != want or any(
                m.body != body_of(queue, m.queue_offset) or m.queue_offset != start + i
                for i, m in enumerate(messages)
            ):
                bad += 1
        let_go, cpu = time.perf_counter(), time.process_time()
        check_harness += cpu - checked
        del found  # the messages freed: the reads' cost, as when each is let go at once
        check_s += time.perf_counter() - let_go
        check_cpu += time.process_time() - cpu
    consumed = 0
    consume_s = consume_cpu = consume_harness = 0.0
    chosen = [q for q in queue_ids if rng.random() < CONSUME_SHARE]
    at = 0
    while at < len(chosen):
        # A round: whole queues read until it holds CONSUME_ROUND messages.
        pages: list[tuple[int, int, list]] = []  # (queue, first offset, messages)
        held = 0
        started, cpu = time.perf_counter(), time.process_time()
        while at < len(chosen) and held < CONSUME_ROUND:
            queue = chosen[at]
            at += 1
            offset = 0
            while offset < counts[queue]:
                found = store.read(TOPIC, queue, offset, max_messages=READ_BATCH)
                pages.append((queue, offset, found))
                if not found:
                    break
                offset += len(found)
                held += len(found)
        checked = time.process_time()
        consume_s += time.perf_counter() - started
        consume_cpu += checked - cpu
        for queue, offset, found in pages:
            if not found:
                bad += 1
            for message in found:
                if message.queue_offset != offset or message.body != body_of(queue, offset):
                    bad += 1
                offset += 1
            consumed += len(found)
        let_go, cpu = time.perf_counter(), time.process_time()
        consume_harness += cpu - checked
        del pages  # the messages freed (the last page's with ``found``): the reads' cost
        found = None
        consume_s += time.perf_counter() - let_go
        consume_cpu += time.process_time() - cpu
    files = open_files()
    store.close()
    out.send(
        {
            "reads": len(queue_ids),
            "check_s": check_s,
            "check_cpu_s": check_cpu,
            "check_harness_cpu_s": check_harness,
            "consumed": consumed,
            "consume_s": consume_s,
            "consume_cpu_s": consume_cpu,
            "consume_harness_cpu_s": consume_harness,
            "bad": bad,
            "rss": peak_rss(),
            "open_files": files,
        }
    )


def timed_open(path: Path) -> tuple[float, float, MessageStore]:
    """Open the store: wall seconds, this process's CPU seconds, the store."""
    started, cpu = time.perf_counter(), time.process_time()
    store = MessageStore.open(path, config())
    return time.perf_counter() - started, time.process_time() - cpu, store


def directory_bytes(path: Path) -> int:
    """Bytes the store's files occupy on disk (allocated blocks)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def run(args: argparse.Namespace) -> dict:
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tidemark-million-"))
    path = workdir / "store"
    shutil.rmtree(path, ignore_errors=True)
    context = multiprocessing.get_context("fork")
    read_fd, write_fd = os.pipe()
    producer = context.Process(
        target=put_phase, args=(path, args.queues, args.messages, args.threads, write_fd)
    )
    producer.start()
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        put = json.loads(pipe.read())
    os.kill(producer.pid, signal.SIGKILL)
    producer.join()

    reopen_kill_s, reopen_kill_cpu_s, store = timed_open(path)
    recovery = store.stats(topics=False).last_recovery
    store.close()
    reopen_clean_s, reopen_clean_cpu_s, store = timed_open(path)
    store.close()

    counts = expected_counts(args.queues, args.messages, args.threads)
    order = list(range(args.queues))
    random.Random(3).shuffle(order)
    shares = [order[i :: args.readers] for i in range(args.readers)]
    pipes, readers = [], []
    for i, share in enumerate(shares):
        receive, send = context.Pipe(duplex=False)
        reader = context.Process(
            target=check_worker, args=(str(path), share, counts, 100 + i, send)
        )
        reader.start()
        pipes.append(receive)
        readers.append(reader)
    results = [pipe.recv() for pipe in pipes]
    for reader in readers:
        reader.join()

    check_s = max(r["check_s"] for r in results)
    consume_s = max(r["consume_s"] for r in results)
    consumed = sum(r["consumed"] for r in results)

    def per(key: str, count: int) -> float:
        return round(sum(r[key] for r in results) * 1e6 / count, 2) if count else 0.0

    bad = sum(r["bad"] for r in results)
    report = {
        "bench": "million",
        "queues": args.queues,
        "messages": args.messages,
        "threads": args.threads,
        "readers": args.readers,
        "put_msgs_per_s": round(args.messages / put["put_s"]),
        "put_cpu_us_per_msg": round(put["put_cpu_s"] * 1e6 / args.messages, 2),
        "harness_cpu_us_per_msg": round(put["harness_cpu_s"] * 1e6 / args.messages, 2),
        "native_batches": put["native_batches"],
        "batches": put["batches"],
        "check_reads_per_s": round(args.queues / check_s),
        "consume_msgs_per_s": round(consumed / consume_s) if consume_s else 0,
        "consumed_messages": consumed,
        "check_cpu_us_per_read": per("check_cpu_s", args.queues),
        "check_harness_cpu_us_per_read": per("check_harness_cpu_s", args.queues),
        "consume_cpu_us_per_msg": per("consume_cpu_s", consumed),
        "consume_harness_cpu_us_per_msg": per("consume_harness_cpu_s", consumed),
        "peak_rss_bytes": max([put["rss"], peak_rss()] + [r["rss"] for r in results]),
        "open_files": max([put["open_files"]] + [r["open_files"] for r in results]),
        "store_bytes": directory_bytes(path),
        "reopen_after_kill_s": round(reopen_kill_s, 2),
        "reopen_clean_s": round(reopen_clean_s, 2),
        "reopen_after_kill_cpu_s": round(reopen_kill_cpu_s, 2),
        "reopen_clean_cpu_s": round(reopen_clean_cpu_s, 2),
        "recovery_records": recovery.records,
        "recovery_native_replayed": getattr(recovery, "native_replayed", None),
        "bad_checks": bad,
        "producer_errors": put["errors"],
        "ok": bad == 0 and not put["errors"],
    }
    if not args.keep:
        shutil.rmtree(path, ignore_errors=True)
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return report


def format_table(report: dict) -> str:
    lines = [f"{'figure':<32} {'value':>16} {'target':>16} {'':>5}", "-" * 72]
    for name in (
        "put_msgs_per_s",
        "put_cpu_us_per_msg",
        "harness_cpu_us_per_msg",
        "check_reads_per_s",
        "check_cpu_us_per_read",
        "check_harness_cpu_us_per_read",
        "consume_msgs_per_s",
        "consume_cpu_us_per_msg",
        "consume_harness_cpu_us_per_msg",
        "peak_rss_bytes",
        "open_files",
        "store_bytes",
        "reopen_clean_s",
        "reopen_after_kill_s",
        "reopen_clean_cpu_s",
        "reopen_after_kill_cpu_s",
    ):
        value = report[name]
        target = TARGETS.get(name)
        mark = ""
        if target is not None:
            higher_is_better = name.endswith("_per_s")
            met = value >= target if higher_is_better else value <= target
            mark = "ok" if met else "miss"
        shown = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
        lines.append(
            f"{name:<32} {shown:>16} {('' if target is None else f'{target:,}'):>16} {mark:>5}"
        )
    lines.append(
        f"{report['queues']:,} queues, {report['messages']:,} messages, {report['threads']} "
        f"producer threads, {report['readers']} reader processes; every check "
        f"{'passed' if report['ok'] else 'did NOT pass'}."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1_000_000)
    parser.add_argument("--messages", type=int, default=20_000_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--readers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--dir", help="where to build the store (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the store afterwards")
    args = parser.parse_args()
    report = run(args)
    print(format_table(report))
    print(json.dumps(report))
    if not report["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
