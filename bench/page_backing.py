"""Whether a second writer gets more of this machine's new page-cache pages than one:
bare ``pwrite``s, no Tidemark (issue 31's two-process target; docs/PERFORMANCE.md,
procs31-s52 and procs31-s53):

    python bench/page_backing.py [--mb=400] [--rounds=3] [--pause=10] [--dir=/tmp]
                                 [--sync=MB [--drop]]

Each round, after ``--pause`` seconds (the pages the last run freed may then be handed
back to the host: this VM's balloon reports free pages), one writer writes 2 x MB into
a new file, then, after another pause, two writer processes write MB each into a file
of their own at once (the order of the two turns each round). A write is 520 KB, a
1 KiB ``append_batch`` of 500's records, at the file's end, as the log's ``pwrite``
of a batch. Printed, a line a run: MB/s together (all bytes from the first writer's
start to the last one's end), each writer's MB/s and thread CPU per MB (µs), its minor
page faults, and the machine's steal and idle time over the run (from the writers'
start, spawning included). ``--sync=MB``: each writer fdatasyncs every MB written (as
the flusher does); ``--drop``: each run also done with the pages a sync step behind
let go of after each fdatasync (``POSIX_FADV_DONTNEED``: freed, they are the next
ones the writer's pages are made of, before the balloon reports them to the host);
``pwrite_us_per_mb`` is the pwrites' own thread CPU. The files are deleted after each run.
A JSON line a run as it ends, then a table of them all.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time

CHUNK = 520_000


def _write(path: str, megabytes: int, step: int, drop: bool, barrier, results) -> None:
    data = os.urandom(CHUNK)
    total = megabytes * 1_000_000
    step_bytes, synced, written = step * 1_000_000, 0, 0.0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        barrier.wait()
        began, cpu = time.monotonic(), time.thread_time()
        at = 0
        while at < total:
            mark = time.thread_time()
            at += os.pwrite(fd, data, at)
            written += time.thread_time() - mark
            if step_bytes and at - synced >= step_bytes:
                # As the flusher: what was written made durable; with ``drop``, the
                # pages a step behind that let go of (clean now: freed at once).
                os.fdatasync(fd)
                if drop and synced > step_bytes:
                    os.posix_fadvise(fd, 0, synced - step_bytes, os.POSIX_FADV_DONTNEED)
                synced = at
        cpu = time.thread_time() - cpu
        ended = time.monotonic()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    finally:
        os.close(fd)
        os.unlink(path)
    results.put(
        {
            "began": began,
            "ended": ended,
            "bytes": at,
            "cpu": cpu,
            "pwrite_cpu": written,
            "faults": faults,
        }
    )


def fresh_pages(directory: str, megabytes: int) -> dict:
    """Write ``megabytes`` into a new file (520 KB ``pwrite``s, as above), then delete it:
    what a MB of new page-cache pages costs this thread now (µs of its CPU, the
    host's backing of pages no one freed lately among it), and ``megabytes`` of freed,
    backed pages left for whatever writes next (bench/two_processes.py's warm-up: each
    run starts from the same page state, whatever the run before it freed)."""
    if megabytes <= 0:
        return {}
    data = os.urandom(CHUNK)
    total = megabytes * 1_000_000
    path = os.path.join(directory, "fresh-pages")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        cpu, at = time.thread_time(), 0
        while at < total:
            at += os.pwrite(fd, data, at)
        cpu = time.thread_time() - cpu
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    finally:
        os.close(fd)
        os.unlink(path)  # its pages (dirty, never written back) freed at once
    return {"us_per_mb": round(cpu / (at / 1e6) * 1e6), "mb": megabytes, "faults": faults}


def _cpu_times() -> list[int]:
    """The machine's CPU time by kind (/proc/stat's ``cpu`` line), in clock ticks."""
    with open("/proc/stat") as stat:
        return [int(n) for n in stat.readline().split()[1:]]


def run(directory: str, writers: int, megabytes: int, step: int = 0, drop: bool = False) -> dict:
    """``writers`` processes writing ``megabytes`` each at once; what they did, and the
    machine's steal time meanwhile (the host's share of the vCPUs: its own page faults
    among it)."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(writers), context.Queue()
    procs = [
        context.Process(
            target=_write,
            args=(os.path.join(directory, f"w{i}"), megabytes, step, drop, barrier, results),
        )
        for i in range(writers)
    ]
    for proc in procs:
        proc.start()
    before = _cpu_times()
    done = [results.get() for _ in procs]
    after = _cpu_times()
    for proc in procs:
        proc.join()
    tick = os.sysconf("SC_CLK_TCK")
    wall = max(d["ended"] for d in done) - min(d["began"] for d in done)
    mb = sum(d["bytes"] for d in done) / 1e6
    return {
        "writers": writers,
        "mb_each": megabytes,
        "mb_s": round(mb / wall),
        "each_mb_s": [round(d["bytes"] / 1e6 / (d["ended"] - d["began"])) for d in done],
        "cpu_us_per_mb": [round(d["cpu"] / (d["bytes"] / 1e6) * 1e6) for d in done],
        "pwrite_us_per_mb": [round(d["pwrite_cpu"] / (d["bytes"] / 1e6) * 1e6) for d in done],
        "minor_faults": [d["faults"] for d in done],
        # user, nice, system, idle, iowait, irq, softirq, steal (s, both vCPUs)
        "steal_s": round((after[7] - before[7]) / tick, 2),
        "idle_s": round((after[3] - before[3]) / tick, 2),
        "load": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=400, help="MB each of two writers writes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=10, help="seconds before each run")
    parser.add_argument("--dir", help="where the files go (default: a temporary directory)")
    parser.add_argument("--sync", type=int, default=0, help="fdatasync every this many MB")
    parser.add_argument("--drop", action="store_true", help="each run also with --sync's drop")
    args = parser.parse_args(argv)
    drops = [False, True] if args.drop else [False]
    runs = []
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for turn in range(args.rounds):
            order = [(1, 2 * args.mb), (2, args.mb)]
            for writers, each in order if turn % 2 == 0 else order[::-1]:
                for drop in drops if turn % 2 == 0 else drops[::-1]:
                    time.sleep(args.pause)
                    found = run(directory, writers, each, args.sync, drop)
                    when = time.strftime("%H:%M:%S")
                    runs.append({"round": turn, "time": when, "drop": drop, **found})
                    print(json.dumps(runs[-1]))
                    sys.stdout.flush()
    print(format_table(runs))


def format_table(runs: list[dict]) -> str:
    """A line a run: writers, MB/s together and each, thread CPU µs a MB, faults."""
    lines = [
        f"{'round':>5} {'time':>8} {'drop':>5} {'writers':>7} {'MB/s':>6} "
        f"{'each MB/s':>12} {'CPU µs/MB':>14} {'faults':>16} {'steal s':>7}",
        "-" * 90,
    ]
    for r in runs:
        each = "/".join(map(str, r["each_mb_s"]))
        cpu = "/".join(map(str, r["cpu_us_per_mb"]))
        faults = "/".join(map(str, r["minor_faults"]))
        lines.append(
            f"{r['round']:>5} {r['time']:>8} {str(r['drop']):>5} {r['writers']:>7} "
            f"{r['mb_s']:>6} {each:>12} {cpu:>14} {faults:>16} {r['steal_s']:>7}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
