"""Appends and offset commits side by side: each one's latency beside the other (issue 17,
case 13; issue 31's "commit p99 beside appends").

    .venv/bin/python bench/commit_beside_appends.py [--seconds S] [--dir PATH]

One thread appends single messages of 100 B (async flush) for S seconds and times each
call; a committer commits an offset (each one journaled and fsynced) as fast as it can and
times each commit. Six runs: appends alone, commits alone, then both at once with the
committer a thread of the appending process (through a store object of its own, then
through the appending one) and then another process. An offset commit
that held the store's write lock across its fsync made every append behind it wait for a
disk flush; an append path that held the pen long made every commit wait. Prints one JSON
line, then a table. Timings only: no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

TOPIC = "t"
BODY = b"x" * 100
GROUP = "busy"


def _config() -> StoreConfig:
    return StoreConfig(
        flush_mode="async", segment_bytes=256 << 20, index_slots=4096, index_entries=65536
    )


def _commits(path: str, stop, started, out=None) -> list[float]:
    """Commit until ``stop`` is set; the latency of each commit in ms (sent to ``out`` too)."""
    with MessageStore.open(path, _config()) as store:
        times = _commits_through(store, stop, started)
    if out is not None:
        out.send(times)
    return times


def _commits_through(store: MessageStore, stop, started) -> list[float]:
    times = []
    offset = 0
    started.set()
    while not stop.is_set():
        offset = 1 - offset  # a change every time: each commit is journaled and fsynced
        began = time.perf_counter()
        store.commit_offset(GROUP, TOPIC, 0, offset)
        times.append((time.perf_counter() - began) * 1000)
    return times


def _appends(store: MessageStore, seconds: float) -> list[float]:
    times = []
    clock = time.perf_counter
    end = clock() + seconds
    while True:
        began = clock()
        store.append(TOPIC, BODY)
        done = clock()
        times.append((done - began) * 1000)
        if done >= end:
            return times


def _summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered), 4),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)], 4),
        "max_ms": round(ordered[-1], 4),
    }


def _beside_a_thread(
    store: MessageStore, path: Path, seconds: float, same_object: bool = False
) -> tuple[list, list]:
    stop, started = threading.Event(), threading.Event()
    commits: list[float] = []

    def work() -> None:
        if same_object:
            commits.extend(_commits_through(store, stop, started))
        else:
            commits.extend(_commits(str(path), stop, started))

    committer = threading.Thread(target=work)
    committer.start()
    started.wait()
    appends = _appends(store, seconds)
    stop.set()
    committer.join()
    return appends, commits


def _beside_a_process(store: MessageStore, path: Path, seconds: float) -> tuple[list, list]:
    context = multiprocessing.get_context("spawn")
    stop, started = context.Event(), context.Event()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_commits, args=(str(path), stop, started, send))
    process.start()
    started.wait()
    appends = _appends(store, seconds)
    stop.set()
    commits = receive.recv()
    process.join()
    return appends, commits


def run(workdir: Path, seconds: float) -> dict:
    path = workdir / "store"
    shutil.rmtree(path, ignore_errors=True)
    report = {}
    with MessageStore.open(path, _config()) as store:
        store.create_topic(TOPIC, queues=1)
        store.append(TOPIC, BODY)
        report["appends_alone"] = _summary(_appends(store, seconds))
        stop, started = threading.Event(), threading.Event()
        threading.Timer(seconds, stop.set).start()
        report["commits_alone"] = _summary(_commits(str(path), stop, started))
        appends, commits = _beside_a_thread(store, path, seconds)
        report["appends_beside_a_committing_thread"] = _summary(appends)
        report["commits_beside_appends_same_process"] = _summary(commits)
        appends, commits = _beside_a_thread(store, path, seconds, same_object=True)
        report["appends_beside_a_committing_thread_same_object"] = _summary(appends)
        report["commits_beside_appends_same_object"] = _summary(commits)
        appends, commits = _beside_a_process(store, path, seconds)
        report["appends_beside_a_committing_process"] = _summary(appends)
        report["commits_beside_appends_other_process"] = _summary(commits)
    return report


def format_table(report: dict) -> str:
    lines = [
        f"{'(async appends of 100 B)':<48} {'count':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    ]
    for name, figure in report.items():
        lines.append(
            f"{name.replace('_', ' '):<48} {figure['count']:>9,} {figure['p50_ms']:>8.3f} "
            f"{figure['p99_ms']:>8.3f} {figure['max_ms']:>8.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="each run's length")
    parser.add_argument("--dir", type=Path, help="where to put the store (default: a temp dir)")
    args = parser.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="tidemark-commit-bench-"))
    try:
        report = run(workdir, args.seconds)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report))
    print(format_table(report))


if __name__ == "__main__":
    main()
