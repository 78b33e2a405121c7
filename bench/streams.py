"""Event streams benchmark: expected-version appends, stream reads, opening after a crash
and memory, beside the plain SQLite way of doing it.

    .venv/bin/python bench/streams.py [--streams 1000000] [--events 10] [--body 100]
                                      [--batch-streams 100] [--reads 20000]
                                      [--cache 100000] [--dir PATH] [--rebuild]
                                      [--skip-sqlite]

Tidemark (async flush, the default settings): one stream topic of 8 queues; each
stream's events are appended together, expecting version 0, under one command id
(batched by stream), streams in random order: ``--batch-streams`` streams per call of
``append_to_streams`` (each stream checked on its own), or with ``--batch-streams 1``
one ``append_events`` call per stream. The appender runs in a child
process, which reports its figures and its memory (RssAnon, sampled every tenth of the
streams) and is then SIGKILLed: the parent times ``MessageStore.open`` of the crashed
store (recovery, the event index cut and brought up to the tail, the cache preloaded),
then ``read_stream`` of random streams (all their events), after ``gc.freeze()`` as a
console process does; each read's wall-clock and CPU (thread) time are kept.
``--rebuild`` also deletes the event index and times the open that rebuilds it from the
log.

SQLite (WAL, ``synchronous=NORMAL``, as bench/baseline_sqlite.py): a table of events
with UNIQUE(stream, version) and UNIQUE(stream, command_id); each stream's append is
a savepoint that reads the stream's version (``SELECT max(version)``), compares it with
the expected one and inserts the events, the command id on the first (the others'
NULL, which UNIQUE lets repeat); one transaction per ``--batch-streams`` streams. Reads
select a stream's events by version. The same streams, order and bodies.

Prints one JSON line, then a table. Rates are events per second of wall-clock time and
of the process's CPU time (the machine may be shared: CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

TOPIC = "accounts"
QUEUES = 8
EVENT_TYPE = "Deposited"
TARGETS = {
    "append_ratio_to_sqlite": 4.0,
    "read_stream_p99_ms": 1.0,
    "open_after_crash_s": 10.0,
}


def _stream_ids(count: int, seed: int = 7) -> list[str]:
    ids = [f"account-{n:07d}" for n in range(count)]
    random.Random(seed).shuffle(ids)
    return ids


def _bodies(events: int, size: int) -> list[bytes]:
    rng = random.Random(11)
    return [rng.randbytes(size) for _ in range(events)]


def _rss_anon_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ----------------------------------------------------------------------- Tidemark


def append_child(
    path: str, streams: int, events: int, body: int, cache: int, batch: int, out: str
) -> None:
    """In a child: append every stream's events, report, then wait to be killed."""
    ids = _stream_ids(streams)
    bodies = _bodies(events, body)
    config = StoreConfig(flush_mode="async", stream_cache_streams=cache)
    store = MessageStore.open(path, config)
    store.create_stream_topic(TOPIC, queues=QUEUES)
    memory = [{"streams": 0, "rss_anon_kb": _rss_anon_kb()}]
    step = max(1, streams // 10)
    wall = time.perf_counter()
    cpu = time.process_time()
    append = store.append_events
    for first in range(0, streams, batch):
        chunk = ids[first : first + batch]
        if batch == 1:
            append(TOPIC, chunk[0], bodies, 0, f"cmd-{chunk[0]}", EVENT_TYPE)
        else:
            outcomes = store.append_to_streams(
                TOPIC, [(stream, bodies, 0, f"cmd-{stream}", EVENT_TYPE) for stream in chunk]
            )
            assert all(type(outcome) is list for outcome in outcomes)
        number = first + len(chunk)
        if number // step > (number - len(chunk)) // step:
            memory.append({"streams": number, "rss_anon_kb": _rss_anon_kb()})
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    result = {
        "events": streams * events,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_s": round(streams * events / wall),
        "events_per_cpu_s": round(streams * events / cpu),
        "memory": memory,
        "cached_streams": store.stats(topics=False).streams.cached_streams,
    }
    Path(out).write_text(json.dumps(result))
    while True:  # the parent kills this process: a crash, not a close
        time.sleep(1)


def run_tidemark(args: argparse.Namespace, workdir: Path) -> dict:
    path = workdir / "tidemark"
    out = workdir / "append.json"
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", str(path), str(args.streams), str(args.events),
         str(args.body), str(args.cache), str(args.batch_streams), str(out)],
    )  # fmt: skip
    while not out.exists():
        if child.poll() is not None:
            raise SystemExit(f"the appender exited with {child.returncode}")
        time.sleep(0.2)
    appended = json.loads(out.read_text())
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    config = StoreConfig(flush_mode="async", stream_cache_streams=args.cache)
    began = time.perf_counter()
    store = MessageStore.open(path, config)
    open_s = time.perf_counter() - began
    recovery = store.last_recovery
    ids = _stream_ids(args.streams)
    sample = random.Random(3).sample(ids, min(args.reads, len(ids)))
    gc.collect()
    gc.freeze()  # as a console process does after its first answer (TIDEMARK_GC_FREEZE)
    latencies = []
    cpu = []
    read = store.read_stream
    for stream in sample:
        began, began_cpu = time.perf_counter(), time.thread_time()
        events = read(TOPIC, stream)
        cpu.append((time.thread_time() - began_cpu) * 1000)
        latencies.append((time.perf_counter() - began) * 1000)
        assert len(events) == args.events, (stream, len(events))
    reads = {
        "count": len(latencies),
        "p50_ms": round(statistics.median(latencies), 4),
        "p99_ms": round(_percentile(latencies, 0.99), 4),
        "max_ms": round(max(latencies), 4),
        "cpu_p50_ms": round(statistics.median(cpu), 4),
        "cpu_p99_ms": round(_percentile(cpu, 0.99), 4),
    }
    memory_after_reads = _rss_anon_kb()
    index_bytes = (path / "consumequeue" / TOPIC / "events").stat().st_blocks * 512
    log_bytes = sum(p.stat().st_blocks * 512 for p in (path / "commitlog").iterdir())
    store.close()
    result = {
        "append": appended,
        "open_after_crash": {
            "seconds": round(open_s, 2),
            "clean_shutdown": recovery.clean_shutdown,
            "scanned_bytes": recovery.scanned_bytes,
            "event_indexes": recovery.event_indexes,
        },
        "read_stream": reads,
        "reader_rss_anon_kb": memory_after_reads,
        "disk": {"event_index_bytes": index_bytes, "commit_log_bytes": log_bytes},
    }
    if args.rebuild:
        (path / "consumequeue" / TOPIC / "events").unlink()
        began = time.perf_counter()
        with MessageStore.open(path, config) as store:
            result["open_rebuilding_the_index_s"] = round(time.perf_counter() - began, 2)
            result["rebuilt_events"] = store.last_recovery.event_indexes[0]["events_indexed"]
    return result


