"""The machine's limits, measured in the same run as the figures they bound.

    .venv/bin/python bench/limits.py [--mib N] [--syncs N] [--dir PATH]

After one untimed warm-up write (the first file written in a fresh process pays for
page allocation), every figure is taken in ``--dir`` (default: a temporary directory on
the file system the benchmarks write to), with files deleted afterwards:

* ``write_buffered``: 1 MiB ``os.write`` calls into a new file, no sync (page cache);
* ``write_fsync_end``: the same, then one ``fdatasync`` inside the timed region:
  what a writer that flushes in the background can sustain;
* ``write_fsync_every_1mib`` and ``write_fsync_every_8mib``: an ``fdatasync`` after
  every 1 MiB or 8 MiB written: a group-committing writer of large batches;
* ``fdatasync_prealloc``: 1 KiB ``pwrite`` at increasing offsets of a file filled
  with zeroes beforehand, each followed by ``fdatasync`` (no size change, data only);
  each fdatasync figure also gives the calls' own time, entry to exit
  (``sync_us_mean``, ``sync_us_median``), the thread's run-queue wait inside them
  (``sync_rq_wait_us_mean``, from ``schedstat``) and their time without it
  (``sync_less_rq_us_mean``, ``_median``), beside the loop's rate (``per_s``);
* ``fdatasync_fallocated``: the same in a file reserved with ``posix_fallocate`` (as
  Tidemark's segments are): the first write to a reserved block also changes the
  file system's extent map, which the ``fdatasync`` then has to commit;
* ``fdatasync_append``: 1 KiB appended to a growing file, each followed by
  ``fdatasync`` (the file size changes, so the inode is written too);
* ``read_page_cache``: a file just written (so it is in the page cache) read back
  with 1 MiB ``readinto`` into one reused buffer: the most any reader in Python can
  get out of the page cache;
* ``python_group_commit_8_threads``: 8 threads, each writing 1 KiB at a time into a
  zero-filled file (a lock hands out the offsets, the ``pwrite`` is outside it) and
  waiting until a flush thread's ``fdatasync`` covers its write before the next one;
  no other work: a minimal group commit in one CPython process, the yardstick for
  Tidemark's 8 threads of single sync appends. Besides the fsyncs, each append
  costs a thread wake-up, and the interpreter runs one thread at a time.

MB means 1e6 bytes. Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

MIB = 1 << 20
DEFAULT_MIB = 512
DEFAULT_SYNCS = 2_000
SMALL = 1024


def _write(path: Path, total_mib: int, sync_every_mib: int | None, sync_end: bool) -> float:
    """Seconds to write ``total_mib`` MiB in 1 MiB writes, with the given syncs."""
    block = os.urandom(MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for i in range(1, total_mib + 1):
            os.write(fd, block)
            if sync_every_mib and i % sync_every_mib == 0:
                os.fdatasync(fd)
        if sync_end:
            os.fdatasync(fd)
        return time.perf_counter() - started
    finally:
        os.close(fd)


def _bandwidth(path: Path, total_mib: int, **sync) -> dict:
    seconds = _write(path, total_mib, **sync)
    path.unlink()
    return {"mb_per_s": round(total_mib * MIB / seconds / 1e6, 1), "mib": total_mib}


def _fdatasync_rate(path: Path, syncs: int, preallocated: str | None) -> dict:
    body = os.urandom(SMALL)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if preallocated == "zeroes":
            os.write(fd, bytes(syncs * SMALL))
        elif preallocated == "fallocate":
            os.posix_fallocate(fd, 0, syncs * SMALL)
        os.fsync(fd)
        clock = time.monotonic_ns
        stat = _schedstat()
        took = [0] * syncs  # each fdatasync, entry to exit
        queued = [0] * syncs  # the thread's run-queue wait inside it
        started = time.perf_counter()
        for i in range(syncs):
            if preallocated:
                os.pwrite(fd, body, i * SMALL)
            else:
                os.write(fd, body)
            waited = _run_delay(stat)
            entered = clock()
            os.fdatasync(fd)
            took[i] = clock() - entered
            queued[i] = _run_delay(stat) - waited
        seconds = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
        if stat is not None:
            os.close(stat)
    figure = {
        "per_s": round(syncs / seconds),
        "mean_ms": round(seconds / syncs * 1000, 3),
        "syncs": syncs,
        # Each fdatasync's own time, entry to exit (CLOCK_MONOTONIC around the call),
        # and the run-queue wait inside it (the thread woken at the flush's end and
        # waiting for a CPU: on a busy machine most of it); without that wait, the
        # disk's time and the kernel's work for the call.
        "sync_us_mean": round(sum(took) / syncs / 1000, 1),
        "sync_us_median": round(statistics.median(took) / 1000, 1),
    }
    if stat is not None:
        own = [whole - wait for whole, wait in zip(took, queued, strict=True)]
        figure["sync_rq_wait_us_mean"] = round(sum(queued) / syncs / 1000, 1)
        figure["sync_less_rq_us_mean"] = round(sum(own) / syncs / 1000, 1)
        figure["sync_less_rq_us_median"] = round(statistics.median(own) / 1000, 1)
    return figure


def _schedstat() -> int | None:
    """A descriptor on this thread's ``schedstat`` (None: the kernel keeps none)."""
    try:
        return os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None


