"""What one fdatasync costs after small writes, by how the written region was reserved.

    .venv/bin/python bench/fdatasync_extents.py [--dir PATH] [--rounds N] [--record B]
        [--group N] [--pairs N] [--threads]

Each round writes ``--group`` records of ``--record`` bytes at the file's tail (one
after the other, as a group commit's waiters would) and then calls ``fdatasync``; only
the ``fdatasync`` is timed. The modes, run interleaved (one block of rounds of each in
turn, ``--pairs`` times) so that the disk's minute-to-minute changes fall on all alike:

* ``fallocated``: a file reserved with ``posix_fallocate`` (unwritten extents: the
  first writeback of each block converts it, a change of the extent tree the
  ``fdatasync`` must make durable: a journal commit, or without a journal a write of
  the metadata block), written with ``pwrite``;
* ``zeroed``: a file filled with zeros and fsynced beforehand (written extents);
* ``appended``: a growing file (``write`` at its end: the size changes each round);
* ``mmap_fallocated``: the ``fallocated`` file written through a shared mapping
  (stores; each page cleaned by the last ``fdatasync`` faults again: ``page_mkwrite``);
* ``mmap_zeroed``: the ``zeroed`` file written through a shared mapping;
* ``zero_ahead``: a ``posix_fallocate`` file whose region ahead of the tail is written
  with zeros and made durable every ``--ahead`` bytes, untimed (what a pretoucher off
  the append path would do), written through a shared mapping.

With ``--threads``, also 8 threads (one record each, then a wait) and a flush thread
that fdatasyncs what was written, as the engine's group commit does: messages per
fdatasync and the fdatasync's own time. Prints a table of µs per fdatasync.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

MODES = ("fallocated", "zeroed", "appended", "mmap_fallocated", "mmap_zeroed", "zero_ahead")


class Target:
    def __init__(self, path: Path, mode: str, size: int, ahead: int) -> None:
        self.mode = mode
        self.size = size
        self.ahead = ahead
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        if mode in ("fallocated", "mmap_fallocated", "zero_ahead"):
            os.posix_fallocate(self.fd, 0, size)
        elif mode in ("zeroed", "mmap_zeroed"):
            zeros = bytes(1 << 20)
            for at in range(0, size, len(zeros)):
                os.pwrite(self.fd, zeros, at)
        os.fsync(self.fd)
        self.map = None
        if mode.startswith("mmap") or mode == "zero_ahead":
            self.map = mmap.mmap(self.fd, size)
        self.tail = 0
        self.zeroed_to = 0
        self.zeros = bytes(ahead)

    def write(self, body: bytes) -> int:
        at = self.tail
        self.tail += len(body)
        if self.map is not None:
            self.map[at : at + len(body)] = body
        elif self.mode == "appended":
            os.write(self.fd, body)
        else:
            os.pwrite(self.fd, body, at)
        return self.tail

    def before_round(self) -> None:
        """zero_ahead: keep at least ``ahead`` bytes past the tail written (untimed)."""
        if self.mode == "zero_ahead" and self.zeroed_to < self.tail + self.ahead:
            start = self.zeroed_to
            end = min(self.size, start + 2 * self.ahead)
            os.pwrite(self.fd, bytes(end - start), start)
            os.fdatasync(self.fd)
            self.zeroed_to = end

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
        os.close(self.fd)


def sequential(target: Target, rounds: int, record: int, group: int) -> list[tuple]:
    """(wall µs, this thread's CPU µs, its voluntary context switches) of each fdatasync."""
    body = os.urandom(record)
    times = []
    for _ in range(rounds):
        target.before_round()
        for _ in range(group):
            target.write(body)
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        cpu = time.thread_time_ns()
        started = time.perf_counter_ns()
        os.fdatasync(target.fd)
        wall = time.perf_counter_ns() - started
        cpu = time.thread_time_ns() - cpu
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - switches
        times.append((wall / 1000, cpu / 1000, switches))
    return times


def threaded(target: Target, per_thread: int, record: int, threads: int) -> tuple[list, int]:
    """8 appenders, one record each then a wait for a flush thread's fdatasync."""
    body = os.urandom(record)
    cond = threading.Condition()
    state = {"written": 0, "synced": 0, "stop": False}
    times: list[float] = []
    messages = [0]

    def flush() -> None:
        while True:
            with cond:
                while not state["stop"] and state["synced"] >= state["written"]:
                    cond.wait()
                if state["stop"]:
                    return
                covered = state["written"]
            target.before_round()
            started = time.perf_counter_ns()
            os.fdatasync(target.fd)
            times.append((time.perf_counter_ns() - started) / 1000)
            with cond:
                state["synced"] = covered
                cond.notify_all()

    def append() -> None:
        for _ in range(per_thread):
            with cond:
                end = target.write(body)
                state["written"] = max(state["written"], end)
                messages[0] += 1
                cond.notify_all()
                while state["synced"] < end:
                    cond.wait()

    flusher = threading.Thread(target=flush)
    flusher.start()
    workers = [threading.Thread(target=append) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    with cond:
        state["stop"] = True
        cond.notify_all()
    flusher.join()
    return times, messages[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--record", type=int, default=64)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--ahead", type=int, default=256 << 10)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--threads", action="store_true")
    args = parser.parse_args()
    modes = args.modes.split(",")
    size = 64 << 20
    results: dict[str, list[tuple]] = {mode: [] for mode in modes}
    threaded_results: dict[str, list] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        path = Path(directory) / "f"
        for _ in range(args.pairs):
            for mode in modes:
                target = Target(path, mode, size, args.ahead)
                try:
                    results[mode] += sequential(target, args.rounds, args.record, args.group)
                finally:
                    target.close()
                    path.unlink()
                if args.threads:
                    target = Target(path, mode, size, args.ahead)
                    try:
                        times, messages = threaded(target, args.rounds, args.record, 8)
                        threaded_results[mode].append((times, messages))
                    finally:
                        target.close()
                        path.unlink()
    print(f"{args.group} × {args.record} B a round, {args.rounds} rounds × {args.pairs}")
    print(
        f"{'mode':18} {'wall median µs':>15} {'wall mean µs':>13} "
        f"{'CPU median µs':>14} {'CPU mean µs':>12} {'sleeps/sync':>12}"
    )
    for mode in modes:
        walls = [wall for wall, _, _ in results[mode]]
        cpus = [cpu for _, cpu, _ in results[mode]]
        sleeps = statistics.fmean(s for _, _, s in results[mode])
        print(
            f"{mode:18} {statistics.median(walls):15.1f} {statistics.fmean(walls):13.1f} "
            f"{statistics.median(cpus):14.1f} {statistics.fmean(cpus):12.1f} {sleeps:12.2f}"
        )
    if args.threads:
        print(f"\n8 threads × {args.rounds} records of {args.record} B, a flush thread")
        print(f"{'mode':18} {'median µs':>10} {'mean µs':>10} {'msgs/sync':>10}")
        for mode in modes:
            all_times = [t for times, _ in threaded_results[mode] for t in times]
            messages = sum(m for _, m in threaded_results[mode])
            print(
                f"{mode:18} {statistics.median(all_times):10.1f} "
                f"{statistics.fmean(all_times):10.1f} {messages / len(all_times):10.2f}"
            )


if __name__ == "__main__":
    main()
