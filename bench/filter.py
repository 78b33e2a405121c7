"""Filter expressions over a topic (issue 34, item 1; targets: at least 1,000,000
records a second scanned on one core, and at least 5x a Python loop that decodes each
message and evaluates the same condition).

    .venv/bin/python bench/filter.py [--count N] [--size BYTES] [--rounds R] [--dir PATH]

Builds a store of ``--count`` messages (default 1,000,000) of ``--size`` bytes (1 KiB)
over 4 queues with files of their own: each body a JSON object ``{"order": {"total":
n, ...}, "pad": "..."}``, tag "paid" or "open", a key and a property. Then, for each
expression, in the same run:

* **native**: ``storeadapter.engine.filters.scan`` (the crate evaluates the compiled
  expression per record inside the store core's scan; no Python per record), asking for
  pages of ``READ_CHUNK`` matches, the peer's page, and continuing from each cursor (the
  console's pages hold 100). The same scan keeping ``filters.MAX_MATCHES`` (10,000)
  matches a call is reported beside it (``held``): an answer that large outgrows the
  caches, and each of its messages costs ~300 ns more (docs/PERFORMANCE.md, "Filter
  expressions, step 4");
* **python**: the peer, a Python loop over the same store's ``read`` (500 messages a
  call, the engine's native read) that decodes each message (``json.loads`` of the
  body when the condition needs it) and evaluates the same condition in Python.

Both read the same warm store (one untimed pass first). Each figure is the CPU seconds
of this process (``time.process_time``: one core, robust under load) and records per
CPU second, the best of ``--rounds`` (3) rounds in which the native scan, the held scan
and the Python loop run in turn: other processes' load then falls on both sides alike,
where one measurement of each, one after the other, moved the ratio by up to 25 %
between runs (docs/PERFORMANCE.md, "Filter expressions, step 5"). Prints a table, then
one JSON line. Timings only: no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig, filters  # noqa: E402

TOPIC = "orders"
QUEUES = 4
BATCH = 1000
READ_CHUNK = 500


def _paid_and_big(m) -> bool:
    return m.tag == "paid" and json.loads(m.body)["order"]["total"] > 100


def _big_and_paid(m) -> bool:
    return json.loads(m.body)["order"]["total"] > 100 and m.tag == "paid"


def _region_and_key(m) -> bool:
    return m.properties.get("region") == "eu" and m.keys[0].startswith("k1")


#: (name, CEL expression, the same condition in Python).
CASES = [
    ("tag, then body JSON", 'tag == "paid" && body.order.total > 100', _paid_and_big),
    ("body JSON, then tag", 'body.order.total > 100 && tag == "paid"', _big_and_paid),
    ("property and key", 'properties.region == "eu" && key.startsWith("k1")', _region_and_key),
]


def build_store(path: Path, count: int, size: int) -> None:
    rng = random.Random(34)
    config = StoreConfig(segment_bytes=256 << 20, flush_mode="async")
    with MessageStore.open(path, config) as store:
        store.create_topic(TOPIC, queues=QUEUES, layout="files")
        for start in range(0, count, BATCH):
            batch = []
            for i in range(start, min(count, start + BATCH)):
                head = json.dumps({"order": {"total": rng.randrange(200), "id": i}, "pad": ""})
                body = head[:-2] + "x" * max(0, size - len(head)) + '"}'
                batch.append(
                    {
                        "body": body.encode(),
                        "tag": "paid" if i % 4 == 0 else "open",
                        "key": f"k{i}",
                        "queue": i % QUEUES,
                        "properties": {"region": "eu" if i % 3 else "us"},
                    }
                )
            store.append_batch(TOPIC, batch)
        store.flush()


def native(
    store: MessageStore, expression: str, count: int, page: int = READ_CHUNK
) -> tuple[float, int, int]:
    cpu = time.process_time()
    matched = 0
    scanned = 0
    cursor = None
    while True:
        result = filters.scan(
            store,
            TOPIC,
            expression,
            cursor=cursor,
            max_records=count,
            max_seconds=600,
            max_matches=page,
        )
        matched += len(result.messages)
        scanned += result.scanned
        cursor = result.cursor
        if cursor is None:
            break
    return time.process_time() - cpu, scanned, matched


def python_loop(store: MessageStore, condition) -> tuple[float, int, int]:
    cpu = time.process_time()
    matched = 0
    scanned = 0
    for queue in range(QUEUES):
        low, high = store.queue_range(TOPIC, queue)
        position = low
        while position < high:
            batch = store.read(TOPIC, queue, position, READ_CHUNK)
            if not batch:
                break
            for message in batch:
                scanned += 1
                if condition(message):
                    matched += 1
            position = batch[-1].queue_offset + 1
    return time.process_time() - cpu, scanned, matched


#: The issue's targets for every expression (issue 34, item 1).
TARGET_RECORDS_PER_S = 1_000_000
TARGET_RATIO = 5.0


#: Rounds of each case; each side's best (least CPU) is its figure.
ROUNDS = 3


def run(workdir: Path, count: int, size: int, rounds: int = ROUNDS) -> dict:
    """Build a store of ``count`` messages under ``workdir``, measure every case, native and
    the Python loop in turn, ``rounds`` times; the figures as a dict (``bench/compare.py``'s
    filter section)."""
    path = workdir / "filter-store"
    started = time.monotonic()
    build_store(path, count, size)
    built_s = time.monotonic() - started
    rows = []
    with MessageStore.open(path) as store:
        python_loop(store, lambda m: False)  # warm the page cache and mappings
        for name, expression, condition in CASES:
            n_cpu = h_cpu = p_cpu = float("inf")
            for _ in range(max(1, rounds)):
                cpu, n_scanned, n_matched = native(store, expression, count)
                n_cpu = min(n_cpu, cpu)
                cpu, _, h_matched = native(store, expression, count, filters.MAX_MATCHES)
                h_cpu = min(h_cpu, cpu)
                cpu, p_scanned, p_matched = python_loop(store, condition)
                p_cpu = min(p_cpu, cpu)
                assert n_matched == p_matched == h_matched, (
                    name,
                    n_matched,
                    p_matched,
                    h_matched,
                )
                assert n_scanned == p_scanned, (name, n_scanned, p_scanned)
            n_cpu, p_cpu, h_cpu = max(n_cpu, 1e-6), max(p_cpu, 1e-6), max(h_cpu, 1e-6)
            rows.append(
                {
                    "case": name,
                    "expression": expression,
                    "records": n_scanned,
                    "matched": n_matched,
                    "native_cpu_s": round(n_cpu, 3),
                    "native_records_per_s": round(n_scanned / n_cpu),
                    "python_cpu_s": round(p_cpu, 3),
                    "python_records_per_s": round(p_scanned / p_cpu),
                    "ratio": round(p_cpu / n_cpu, 1),
                    "held_records_per_s": round(n_scanned / h_cpu),
                    "held_ratio": round(p_cpu / h_cpu, 1),
                }
            )
    return {
        "count": count,
        "size": size,
        "queues": QUEUES,
        "rounds": max(1, rounds),
        "built_s": round(built_s, 1),
        "cases": rows,
    }


def format_table(report: dict) -> str:
    """The cases beside the Python loop, each with the issue's two targets marked."""
    lines = [
        f"Filter expressions over {report['count']:,} messages of {report['size']} B "
        f"in {report['queues']} queues (records per CPU second; the peer: a Python loop "
        "over read)",
        f"{'case':22} {'native rec/s':>14} {'python rec/s':>14} {'ratio':>7} {'matched':>9}"
        f"  >= 1M/s  >= 5x {'held ratio':>11}",
    ]
    for row in report["cases"]:
        fast = row["native_records_per_s"] >= TARGET_RECORDS_PER_S
        ahead = row["ratio"] >= TARGET_RATIO
        lines.append(
            f"{row['case']:22} {row['native_records_per_s']:>14,} "
            f"{row['python_records_per_s']:>14,} {row['ratio']:>6}x {row['matched']:>9,}"
            f"  {'pass' if fast else 'MISS':>7}  {'pass' if ahead else 'MISS':>4}"
            f" {row['held_ratio']:>10}x"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        report = run(Path(tmp), args.count, args.size, args.rounds)
    print(format_table(report))
    print(json.dumps({"bench": "filter", **report}))


if __name__ == "__main__":
    main()
