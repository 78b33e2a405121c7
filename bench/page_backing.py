"""Whether a second writer gets more of this machine's new page-cache pages than one:
bare ``pwrite``s, no Tidemark (issue 31's two-process target; docs/PERFORMANCE.md,
procs31-s52 and procs31-s53):

    python bench/page_backing.py [--mb=400] [--rounds=3] [--pause=10] [--dir=/tmp]

Each round, after ``--pause`` seconds (the pages the last run freed may then be handed
back to the host: this VM's balloon reports free pages), one writer writes 2 x MB into
a new file, then, after another pause, two writer processes write MB each into a file
of their own at once (the order of the two turns each round). A write is 520 KB, a
1 KiB ``append_batch`` of 500's records, at the file's end, as the log's ``pwrite``
of a batch. Printed, a line a run: MB/s together (all bytes from the first writer's
start to the last one's end), each writer's MB/s and thread CPU per MB (µs), and its
minor page faults. The files are deleted after each run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time

CHUNK = 520_000


def _write(path: str, megabytes: int, barrier, results) -> None:
    data = os.urandom(CHUNK)
    total = megabytes * 1_000_000
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        barrier.wait()
        began, cpu = time.monotonic(), time.thread_time()
        at = 0
        while at < total:
            at += os.pwrite(fd, data, at)
        cpu = time.thread_time() - cpu
        ended = time.monotonic()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    finally:
        os.close(fd)
        os.unlink(path)
    results.put({"began": began, "ended": ended, "bytes": at, "cpu": cpu, "faults": faults})


def run(directory: str, writers: int, megabytes: int) -> dict:
    """``writers`` processes writing ``megabytes`` each at once; what they did."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(writers), context.Queue()
    procs = [
        context.Process(
            target=_write,
            args=(os.path.join(directory, f"w{i}"), megabytes, barrier, results),
        )
        for i in range(writers)
    ]
    for proc in procs:
        proc.start()
    done = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    wall = max(d["ended"] for d in done) - min(d["began"] for d in done)
    mb = sum(d["bytes"] for d in done) / 1e6
    return {
        "writers": writers,
        "mb_each": megabytes,
        "mb_s": round(mb / wall),
        "each_mb_s": [round(d["bytes"] / 1e6 / (d["ended"] - d["began"])) for d in done],
        "cpu_us_per_mb": [round(d["cpu"] / (d["bytes"] / 1e6) * 1e6) for d in done],
        "minor_faults": [d["faults"] for d in done],
        "load": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str]) -> None:
    options = dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--"))
    megabytes = int(options.get("mb", 400))
    rounds = int(options.get("rounds", 3))
    pause = float(options.get("pause", 10))
    with tempfile.TemporaryDirectory(dir=options.get("dir")) as directory:
        for turn in range(rounds):
            order = [(1, 2 * megabytes), (2, megabytes)]
            for writers, each in order if turn % 2 == 0 else order[::-1]:
                time.sleep(pause)
                found = run(directory, writers, each)
                print(json.dumps({"round": turn, "time": time.strftime("%H:%M:%S"), **found}))
                sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
