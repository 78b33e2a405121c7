"""Spark's scan of the store beside the engine's own single-process scan of the same data,
and what planning a read costs.

    .venv/bin/python bench/spark_scan.py [--count N] [--size BYTES] [--segment-mb MB]
                                         [--masters local[1],local[2],cluster] [--dir PATH]

Builds a store of ``count`` messages of ``size`` bytes (4 queues, async batches), then
times, over every message:

- ``engine_read``: the engine's reads, queue by queue in batches of 256 (one process);
- ``engine_log_scan``: the engine's record scan of every segment (headers checked by CRC,
  bodies not decoded), as recovery does;
- ``spark <master>``: ``spark.read.format("tidemark")`` counting messages and summing body
  bytes (every body decoded and shipped to the JVM through Arrow), per Spark master, after
  one warm-up run of the same query (session start-up and Python worker start excluded).
  ``cluster`` is a standalone master with two workers of one core and 1 GiB each on this
  machine (``storeadapter.spark.standalone``), the driver in this process.

and planning (``planning``): the driver's work before any task runs, a batch read's
``partitions()`` (byte cuts, record counts from the consume queues), beside what planning
cost before (``header_walk``: hopping over every record header to cut at records), warm,
and with ``--cold`` also on a cold page cache (root only: it empties the machine's whole
page cache, so not by default on a shared machine).

Prints one JSON line, then a table (msgs/s, MB/s of body bytes, ratio to engine_read).
Timings only: no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402
from storeadapter.engine.record import MARKER, RECORD_MAGIC  # noqa: E402
from storeadapter.engine.scan import RECORD, scan_segment  # noqa: E402
from storeadapter.spark import logview  # noqa: E402
from storeadapter.spark.source import SCHEMA, TidemarkDataSource  # noqa: E402
from storeadapter.spark.standalone import StandaloneCluster  # noqa: E402

TOPIC = "bench"
QUEUES = 4
BATCH = 500
READ_BATCH = 256


def build_store(path: Path, count: int, size: int, segment_bytes: int) -> int:
    """Append ``count`` messages of ``size`` random bytes; the body bytes written."""
    rng = random.Random(size)
    bodies = [rng.randbytes(size) for _ in range(1000)]
    config = StoreConfig(segment_bytes=segment_bytes, flush_mode="async")
    with MessageStore.open(path, config) as store:
        store.create_topic(TOPIC, queues=QUEUES)
        for start in range(0, count, BATCH):
            store.append_batch(
                TOPIC, [{"body": bodies[i % 1000]} for i in range(start, min(count, start + BATCH))]
            )
        store.flush()
    return count * size


def figure(messages: int, body_bytes: int, seconds: float) -> dict:
    return {
        "messages": messages,
        "seconds": round(seconds, 3),
        "msgs_per_s": round(messages / seconds),
        "mb_per_s": round(body_bytes / seconds / 1e6, 1),
    }


def engine_read(path: Path, segment_bytes: int) -> dict:
    with MessageStore.open(path, StoreConfig(segment_bytes=segment_bytes)) as store:
        started = time.perf_counter()
        messages = body_bytes = 0
        for queue in range(QUEUES):
            offset, end = store.queue_range(TOPIC, queue)
            while offset < end:
                batch = store.read(TOPIC, queue, offset, max_messages=READ_BATCH)
                messages += len(batch)
                body_bytes += sum(len(m.body) for m in batch)
                offset = batch[-1].queue_offset + 1
        return figure(messages, body_bytes, time.perf_counter() - started)


def engine_log_scan(path: Path, segment_bytes: int) -> dict:
    with MessageStore.open(path, StoreConfig(segment_bytes=segment_bytes)) as store:
        segments = list(store.commitlog.segments)
        started = time.perf_counter()
        messages = scanned = 0
        for position, segment in enumerate(segments):
            sealed = position < len(segments) - 1
            for event in scan_segment(segment, 0, sealed):
                if event.kind == RECORD:
                    messages += 1
                    scanned += event.length
        seconds = time.perf_counter() - started
    result = figure(messages, scanned, seconds)
    result["note"] = "MB/s of record bytes scanned"
    return result


def drop_page_cache() -> bool:
    """Empty the page cache (root only): planning then reads from disk as on a big log."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError:
        return False
    return True


def header_walk(path: Path) -> int:
    """What planning did before: hop from record header to record header over the whole
    log (8 bytes read per record, every page touched); the records passed."""
    snap = logview.snapshot(path)
    records = 0
    for listed in snap.segments:
        with logview.ReadOnlySegment(snap.segment_path(listed), listed.size) as segment:
            view, pos, stop = segment.view, 0, min(listed.size, snap.end - listed.base)
            while pos + 8 <= stop:
                length, magic = MARKER.unpack_from(view, pos)
                if magic != RECORD_MAGIC:
                    break
                records += 1
                pos += length
    return records