# ------------------------------------------------------------------------- SQLite

SCHEMA = """
CREATE TABLE events(
    stream TEXT NOT NULL,
    version INTEGER NOT NULL,
    command_id TEXT,
    event_type TEXT,
    store_time_ms INTEGER NOT NULL,
    body BLOB NOT NULL,
    UNIQUE(stream, version),
    UNIQUE(stream, command_id)
)
"""


def run_sqlite(args: argparse.Namespace, workdir: Path) -> dict:
    path = workdir / "events.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(SCHEMA)
    ids = _stream_ids(args.streams)
    bodies = _bodies(args.events, args.body)
    step = max(1, args.streams // 10)
    progress = []
    wall = time.perf_counter()
    cpu = time.process_time()
    execute = conn.execute
    insert = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)"
    batch = args.batch_streams
    for number, stream in enumerate(ids, 1):
        command = f"cmd-{stream}"
        if number % batch == 1 or batch == 1:
            execute("BEGIN IMMEDIATE")
        execute("SAVEPOINT one")
        current = execute("SELECT max(version) FROM events WHERE stream = ?", (stream,))
        version = current.fetchone()[0] or 0
        if version != 0:  # the expected version: refused alone
            execute("ROLLBACK TO one")
            raise AssertionError(f"{stream} is at {version}")
        now = time.time_ns() // 1_000_000
        conn.executemany(
            insert,
            [(stream, version + i + 1, None if i else command, EVENT_TYPE, now, body)
             for i, body in enumerate(bodies)],
        )  # fmt: skip
        execute("RELEASE one")
        if number % batch == 0 or number == len(ids):
            execute("COMMIT")
        if number % step == 0:
            progress.append(
                {"streams": number, "events_per_s": round(number * args.events /
                                                          (time.perf_counter() - wall))}
            )  # fmt: skip
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    conn.close()
    reader = sqlite3.connect(path)
    sample = random.Random(3).sample(ids, min(args.reads, len(ids)))
    latencies = []
    select = "SELECT version, command_id, event_type, store_time_ms, body FROM events " \
             "WHERE stream = ? AND version >= ? ORDER BY version LIMIT ?"  # fmt: skip
    for stream in sample:
        began = time.perf_counter()
        rows = reader.execute(select, (stream, 1, 100)).fetchall()
        latencies.append((time.perf_counter() - began) * 1000)
        assert len(rows) == args.events
    reader.close()
    size = sum(
        Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").exists()
    )
    return {
        "append": {
            "events": args.streams * args.events,
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "events_per_s": round(args.streams * args.events / wall),
            "events_per_cpu_s": round(args.streams * args.events / cpu),
            "progress": progress,
        },
        "read_stream": {
            "count": len(latencies),
            "p50_ms": round(statistics.median(latencies), 4),
            "p99_ms": round(_percentile(latencies, 0.99), 4),
        },
        "disk_bytes": size,
    }


