"""Two processes appending to one store, against one alone (issue 31's target: together
at least 1.5x one process; docs/PERFORMANCE.md, "Issue 31 (part 11)"):

    .venv/bin/python bench/two_processes.py CHECKOUT single|batch [COUNT] [--procs=1|2] [--body=50]
                                            [--fresh=MB] [--behind=BYTES]

Run from any directory: CHECKOUT's packages are the ones imported, so two checkouts
can be compared in the same minute. This process makes a store (async flush, 4 queues,
50 B bodies, or ``--body`` bytes: 1024 is ``make bench``'s ``producers_N``) and holds
it open (the third process) while ``--procs`` worker processes (spawned; each opens
the store itself) wait at a barrier, then each appends COUNT bodies: one ``append`` a
call (``single``) or ``append_batch`` of 500 (``batch``). Printed, one line: the rate
together (all messages from the first worker's start to the last one's end), each
worker's loop CPU per message (``time.process_time``) and minor page faults over its
loop, the CPU this process spent meanwhile (its flusher following the workers'
appends) per message appended, each worker's native-append count (the core's
``appended``/``batched``: calls the native core wrote rather than declined to the
Python path), plus the core's follow counters where it has them, and the seconds the
appending thread waited, runnable, for a CPU (``run_queue_s``). Then the queues
are checked: every queue's offsets dense from 0, the total what was appended, each
message read back once.

Equal page terms: this VM backs a new page-cache page on its first touch unless pages
were freed just before (docs/PERFORMANCE.md, procs31-s53), so a run's rate hung on what
the run before it freed. Once the workers have opened the store, and just before they
start, this process writes ``--fresh`` MB into a file and deletes it
(``page_backing.fresh_pages``; by default the log bytes the run writes, 0: none): every
run starts with that many freed pages, and ``fresh_us_per_mb`` (its pwrites' CPU a MB)
says what new pages cost the machine before it. ``--behind=BYTES``: the store's
``log_cache_behind_bytes`` (the holder's and the workers'; a checkout that has it).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from page_backing import fresh_pages

QUEUES = 4
BATCH = 500
TOPIC = "two"
BODY = b"x" * 50


def _counters(store) -> dict:
    core = getattr(store, "_appender", None)
    found = {}
    for name in ("appended", "batched", "followed", "caught_up", "pen_waits"):
        if core is not None and hasattr(core, name):
            value = getattr(core, name)
            if isinstance(value, tuple):  # pen_waits: (tried again, waited)
                found["pen_spun"], found["pen_waited"] = value
            else:
                found[name] = value
    return found


def _run_queue_wait() -> float:
    """Seconds this thread has waited, runnable, for a CPU (/proc/thread-self/schedstat's
    second field): with its CPU and its span, what is left is time asleep (the pen, a
    page's backing)."""
    with open("/proc/thread-self/schedstat") as schedstat:
        return int(schedstat.read().split()[1]) / 1e9


def _config(behind: int):
    from storeadapter.engine import StoreConfig

    return StoreConfig(flush_mode="async", **({"log_cache_behind_bytes": behind} if behind else {}))


def _worker(
    root: str, path: str, kind: str, count: int, body: bytes, behind: int, barriers, results
) -> None:
    sys.path.insert(0, root)
    from storeadapter.engine import MessageStore

    store = MessageStore.open(path, _config(behind))
    try:
        bodies = [body] * count
        batches = [bodies[i : i + BATCH] for i in range(0, count, BATCH)]
        append, append_batch = store.append, store.append_batch
        before = _counters(store)
        for barrier in barriers:  # opened; then go, after the fresh pages
            barrier.wait()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        waited = _run_queue_wait()
        began, cpu, own = time.monotonic(), time.process_time(), time.thread_time()
        if kind == "single":
            for body in bodies:
                append(TOPIC, body)
        else:
            for batch in batches:
                append_batch(TOPIC, batch)
        cpu = time.process_time() - cpu
        own = time.thread_time() - own
        ended = time.monotonic()
        waited = _run_queue_wait() - waited
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        after = _counters(store)
    finally:
        store.close()
    results.put(
        {
            "began": began,
            "ended": ended,
            "cpu_us_per_msg": round(cpu / count * 1e6, 2),
            "thread_us_per_msg": round(own / count * 1e6, 2),
            "minor_faults": faults,
            "run_queue_s": round(waited, 3),
            "native": {k: after[k] - before.get(k, 0) for k in after},
        }
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    procs, body, fresh, behind = 2, BODY, -1, 0
    for flag in sys.argv[1:]:
        if flag.startswith("--fresh="):
            fresh = int(flag.split("=", 1)[1])
        if flag.startswith("--behind="):
            behind = int(flag.split("=", 1)[1])
        if flag.startswith("--procs="):
            procs = int(flag.split("=", 1)[1])
        if flag.startswith("--body="):
            body = b"x" * int(flag.split("=", 1)[1])
    if len(args) < 2 or args[1] not in ("single", "batch"):
        sys.exit(__doc__)
    root = str(Path(args[0]).resolve())
    kind = args[1]
    count = int(args[2]) if len(args) > 2 else 100_000
    if fresh < 0:  # the log bytes the run writes (a record's header and names ~100 B)
        fresh = (len(body) + 100) * count * procs // 1_000_000
    sys.path.insert(0, root)
    from storeadapter.engine import MessageStore

    context = multiprocessing.get_context("spawn")
    work = Path(tempfile.mkdtemp())
    path = work / "s"
    try:
        holder = MessageStore.open(path, _config(behind))
        holder.create_topic(TOPIC, queues=QUEUES)
        barriers = (context.Barrier(procs + 1), context.Barrier(procs + 1))
        results = context.Queue()
        workers = [
            context.Process(
                target=_worker,
                args=(root, str(path), kind, count, body, behind, barriers, results),
            )
            for _ in range(procs)
        ]
        for worker in workers:
            worker.start()
        barriers[0].wait(timeout=600)
        pages = fresh_pages(str(work), fresh) if fresh else {}
        barriers[1].wait(timeout=600)
        held = time.process_time()
        reports = [results.get(timeout=600) for _ in workers]
        held = time.process_time() - held
        for worker in workers:
            worker.join(timeout=60)
        start = min(r["began"] for r in reports)
        seconds = max(r["ended"] for r in reports) - start
        total = count * procs
        ranges = [holder.queue_range(TOPIC, q) for q in range(QUEUES)]
        dense = all(low == 0 for low, _ in ranges) and sum(h for _, h in ranges) == total
        seen = 0
        for q, (low, high) in enumerate(ranges):
            at = low
            while at < high:
                got = holder.read(TOPIC, q, at, 1000)
                for i, message in enumerate(got):
                    dense = dense and message.queue_offset == at + i
                seen += len(got)
                at += len(got) or 1
        holder.close()
    finally:
        shutil.rmtree(work)
    print(
        json.dumps(
            {
                "checkout": Path(root).name,
                "kind": kind,
                "procs": procs,
                "body": len(body),
                "count_each": count,
                "msgs_per_s": round(total / seconds),
                "cpu_us_per_msg": [r["cpu_us_per_msg"] for r in reports],
                "thread_us_per_msg": [r["thread_us_per_msg"] for r in reports],
                "minor_faults": [r["minor_faults"] for r in reports],
                "run_queue_s": [r["run_queue_s"] for r in reports],
                "holder_cpu_us_per_msg": round(held / total * 1e6, 2),
                "native": [r["native"] for r in reports],
                "spans_s": [
                    [round(r["began"] - start, 3), round(r["ended"] - start, 3)] for r in reports
                ],
                "dense": dense and seen == total,
                "fresh_mb": fresh,
                "fresh_us_per_mb": pages.get("us_per_mb"),
                "behind": behind,
                "load": round(os.getloadavg()[0], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
