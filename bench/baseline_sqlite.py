"""SQLite baseline for the Tidemark benchmark.

This is the design EQueue moved away from: messages kept in a database table
(SQLite, WAL, ``synchronous=NORMAL``, ``batch`` rows per transaction) and consumed by
range selects over ``(topic, queue, queue_offset)``. ``bench/engine.py`` compares every
Tidemark figure with the numbers produced here.

Methodology, per body size:

* a fresh database file in ``workdir`` (``journal_mode=WAL``, ``synchronous=NORMAL``);
* message bodies (random bytes) and keys are generated before the clock starts;
* append: messages go round-robin to 4 queues of one topic, ``batch`` rows per
  ``BEGIN``/``executemany``/``COMMIT``; ``store_time_ms`` is stamped per batch inside the
  timed loop, as a real store would do at append time;
* the writer connection is closed (which checkpoints the WAL) outside the timed region;
* read: a new connection reads every message back in order, ``read_batch`` rows per
  query per queue (queues visited round-robin), fetching the rows into Python;
* the database files are deleted afterwards.

MB means 1e6 bytes of message body; keys, tags and other columns are not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sqlite3
import tempfile
import time

TOPIC = "bench"
TAG = "TagA"
QUEUES = 4

SCHEMA = """
CREATE TABLE messages(
    topic TEXT,
    queue INTEGER,
    queue_offset INTEGER,
    store_time_ms INTEGER,
    key TEXT,
    tag TEXT,
    body BLOB,
    PRIMARY KEY(topic, queue, queue_offset)
) WITHOUT ROWID
"""

INSERT_SQL = (
    "INSERT INTO messages(topic, queue, queue_offset, store_time_ms, key, tag, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)

SELECT_SQL = (
    "SELECT topic, queue, queue_offset, store_time_ms, key, tag, body FROM messages "
    "WHERE topic=? AND queue=? AND queue_offset >= ? AND queue_offset < ? "
    "ORDER BY queue_offset"
)


def _connect(path: pathlib.Path) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode with WAL journaling and ``synchronous=NORMAL``."""
    conn = sqlite3.connect(path, isolation_level=None)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise RuntimeError(f"could not enable WAL journal mode (got {mode!r})")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _remove_db(path: pathlib.Path) -> None:
    """Delete the database file and its WAL/shared-memory side files, if present."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        pathlib.Path(f"{path}{suffix}").unlink(missing_ok=True)


def _append(conn: sqlite3.Connection, bodies: list[bytes], keys: list[str], batch: int) -> float:
    """Insert all messages round-robin over the queues; return elapsed seconds."""
    count = len(bodies)
    start = time.perf_counter()
    for lo in range(0, count, batch):
        hi = min(lo + batch, count)
        now_ms = time.time_ns() // 1_000_000
        rows = [
            (TOPIC, i % QUEUES, i // QUEUES, now_ms, keys[i], TAG, bodies[i]) for i in range(lo, hi)
        ]
        conn.execute("BEGIN")
        conn.executemany(INSERT_SQL, rows)
        conn.execute("COMMIT")
    return time.perf_counter() - start


def _read(conn: sqlite3.Connection, count: int, read_batch: int) -> tuple[float, int, int]:
    """Read every message back by range selects; return (seconds, rows, body bytes)."""
    per_queue = [count // QUEUES + (1 if q < count % QUEUES else 0) for q in range(QUEUES)]
    longest = max(per_queue)
    rows_read = 0
    bytes_read = 0
    start = time.perf_counter()
    for lo in range(0, longest, read_batch):
        hi = lo + read_batch
        for queue in range(QUEUES):
            if lo >= per_queue[queue]:
                continue
            rows = conn.execute(SELECT_SQL, (TOPIC, queue, lo, hi)).fetchall()
            rows_read += len(rows)
            for row in rows:
                bytes_read += len(row[6])
    elapsed = time.perf_counter() - start
    return elapsed, rows_read, bytes_read


def _run_size(
    workdir: pathlib.Path, size: int, count: int, batch: int, read_batch: int
) -> dict[str, float | int]:
    """Benchmark one body size in a fresh database and return its figures."""
    bodies = [os.urandom(size) for _ in range(count)]
    keys = [f"key-{i}" for i in range(count)]
    db_path = workdir / f"baseline_{size}.db"
    _remove_db(db_path)
    try:
        conn = _connect(db_path)
        try:
            conn.execute(SCHEMA)
            append_s = _append(conn, bodies, keys, batch)
        finally:
            conn.close()
        del bodies, keys

        conn = _connect(db_path)
        try:
            read_s, rows_read, bytes_read = _read(conn, count, read_batch)
        finally:
            conn.close()
    finally:
        _remove_db(db_path)

    if rows_read != count or bytes_read != count * size:
        raise RuntimeError(
            f"read back {rows_read} rows / {bytes_read} bytes, "
            f"expected {count} rows / {count * size} bytes"
        )
    total_mb = count * size / 1e6
    return {
        "append_msgs_per_s": count / append_s,
        "append_mb_per_s": total_mb / append_s,
        "read_msgs_per_s": count / read_s,
        "read_mb_per_s": total_mb / read_s,
        "count": count,
    }


def run_baseline(
    workdir: pathlib.Path,
    sizes: tuple[int, ...] = (50, 1024, 4096),
    count: int = 200_000,
    batch: int = 500,
    read_batch: int = 32,
) -> dict:
    """Run the SQLite baseline for each body size.

    Returns ``{"sqlite": {str(size): {"append_msgs_per_s", "append_mb_per_s",
    "read_msgs_per_s", "read_mb_per_s", "count"}}}``.
    """
    if count <= 0 or batch <= 0 or read_batch <= 0:
        raise ValueError("count, batch and read_batch must be positive")
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, float | int]] = {}
    for size in sizes:
        results[str(size)] = _run_size(workdir, size, count, batch, read_batch)
    return {"sqlite": results}


def _format_table(result: dict) -> str:
    """Render the baseline result as a small aligned text table."""
    header = ("size", "append msgs/s", "append MB/s", "read msgs/s", "read MB/s")
    lines = [header]
    for size, fig in result["sqlite"].items():
        lines.append(
            (
                size,
                f"{fig['append_msgs_per_s']:,.0f}",
                f"{fig['append_mb_per_s']:,.1f}",
                f"{fig['read_msgs_per_s']:,.0f}",
                f"{fig['read_mb_per_s']:,.1f}",
            )
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
        for row in lines
    )


def main() -> None:
    """Command-line entry point: run the baseline, print one JSON line and a table."""
    parser = argparse.ArgumentParser(description="SQLite message-table baseline")
    parser.add_argument("--count", type=int, default=200_000, help="messages per body size")
    parser.add_argument(
        "--dir",
        type=pathlib.Path,
        default=None,
        help="work directory (default: a temp dir)",
    )
    args = parser.parse_args()

    if args.dir is None:
        with tempfile.TemporaryDirectory(prefix="tidemark-sqlite-") as tmp:
            result = run_baseline(pathlib.Path(tmp), count=args.count)
    else:
        result = run_baseline(args.dir, count=args.count)
    print(json.dumps(result))
    print(_format_table(result))


if __name__ == "__main__":
    main()