# -------------------------------------------------------------------------- report


def _table(report: dict) -> str:
    t = report["tidemark"]
    s = report.get("sqlite")
    rows = [("figure", "Tidemark", "SQLite", "ratio", "target")]

    def ratio(a: float, b: float | None) -> str:
        return f"{a / b:.2f}x" if b else "-"

    a, sa = t["append"], (s or {}).get("append", {})
    rows.append(("append events/s (wall)", f"{a['events_per_s']:,}",
                 f"{sa.get('events_per_s', 0):,}", ratio(a["events_per_s"],
                 sa.get("events_per_s")), "≥ 4x SQLite"))  # fmt: skip
    rows.append(("append events/CPU s", f"{a['events_per_cpu_s']:,}",
                 f"{sa.get('events_per_cpu_s', 0):,}", ratio(a["events_per_cpu_s"],
                 sa.get("events_per_cpu_s")), "≥ 4x SQLite"))  # fmt: skip
    r, sr = t["read_stream"], (s or {}).get("read_stream", {})
    rows.append(("read_stream p50 ms", f"{r['p50_ms']}", f"{sr.get('p50_ms', '-')}", "", ""))
    rows.append(("read_stream p99 ms", f"{r['p99_ms']}", f"{sr.get('p99_ms', '-')}", "",
                 "≤ 1 ms"))  # fmt: skip
    rows.append(("read_stream p99 ms of CPU", f"{r['cpu_p99_ms']}", "", "", ""))
    rows.append(("open after a crash s", f"{t['open_after_crash']['seconds']}", "", "", "≤ 10 s"))
    if "open_rebuilding_the_index_s" in t:
        rows.append(("open rebuilding the index s", f"{t['open_rebuilding_the_index_s']}",
                     "", "", ""))  # fmt: skip
    memory = a["memory"]
    rows.append(("appender RssAnon MB (10%→100%)",
                 f"{memory[1]['rss_anon_kb'] / 1024:.0f}→{memory[-1]['rss_anon_kb'] / 1024:.0f}",
                 "", "", f"cache {report['cache']:,} streams"))  # fmt: skip
    rows.append(("reader RssAnon MB", f"{t['reader_rss_anon_kb'] / 1024:.0f}", "", "", ""))
    rows.append(("event index / log MB",
                 f"{t['disk']['event_index_bytes'] / 1e6:.0f} / "
                 f"{t['disk']['commit_log_bytes'] / 1e6:.0f}",
                 f"{(s or {}).get('disk_bytes', 0) / 1e6:.0f}", "", ""))  # fmt: skip
    widths = [max(len(str(row[i])) for row in rows) for i in range(5)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
                     for row in rows)  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        path, streams, events, body, cache, batch, out = sys.argv[2:9]
        append_child(path, int(streams), int(events), int(body), int(cache), int(batch), out)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--body", type=int, default=100)
    parser.add_argument("--batch-streams", type=int, default=100)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--cache", type=int, default=StoreConfig.stream_cache_streams)
    parser.add_argument("--dir", help="work directory (default: a temporary one, deleted)")
    parser.add_argument("--rebuild", action="store_true", help="also time an index rebuild")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-streams-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        report = {
            "streams": args.streams,
            "events_per_stream": args.events,
            "body_bytes": args.body,
            "batch_streams": args.batch_streams,
            "cache": args.cache,
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "targets": TARGETS,
            "tidemark": run_tidemark(args, workdir),
        }
        if not args.skip_sqlite:
            report["sqlite"] = run_sqlite(args, workdir)
            report["append_ratio_wall"] = round(
                report["tidemark"]["append"]["events_per_s"]
                / report["sqlite"]["append"]["events_per_s"], 2)  # fmt: skip
            report["append_ratio_cpu"] = round(
                report["tidemark"]["append"]["events_per_cpu_s"]
                / report["sqlite"]["append"]["events_per_cpu_s"], 2)  # fmt: skip
        report["load_average_after"] = os.getloadavg()
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report))
    print(_table(report))


if __name__ == "__main__":
    main()