def planning(path: Path, cold: bool) -> dict:
    """Seconds the driver spends planning a full read, cold and warm, beside the header
    walk planning used to make."""

    def plan() -> tuple[float, int, int]:
        started = time.perf_counter()
        reader = TidemarkDataSource({"path": str(path)}).reader(SCHEMA)
        partitions = reader.partitions()
        expected = sum(p.log_range.expected or 0 for p in partitions)
        return time.perf_counter() - started, len(partitions), expected

    def walk() -> tuple[float, int]:
        started = time.perf_counter()
        records = header_walk(path)
        return time.perf_counter() - started, records

    result: dict = {"plan_s": {}, "header_walk_s": {}}
    if cold and drop_page_cache():
        result["plan_s"]["cold"] = round(plan()[0], 4)
        drop_page_cache()
        result["header_walk_s"]["cold"] = round(walk()[0], 4)
    plan()
    walk()  # warm the cache for both
    seconds, partitions, expected = plan()
    result["plan_s"]["warm"] = round(seconds, 4)
    seconds, records = walk()
    result["header_walk_s"]["warm"] = round(seconds, 4)
    return {**result, "records": records, "partitions": partitions, "expected_records": expected}


def spark_scan(path: Path, master: str) -> dict:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from storeadapter.spark import register

    cluster = StandaloneCluster(workers=2, cores=1, memory="1g") if master == "cluster" else None
    builder = (
        SparkSession.builder.appName(f"tidemark-bench-{master}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
    )
    if cluster is not None:
        cluster.start()
        builder = builder.master(cluster.master_url)
        for key, value in cluster.driver_config().items():
            builder = builder.config(key, value)
    else:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    def query():
        return (
            spark.read.format("tidemark")
            .load(str(path))
            .agg(F.count(F.lit(1)).alias("n"), F.sum(F.octet_length("body")).alias("b"))
        )

    try:
        # Warm-up: Python workers started, classes loaded. A new DataFrame is timed, since
        # a second action on the same one would reuse its shuffle output and skip the scan.
        query().collect()
        started = time.perf_counter()
        row = query().collect()[0]
        seconds = time.perf_counter() - started
        partitions = spark.read.format("tidemark").load(str(path)).rdd.getNumPartitions()
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()
    result = figure(int(row["n"]), int(row["b"] or 0), seconds)
    result["partitions"] = partitions
    return result


def format_table(report: dict) -> str:
    base = report["figures"]["engine_read"]["msgs_per_s"]
    lines = [
        f"{'scan':<22} {'messages':>10} {'seconds':>8} {'msgs/s':>11} {'MB/s':>8} "
        f"{'vs engine_read':>15}",
        "-" * 79,
    ]
    for name, item in report["figures"].items():
        lines.append(
            f"{name:<22} {item['messages']:>10,} {item['seconds']:>8.2f} "
            f"{item['msgs_per_s']:>11,} {item['mb_per_s']:>8.1f} "
            f"{item['msgs_per_s'] / base:>14.2f}x"
        )
    lines.append(
        f"{report['count']:,} messages of {report['size']} B, {report['segments']} segments "
        f"of {report['segment_mb']} MiB; engine_log_scan MB/s counts record bytes, the "
        "others body bytes."
    )
    one, two = report["figures"].get("spark local[1]"), report["figures"].get("spark local[2]")
    if one and two:
        lines.append(f"local[2] / local[1]: {two['msgs_per_s'] / one['msgs_per_s']:.2f}x")
    plan = report.get("planning")
    if plan:

        def timings(found: dict) -> str:
            return ", ".join(f"{seconds:.3f} s {kind}" for kind, seconds in found.items())

        lines.append(
            f"planning {plan['records']:,} records into {plan['partitions']} ranges "
            f"({plan['expected_records']:,} records expected from the consume queues): "
            f"{timings(plan['plan_s'])}; the header walk planning used to make: "
            f"{timings(plan['header_walk_s'])}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--masters", default="local[1],local[2],cluster")
    parser.add_argument("--dir", help="where to build the store (default: a temp dir)")
    parser.add_argument(
        "--cold", action="store_true", help="also time planning on a cold page cache (root)"
    )
    args = parser.parse_args()
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tidemark-spark-"))
    path = workdir / "store"
    shutil.rmtree(path, ignore_errors=True)
    segment_bytes = args.segment_mb << 20
    try:
        build_store(path, args.count, args.size, segment_bytes)
        plan = planning(path, args.cold)
        figures = {
            "engine_read": engine_read(path, segment_bytes),
            "engine_log_scan": engine_log_scan(path, segment_bytes),
        }
        for master in filter(None, (m.strip() for m in args.masters.split(","))):
            figures[f"spark {master}"] = spark_scan(path, master)
        report = {
            "bench": "spark_scan",
            "count": args.count,
            "size": args.size,
            "segment_mb": args.segment_mb,
            "segments": len(list((path / "commitlog").iterdir())),
            "cpus": os.cpu_count(),
            "figures": figures,
            "planning": plan,
        }
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report))
    print(format_table(report))


if __name__ == "__main__":
    main()
