"""Append latency beside a committing consumer (issue 17, case 13).

    .venv/bin/python bench/commit_beside_appends.py [--appends N] [--dir PATH]

One thread appends single messages of 100 B (async flush) and times each call; the
same run is made alone, then beside a thread that commits an offset (each one fsynced)
as fast as it can, then beside another process doing the same. An offset commit that
held the store's write lock across its fsync made every append behind it wait for a
disk flush. Prints one JSON line, then a table. Timings only: no test asserts them.
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


def _config() -> StoreConfig:
    return StoreConfig(
        flush_mode="async", segment_bytes=256 << 20, index_slots=4096, index_entries=65536
    )


def _commit_forever(path: str, stop, started) -> None:
    with MessageStore.open(path, _config()) as store:
        offset = 0
        started.set()
        while not stop.is_set():
            offset = 1 - offset  # a change every time: each commit is journaled and fsynced
            store.commit_offset("busy", TOPIC, 0, offset)


def _appends(store: MessageStore, count: int) -> list[float]:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        store.append(TOPIC, BODY)
        times.append((time.perf_counter() - began) * 1000)
    return times


def _summary(times: list[float], commits: int | None) -> dict:
    ordered = sorted(times)
    return {
        "appends": len(times),
        "p50_ms": round(statistics.median(ordered), 4),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 4),
        "max_ms": round(ordered[-1], 4),
        "commits_meanwhile": commits,
    }


def run(workdir: Path, appends: int) -> dict:
    path = workdir / "store"
    shutil.rmtree(path, ignore_errors=True)
    report = {}
    with MessageStore.open(path, _config()) as store:
        store.create_topic(TOPIC, queues=1)
        store.append(TOPIC, BODY)
        report["alone"] = _summary(_appends(store, appends), None)

        stop, started = threading.Event(), threading.Event()
        before = len(store.offset_history("busy", limit=1_000_000))
        committer = threading.Thread(target=_commit_forever, args=(str(path), stop, started))
        committer.start()
        started.wait()
        times = _appends(store, appends)
        stop.set()
        committer.join()
        history = store.offset_history("busy", limit=1_000_000)
        report["beside_a_committing_thread"] = _summary(times, len(history) - before)

        context = multiprocessing.get_context("spawn")
        stop, started = context.Event(), context.Event()
        process = context.Process(target=_commit_forever, args=(str(path), stop, started))
        process.start()
        started.wait()
        times = _appends(store, appends)
        stop.set()
        process.join()
        report["beside_a_committing_process"] = _summary(times, None)
    return report


def format_table(report: dict) -> str:
    lines = [f"{'appends of 100 B (async)':<32} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"]
    for name, figure in report.items():
        lines.append(
            f"{name.replace('_', ' '):<32} {figure['p50_ms']:>8.3f} {figure['p99_ms']:>8.3f} "
            f"{figure['max_ms']:>8.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, help="where to put the store (default: a temp dir)")
    args = parser.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="tidemark-commit-bench-"))
    try:
        report = run(workdir, args.appends)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report))
    print(format_table(report))


if __name__ == "__main__":
    main()