def _run_delay(stat: int | None) -> int:
    """This thread's run-queue wait so far, ns (``schedstat``'s second field)."""
    if stat is None:
        return 0
    return int(os.pread(stat, 64, 0).split()[1])


def _group_commit(path: Path, threads: int, per_thread: int) -> dict:
    """Appends/s of ``threads`` threads of single 1 KiB writes, each waiting for a
    shared flush thread's fdatasync to cover it (the least work a group commit does)."""
    body = os.urandom(SMALL)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, bytes(threads * per_thread * SMALL))
    os.fsync(fd)
    cond = threading.Condition()
    state = {"tail": 0, "written": 0, "synced": 0, "waiting": 0, "stop": False}
    syncs = [0]

    def flush() -> None:
        while True:
            with cond:
                while not state["stop"] and (
                    not state["waiting"] or state["synced"] >= state["written"]
                ):
                    cond.wait()
                if state["stop"]:
                    return
                covered = state["written"]
            os.fdatasync(fd)
            syncs[0] += 1
            with cond:
                state["synced"] = covered
                cond.notify_all()

    def append() -> None:
        for _ in range(per_thread):
            with cond:
                at = state["tail"]
                state["tail"] += SMALL
            os.pwrite(fd, body, at)
            with cond:
                state["written"] = max(state["written"], at + SMALL)
                state["waiting"] += 1
                cond.notify_all()
                while state["synced"] < at + SMALL:
                    cond.wait()
                state["waiting"] -= 1

    flusher = threading.Thread(target=flush)
    flusher.start()
    workers = [threading.Thread(target=append) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - started
    with cond:
        state["stop"] = True
        cond.notify_all()
    flusher.join()
    os.close(fd)
    path.unlink()
    appends = threads * per_thread
    return {
        "per_s": round(appends / seconds),
        "unit": "appends/s",
        "appends_per_sync": round(appends / max(1, syncs[0]), 2),
        "threads": threads,
    }


def _read_page_cache(path: Path, total_mib: int) -> dict:
    _write(path, total_mib, None, False)
    buffer = bytearray(MIB)
    view = memoryview(buffer)
    best = 0.0
    try:
        with open(path, "rb", buffering=0) as file:
            for _ in range(3):  # the first pass may still fault pages in; keep the best
                file.seek(0)
                started = time.perf_counter()
                read = 0
                while True:
                    got = file.readinto(view)
                    if not got:
                        break
                    read += got
                best = max(best, read / (time.perf_counter() - started))
    finally:
        path.unlink()
    return {"mb_per_s": round(best / 1e6, 1), "mib": total_mib}


def measure(workdir: Path, total_mib: int = DEFAULT_MIB, syncs: int = DEFAULT_SYNCS) -> dict:
    """Every limit, measured in ``workdir``; a dict keyed by limit name."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "limits.tmp"
    _bandwidth(path, total_mib, sync_every_mib=None, sync_end=True)  # warm-up, not reported
    return {
        "write_buffered": _bandwidth(path, total_mib, sync_every_mib=None, sync_end=False),
        "write_fsync_end": _bandwidth(path, total_mib, sync_every_mib=None, sync_end=True),
        "write_fsync_every_1mib": _bandwidth(path, total_mib, sync_every_mib=1, sync_end=True),
        "write_fsync_every_8mib": _bandwidth(path, total_mib, sync_every_mib=8, sync_end=True),
        "fdatasync_prealloc": _fdatasync_rate(path, syncs, preallocated="zeroes"),
        "fdatasync_fallocated": _fdatasync_rate(path, syncs, preallocated="fallocate"),
        "fdatasync_append": _fdatasync_rate(path, syncs, preallocated=None),
        "read_page_cache": _read_page_cache(path, total_mib),
        "python_group_commit_8_threads": _group_commit(path, 8, max(100, syncs // 2)),
    }


def format_table(limits: dict) -> str:
    lines = [f"{'machine limit':<30} {'value':>12}  unit", "-" * 56]
    for name, figure in limits.items():
        if "mb_per_s" in figure:
            lines.append(f"{name:<30} {figure['mb_per_s']:>12,.1f}  MB/s")
        elif "unit" in figure:
            lines.append(f"{name:<30} {figure['per_s']:>12,}  {figure['unit']}")
        else:
            lines.append(
                f"{name:<30} {figure['per_s']:>12,}  fdatasync/s ({figure['mean_ms']} ms each)"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=DEFAULT_MIB, help="MiB per bandwidth figure")
    parser.add_argument("--syncs", type=int, default=DEFAULT_SYNCS, help="fdatasyncs per rate")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        limits = measure(Path(temp), args.mib, args.syncs)
    print(json.dumps({"limits": limits, "cpus": os.cpu_count()}))
    print(format_table(limits))


if __name__ == "__main__":
    main()
