"""Tidemark beside its peers and the machine's limits, in one run on one machine.

    .venv/bin/python bench/compare.py [--quick | --tiny] [--only tidemark,redis,...]
                                      [--count N] [--sizes 50,1024,4096] [--dir PATH]

Runs, in this order: the machine's limits (bench/limits.py); per body size, Tidemark's
append/read/get/recovery figures (bench/engine.py's ``run_size``, plus one thread of
single sync appends) and then every peer (bench/peers/) on the same bodies and counts;
key and time lookups, 1/2/4 producer processes and append-to-pull latency
(bench/engine_two.py); filter expressions over 1,000,000 messages of 1 KiB beside a
Python loop (bench/filter.py); Spark's scan (bench/spark_scan.py); the console's pages at 1,000
topics, 10,000 queues and 200 groups (bench/console.py) and the alert evaluation on that
store; the monitoring's periodic jobs at scale (bench/monitoring_scale.py: the status
evaluation at 1,000 groups x 20 queues, a sample of 100,000 lagging queues); the limits
again (each limit is the better of the two). ``os.sync()`` runs between sections, outside
their timing, so one section's write-back does not land in the next one's.

Every system reads in batches of 500 and appends in batches of 500 where it has
batches. Prints one JSON line, then the tables: each figure with its fraction of the
machine limit that bounds it, its ratio to each like-for-like peer, and the target from
issue 9 with a pass/miss mark. Timings only: no test asserts them. ``--only`` takes
section names: limits (always measured), tidemark, peers or any peer name (sqlite,
sqlite_full, redis = redis_everysec + redis_always, jetstream, persist_queue, queuelib),
lookups, processes, latency, filter, console, alerts, monitoring, spark; ``--tiny`` runs each on
tiny counts. docs/PERFORMANCE.md says how each figure and each peer is measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import engine  # noqa: E402
import engine_two  # noqa: E402
import filter as filter_bench  # noqa: E402
import limits  # noqa: E402
import monitoring_scale  # noqa: E402
import spark_scan  # noqa: E402
from peers import PEERS  # noqa: E402
from peers.base import measure  # noqa: E402

# The project's ``console`` package must win over bench/console.py, loaded by file below.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if p not in (str(ROOT), str(BENCH))] + [str(BENCH)]
_spec = importlib.util.spec_from_file_location("console_bench", BENCH / "console.py")
console_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(console_bench)

SIZES = (50, 1024, 4096)
BATCH = 500
READ_BATCH = 500
UNIQUE_BODIES = 50_000

#: persist-queue rewrites its info file at every put (about 2,000 puts/s here): it gets
#: at most this many messages per size, so that the run stays within its time budget.
PEER_MAX_COUNT = {"persist_queue": 20_000}

FULL = {
    "count": 200_000,
    "single_sync": 5_000,
    "limit_mib": 512,
    "limit_syncs": 2_000,
    "keys": 1_000_000,
    "time_count": 1_000_000,
    "producer_count": 1_000_000,
    "samples": 2_000,
    "topics": 1_000,
    "queues": 10_000,
    "groups": 200,
    "repeat": 30,
    "alert_rounds": 5,
    "spark_count": 200_000,
    "mon_groups": 1_000,
    "mon_group_queues": 20,
    "mon_queues": 100_000,
    "mon_rounds": 3,
    "spark_masters": "local[1],local[2]",
    "filter_count": 1_000_000,
}
QUICK = {
    "count": 5_000,
    "single_sync": 500,
    "limit_mib": 64,
    "limit_syncs": 300,
    "keys": 20_000,
    "time_count": 20_000,
    "producer_count": 20_000,
    "samples": 100,
    "topics": 100,
    "queues": 1_000,
    "groups": 20,
    "repeat": 3,
    "alert_rounds": 2,
    "spark_count": 20_000,
    "mon_groups": 100,
    "mon_group_queues": 20,
    "mon_queues": 10_000,
    "mon_rounds": 2,
    "spark_masters": "local[2]",
    "filter_count": 50_000,
}
#: Tiny counts: every section runs in seconds (tests/bench/test_compare_runs.py).
TINY = {
    **QUICK,
    "count": 300,
    "single_sync": 20,
    "limit_mib": 4,
    "limit_syncs": 20,
    "keys": 500,
    "time_count": 500,
    "producer_count": 500,
    "samples": 10,
    "topics": 5,
    "queues": 20,
    "groups": 3,
    "repeat": 1,
    "alert_rounds": 2,
    "spark_count": 500,
    "spark_masters": "local[1]",
    "mon_groups": 4,
    "mon_group_queues": 3,
    "mon_queues": 200,
    "mon_rounds": 1,
    "filter_count": 400,
}

SECTIONS = (
    "tidemark",
    "lookups",
    "processes",
    "latency",
    "console",
    "alerts",
    "monitoring",
    "filter",
    "spark",
)
ALERT_TARGET_S = 2.0
RECOVERY_TARGET_MB_S = 1000.0
SYNC_THREADS_TARGET = 50_000
# Issue 22 (the native data plane), per body size: (target, figure, against, needed),
# where against is a peer (a ratio of msgs/s), "write bw" (a share of the disk's
# sustained write bandwidth) or None (the figure itself, msgs/s or MB/s).
NATIVE_TARGETS = {
    "50": (
        ("async batched append >= 4x SQLite queue", "append_batch_async", "sqlite_queue", 4),
        ("reads >= 1.5x SQLite queue", "read_by_offset", "sqlite_queue", 1.5),
        ("recovery scan >= 1.5 GB/s", "recovery_scan", None, 1500),
        ("one append per call (async) >= 400k/s", "append_single_async", None, 400_000),
    ),
    "1024": (
        ("async batched append >= 70% of write bw", "append_batch_async", "write bw", 0.7),
        ("reads >= 2x SQLite queue", "read_by_offset", "sqlite_queue", 2),
        ("get by id >= 1M/s", "get_by_id", None, 1_000_000),
        ("recovery scan >= 5 GB/s", "recovery_scan", None, 5000),
        ("one append per call (async) >= 400k/s", "append_single_async", None, 400_000),
    ),
    "4096": (
        ("async batched append >= 85% of write bw", "append_batch_async", "write bw", 0.85),
        ("one append per call (async) >= 400k/s", "append_single_async", None, 400_000),
    ),
}

# Which peers each Tidemark figure is compared with (like for like) and on what.
ASYNC_PEERS = ("sqlite_queue", "sqlite", "redis_everysec", "jetstream", "persist_queue", "queuelib")
SYNC_PEERS = ("sqlite_full", "redis_always")
COMPARED = {
    "append_single_async": (("persist_queue", "queuelib"), "append_msgs_per_s"),
    "append_batch_async": (ASYNC_PEERS, "append_msgs_per_s"),
    "append_batch_sync": (SYNC_PEERS, "append_msgs_per_s"),
    "read_by_offset": (ASYNC_PEERS + ("redis_always",), "read_msgs_per_s"),
}
COLUMNS = (
    ("sqlite-q", ("sqlite_queue",)),
    ("sqlite", ("sqlite", "sqlite_full")),
    ("redis", ("redis_everysec", "redis_always")),
    ("jetstream", ("jetstream",)),
    ("persist-q", ("persist_queue",)),
    ("queuelib", ("queuelib",)),
)


def bodies_for(size: int, count: int) -> list[bytes]:
    """The bodies bench/engine.py's run_size appends for this size (same seed)."""
    rng = random.Random(size)
    unique = [rng.randbytes(size) for _ in range(min(count, UNIQUE_BODIES))]
    return (unique * (count // len(unique) + 1))[:count]


def _settle() -> None:
    """Write back what the previous figure left dirty, outside any timing."""
    os.sync()


# ------------------------------------------------------------------------------ Tidemark


def tidemark_size(workdir: Path, size: int, count: int, single_sync: int) -> dict:
    """bench/engine.py's figures for one size, and one thread of single sync appends."""
    segment_bytes = 1 << 30
    figures = engine.run_size(workdir, size, count, segment_bytes)
    _settle()
    path = workdir / f"single-sync-{size}"
    shutil.rmtree(path, ignore_errors=True)
    store = engine._open(path, "sync", segment_bytes)
    try:
        seconds = engine._append_single(store, bodies_for(size, single_sync))
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    figures["append_single_sync"] = engine._rate(single_sync, seconds, size)
    order = (
        "append_single_async",
        "append_batch_async",
        "append_single_sync",
        "append_batch_sync",
        "append_single_sync_8_threads",
    )
    return {**{name: figures[name] for name in order}, **figures}


def run_peers(workdir: Path, size: int, count: int, names: list[str]) -> dict:
    results = {}
    for name in names:
        _settle()
        peer_count = min(count, PEER_MAX_COUNT.get(name, count))
        results[name] = measure(
            PEERS[name](), workdir, bodies_for(size, peer_count), BATCH, READ_BATCH
        )
    return results


def versions() -> dict:
    """The versions of what is compared, for the report."""
    import sqlite3
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    found = {"sqlite": sqlite3.sqlite_version}
    for package in ("persist-queue", "queuelib", "nats-py", "redis"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    for name, command in (
        ("redis-server", ["redis-server", "--version"]),
        ("nats-server", ["/usr/sbin/nats-server", "--version"]),
    ):
        try:
            found[name] = subprocess.run(
                command, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except OSError:
            found[name] = None
    return found


def peer_info() -> dict:
    info = {}
    for name, factory in PEERS.items():
        peer = factory()
        info[name] = {"durability": peer.durability, "method": peer.method}
    return info


# ------------------------------------------------------------------- console and alerts

ALERT_RULES = (
    ("lag above 0 messages", "lag_messages", 0.0),
    ("lag above 60 s", "lag_seconds", 60.0),
    ("drain above 1 h", "drain_seconds", 3600.0),
    ("status WARN or worse", "status_warn", None),
    ("status ERR", "status_err", None),
    ("expiry within 24 h", "expiry_hours", 24.0),
    ("disk above 90%", "disk_ratio", 0.9),
)


def alert_evaluation(rounds: int) -> dict:
    """Sample the console's store, then time the alert task's work after each new sample.

    The task's work is ``current_metrics()`` (every group's metrics, rebuilt from the
    newest sample: the per-process cache is empty after a new sample) and ``evaluate``
    with the rules above, mail going to Django's in-memory backend. The first evaluation
    opens the events; the next ones find them open (the steady state).
    """
    from django.conf import settings
    from django.utils import timezone

    from console.alerts.evaluate import evaluate
    from console.alerts.models import AlertRule
    from console.alerts.tasks import current_metrics
    from console.monitoring.sampler import take_sample

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    for name, kind, threshold in ALERT_RULES:
        AlertRule.objects.create(
            name=name, kind=kind, threshold=threshold, recipients="ops@example.com"
        )
    samples_ms = []
    evaluations = []
    pairs = groups_seen = 0
    for round_number in range(rounds + 2):
        time.sleep(0.005)  # a sample must be newer than the last one, to the millisecond
        report = take_sample()
        if not report.written:
            raise RuntimeError(f"no sample written: {report.skipped}")
        samples_ms.append(report.duration_ms)
        if round_number == 0:
            continue  # rates need two samples
        started = time.perf_counter()
        groups, store = current_metrics()
        metrics_s = time.perf_counter() - started
        changes = evaluate(groups, store, timezone.now())
        seconds = time.perf_counter() - started
        if changes.rule_failures:
            raise RuntimeError(f"{changes.rule_failures} alert rules failed to evaluate")
        pairs = sum(len(group.queues) for group in groups)
        groups_seen = len(groups)
        evaluations.append(
            {
                "seconds": round(seconds, 3),
                "metrics_s": round(metrics_s, 3),
                "changes": len(changes),
                "notifications": len(changes.notifications),
            }
        )
    steady = [e["seconds"] for e in evaluations[1:]] or [evaluations[0]["seconds"]]
    return {
        "rules": len(ALERT_RULES),
        "groups": groups_seen,
        "group_queue_pairs": pairs,
        "sample_ms_p50": round(statistics.median(samples_ms), 1),
        "first_s": evaluations[0]["seconds"],
        "first_changes": evaluations[0]["changes"],
        "steady_p50_s": round(statistics.median(steady), 3),
        "steady_max_s": round(max(steady), 3),
        "worst_s": max(e["seconds"] for e in evaluations),
        "evaluations": evaluations,
        "target_s": ALERT_TARGET_S,
        "met": max(e["seconds"] for e in evaluations) < ALERT_TARGET_S,
    }


def console_and_alerts(
    workdir: Path, settings: dict, pages: bool, alerts: bool, watch: bool
) -> dict:
    store_dir = workdir / "console-store"
    shown = pages or alerts
    scale = console_bench.build_store(
        store_dir,
        settings["topics"] if shown else 1,
        settings["queues"] if shown else 1,
        settings["groups"] if shown else 1,
        console_bench.DEFAULT_MESSAGES,
        console_bench.DEFAULT_TOPICS_PER_GROUP,
    )
    client = console_bench.setup_django(workdir, store_dir)
    from storeadapter.access import close_all

    result: dict = {"scale": scale} if shown else {}
    try:
        if pages:
            result["pages"] = console_bench.time_pages(
                client, console_bench.pages(scale), settings["repeat"]
            )
        if alerts:
            result["alerts"] = alert_evaluation(settings["alert_rounds"])
        if watch:
            result["monitoring"] = {
                "status_evaluation": monitoring_scale.status_evaluation(
                    workdir,
                    settings["mon_groups"],
                    settings["mon_group_queues"],
                    settings["mon_rounds"],
                ),
                "lagging_sample": monitoring_scale.lagging_sample(
                    workdir, settings["mon_queues"], settings["mon_rounds"]
                ),
            }
    finally:
        close_all()
        shutil.rmtree(store_dir, ignore_errors=True)
    return result


# ------------------------------------------------------------------------------- Spark


def spark(workdir: Path, count: int, masters: str) -> dict:
    path = workdir / "spark-store"
    shutil.rmtree(path, ignore_errors=True)
    segment_bytes = 64 << 20
    try:
        spark_scan.build_store(path, count, 1024, segment_bytes)
        _settle()
        figures = {
            "engine_read": spark_scan.engine_read(path, segment_bytes),
            "engine_log_scan": spark_scan.engine_log_scan(path, segment_bytes),
        }
        for master in masters.split(","):
            figures[f"spark {master}"] = spark_scan.spark_scan(path, master)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return {"count": count, "size": 1024, "segment_mb": 64, "figures": figures}


# ------------------------------------------------------------------- limits and targets


def best_limits(first: dict, second: dict) -> dict:
    """Per limit, the better of two measurements (higher rate or bandwidth)."""
    best = {}
    for name, figure in first.items():
        other = second.get(name, figure)
        key = "mb_per_s" if "mb_per_s" in figure else "per_s"
        best[name] = figure if figure[key] >= other[key] else other
    return best


def limit_share(name: str, figure: dict, size: int, machine: dict) -> tuple[str, float | None]:
    """The limit that bounds a Tidemark figure, and the figure's share of it."""
    if not machine:
        return "", None
    write_bw = machine["write_fsync_end"]["mb_per_s"]
    read_bw = machine["read_page_cache"]["mb_per_s"]
    # The best fdatasync rate of a file that does not grow (zero-filled or fallocated).
    fsyncs = max(
        machine[name]["per_s"]
        for name in ("fdatasync_prealloc", "fdatasync_fallocated")
        if name in machine
    )
    if name in ("append_single_async", "append_batch_async") or name.startswith("producers_"):
        return "write bw", figure["mb_per_s"] / write_bw
    if name == "append_batch_sync":
        # One fdatasync per batch plus the batch's bytes at the write bandwidth.
        batch_s = 1 / fsyncs + BATCH * size / (write_bw * 1e6)
        return "fsync+bw", figure["msgs_per_s"] / (BATCH / batch_s)
    if name == "append_single_sync":
        return "fsync/s", figure["msgs_per_s"] / fsyncs
    if name == "append_single_sync_8_threads":
        # The least work 8 threads of single durable appends can do in one CPython
        # process here (limits.py); else one fdatasync covering at most 8 messages.
        ceiling = machine.get("python_group_commit_8_threads")
        if ceiling:
            return "py 8-thread", figure["msgs_per_s"] / ceiling["per_s"]
        return "8x fsync/s", figure["msgs_per_s"] / (8 * fsyncs)
    if name in ("read_by_offset", "get_by_id", "recovery_scan") or name.startswith("spark"):
        return "read bw", figure["mb_per_s"] / read_bw
    if name.startswith("engine_"):
        return "read bw", figure["mb_per_s"] / read_bw
    return "", None


def _check(rows: list, target: str, figure: str, value: float, needed: float, unit: str) -> None:
    rows.append(
        {
            "target": target,
            "figure": figure,
            "value": round(value, 2),
            "needed": needed,
            "unit": unit,
            "met": value >= needed if unit != "ms" and unit != "s" else value < needed,
        }
    )


def _native_checks(rows: list, size: str, figures: dict, peers: dict, machine: dict) -> None:
    """Issue 22's targets at one body size, those this run measured."""
    for target, figure, against, needed in NATIVE_TARGETS.get(size, ()):
        found = figures.get(figure)
        if found is None:
            continue
        label = f"{target} (issue 22) [{size} B]"
        if against is None:
            unit = "msgs/s" if "msgs_per_s" in found else "MB/s"
            value = found["msgs_per_s" if unit == "msgs/s" else "mb_per_s"]
            _check(rows, label, figure, value, needed, unit)
        elif against == "write bw":
            if machine.get("write_fsync_end"):
                share = found["mb_per_s"] / machine["write_fsync_end"]["mb_per_s"]
                _check(rows, label, f"{figure} / write bw", share, needed, "x")
        else:
            key = "read_msgs_per_s" if figure == "read_by_offset" else "append_msgs_per_s"
            base = peers.get(against, {}).get(key)
            if base:
                ratio = found["msgs_per_s"] / base
                _check(rows, label, f"{figure} / {against}", ratio, needed, "x")


# Issue 31: 8 threads of single sync appends, against the same run's bare fdatasync rate
# (limits.py's fdatasync_prealloc, ``bare_fdatasync_rate``).
GROUP_COMMIT_MSGS_PER_SYNC = 6
GROUP_COMMIT_SHARE = 0.7


def _group_commit_checks(rows: list, size: str, figures: dict, machine: dict) -> None:
    """Issue 31's two targets for 8 threads of single sync appends: at least 6 messages
    per fdatasync, and at least 0.7 x (8 x the bare fdatasync rate of this run)."""
    found = figures.get("append_single_sync_8_threads")
    if not found:
        return
    per_sync = found.get("msgs_per_fdatasync")
    if per_sync is not None:
        _check(
            rows,
            f"sync, 8 threads: >= {GROUP_COMMIT_MSGS_PER_SYNC} msgs per fdatasync "
            f"(issue 31) [{size} B]",
            "append_single_sync_8_threads msgs/fdatasync",
            per_sync,
            GROUP_COMMIT_MSGS_PER_SYNC,
            "msgs",
        )
    bare, measured_as = bare_fdatasync_rate(machine.get("fdatasync_prealloc", {}))
    if bare:
        _check(
            rows,
            f"sync, 8 threads >= {GROUP_COMMIT_SHARE} x (8 x fdatasync/s) (issue 31) [{size} B]",
            f"append_single_sync_8_threads / (8 x {bare:,.0f}/s, {measured_as})",
            found["msgs_per_s"] / (8 * bare),
            GROUP_COMMIT_SHARE,
            "x",
        )


def bare_fdatasync_rate(figure: dict) -> tuple[float | None, str]:
    """The bare fdatasync rate issue 31's ratio divides by, and how it was measured: from
    each call's own time less the run-queue wait inside it (limits.py) when the kernel
    keeps that wait; the loop's rate otherwise. On a busy machine the bare loop's thread
    waits milliseconds for a CPU inside each fdatasync (docs/PERFORMANCE.md,
    sync31-s53): its rate measures the run queue, not the disk."""
    own_us = figure.get("sync_less_rq_us_mean")
    if own_us:
        return 1_000_000 / own_us, "the calls' own time"
    return figure.get("per_s"), "the loop's rate"


def targets(report: dict) -> list[dict]:
    """Each of issue 9's and issue 22's targets that this run measured, with its mark."""
    rows: list[dict] = []
    peers = report.get("peers", {})
    for size, figures in report.get("tidemark", {}).items():
        mine = peers.get(size, {})

        def ratio(figure: str, peer: str, key: str, mine=mine, figures=figures) -> float | None:
            base = mine.get(peer, {}).get(key)
            return figures[figure]["msgs_per_s"] / base if base else None

        checks = [
            ("async batched append >= 4x SQLite", "append_batch_async", "sqlite", "append", 4),
            (
                "async batched append >= 5x Redis (everysec)",
                "append_batch_async",
                "redis_everysec",
                "append",
                5,
            ),
            (
                "sync batched append >= 3x Redis (always)",
                "append_batch_sync",
                "redis_always",
                "append",
                3,
            ),
            ("reads >= SQLite", "read_by_offset", "sqlite", "read", 1),
            ("reads >= 2x Redis XREAD", "read_by_offset", "redis_everysec", "read", 2),
        ]
        if size == "1024":
            checks.insert(
                2,
                (
                    "async batched append ahead of JetStream (1 KiB)",
                    "append_batch_async",
                    "jetstream",
                    "append",
                    1,
                ),
            )
        for target, figure, peer, kind, needed in checks:
            value = ratio(figure, peer, f"{kind}_msgs_per_s")
            if value is not None:
                _check(rows, f"{target} [{size} B]", f"{figure} / {peer}", value, needed, "x")
        _check(
            rows,
            f"sync, 8 threads of single appends >= 50,000 msgs/s [{size} B]",
            "append_single_sync_8_threads",
            figures["append_single_sync_8_threads"]["msgs_per_s"],
            SYNC_THREADS_TARGET,
            "msgs/s",
        )
        _check(
            rows,
            f"recovery scan >= 1 GB/s [{size} B]",
            "recovery_scan",
            figures["recovery_scan"]["mb_per_s"],
            RECOVERY_TARGET_MB_S,
            "MB/s",
        )
        _native_checks(rows, size, figures, mine, report.get("limits", {}))
        _group_commit_checks(rows, size, figures, report.get("limits", {}))
    for page, figure in report.get("console", {}).get("pages", {}).items():
        _check(
            rows,
            f"console page p95 < 150 ms: {page}",
            "p95 ms",
            figure["p95_ms"],
            console_bench.TARGET_P95_MS,
            "ms",
        )
    alerts = report.get("console", {}).get("alerts")
    if alerts:
        _check(
            rows,
            f"alert evaluation < 2 s ({alerts['group_queue_pairs']:,} group queues)",
            "worst evaluation",
            alerts["worst_s"],
            ALERT_TARGET_S,
            "s",
        )
    filtered = report.get("filter")
    for row in filtered["cases"] if filtered else ():
        _check(
            rows,
            f"filter {row['case']} >= 1M records/s, one core",
            "native records/s",
            row["native_records_per_s"],
            filter_bench.TARGET_RECORDS_PER_S,
            "rec/s",
        )
        _check(
            rows,
            f"filter {row['case']} >= 5x a Python loop",
            "native / Python loop",
            row["ratio"],
            filter_bench.TARGET_RATIO,
            "x",
        )
    watched = report.get("monitoring", {})
    for key, label, count in (
        ("status_evaluation", "status evaluation", "group_queue_pairs"),
        ("lagging_sample", "sample, every queue lagging", "queues"),
    ):
        figure = watched.get(key)
        if figure:
            rows.append(
                {
                    "target": f"{label} <= half the interval ({figure[count]:,} queues)",
                    "figure": "worst round",
                    "value": figure["max_s"],
                    "needed": figure["target_s"],
                    "unit": "s",
                    "met": figure["met"],
                }
            )
    return rows


# ------------------------------------------------------------------------------ tables


def _x(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if value < 10 else f"{value:.1f}x"


def _share(label: str, share: float | None) -> str:
    if share is None:
        return ""
    if share >= 1.5:
        return f"{share:.1f}x {label}"
    return f"{share * 100:.1f}% {label}"


def _marks(rows: list[dict], name: str, size: str) -> str:
    """The marks of the targets on one figure at one size (details in the targets table)."""
    mine = [
        row
        for row in rows
        if row["figure"].split(" / ")[0] == name and row["target"].endswith(f"[{size} B]")
    ]
    if not mine:
        return ""
    met = sum(row["met"] for row in mine)
    return "pass" if met == len(mine) else f"MISS ({len(mine) - met} of {len(mine)})"


def format_limits(report: dict) -> str:
    start = report.get("limits_start", report["limits"])
    end = report.get("limits_end", {})
    lines = [
        "Machine limits (measured at the start and at the end of the run; the better is used)",
        f"{'limit':<30} {'start':>10} {'end':>10} {'used':>10}  unit",
        "-" * 80,
    ]
    for name, used in report["limits"].items():
        key = "mb_per_s" if "mb_per_s" in used else "per_s"
        unit = "MB/s" if key == "mb_per_s" else used.get("unit", "fdatasync/s")
        at_end = f"{end[name][key]:,}" if name in end else "-"
        lines.append(f"{name:<30} {start[name][key]:>10,} {at_end:>10} {used[key]:>10,}  {unit}")
    return "\n".join(lines)


def format_tidemark(report: dict) -> str:
    machine = report.get("limits", {})
    header = (
        f"{'Tidemark figure':<30} {'size':>5} {'msgs/s':>11} {'MB/s':>8} {'of limit':>20}"
        + "".join(f" {title:>9}" for title, _ in COLUMNS)
        + "  targets"
    )
    lines = [
        "Tidemark beside its peers (ratio = Tidemark / peer, msgs/s; sync figures are "
        "compared with sqlite_full and redis_always)",
        header,
        "-" * len(header),
    ]
    for size, figures in report.get("tidemark", {}).items():
        mine = report.get("peers", {}).get(size, {})
        for name, figure in figures.items():
            label, share = limit_share(name, figure, int(size), machine)
            rate = f"{figure['msgs_per_s']:,}" if "msgs_per_s" in figure else ""
            row = f"{name:<30} {size:>5} {rate:>11} {figure['mb_per_s']:>8.1f} "
            row += f"{_share(label, share):>20}"
            peers, key = COMPARED.get(name, ((), ""))
            for _, candidates in COLUMNS:
                value = None
                for peer in candidates:
                    base = mine.get(peer, {}).get(key)
                    if peer in peers and base:
                        value = figure["msgs_per_s"] / base
                        break
                row += f" {_x(value):>9}"
            lines.append((row + f"  {_marks(report.get('targets', []), name, size)}").rstrip())
    return "\n".join(lines)


def format_peers(report: dict) -> str:
    header = (
        f"{'peer':<16} {'size':>5} {'count':>8} {'append/s':>10} {'MB/s':>7} "
        f"{'read/s':>10} {'MB/s':>7}  durability"
    )
    lines = ["Peers (same bodies; reads in batches of 500)", header, "-" * 100]
    info = report.get("peer_info", {})
    for size, peers in report.get("peers", {}).items():
        for name, figure in peers.items():
            lines.append(
                f"{name:<16} {size:>5} {figure['count']:>8,} {figure['append_msgs_per_s']:>10,} "
                f"{figure['append_mb_per_s']:>7.1f} {figure['read_msgs_per_s']:>10,} "
                f"{figure['read_mb_per_s']:>7.1f}  {info.get(name, {}).get('durability', '')}"
            )
    return "\n".join(lines)


def format_more(report: dict) -> str:
    machine = report.get("limits", {})
    lines = [
        "More Tidemark figures",
        f"{'figure':<40} {'count':>10} {'per second':>12} {'MB/s':>8} {'of limit':>16} "
        f"{'p50':>9} {'p95/p99':>9}",
        "-" * 110,
    ]
    two = report.get("engine_two", {})
    if "query_by_key" in two:
        f = two["query_by_key"]
        lines.append(
            f"{'key index build (append, 50 B)':<40} {f['keys']:>10,} {f['build_msgs_per_s']:>12,}"
        )
        lines.append(
            f"{'query_by_key (limit=1) ' + f['status']:<40} {f['keys']:>10,} "
            f"{f['queries_per_s']:>12,}"
        )
    if "offset_for_time" in two:
        f = two["offset_for_time"]
        lines.append(
            f"{'offset_for_time ' + f['status']:<40} {f['count']:>10,} {f['lookups_per_s']:>12,}"
        )
    for name, f in two.items():
        if name.startswith("producers_") and isinstance(f, dict) and "msgs_per_s" in f:
            label, share = limit_share(name, f, 1024, machine)
            lines.append(
                f"{'append 1 KiB, ' + str(f['processes']) + ' process(es) ' + f['status']:<40} "
                f"{f['count']:>10,} {f['msgs_per_s']:>12,} {f['mb_per_s']:>8.1f} "
                f"{_share(label, share):>16}"
            )
    for name in ("pull_latency_in_process", "pull_latency_cross_process"):
        f = two.get(name)
        if f and f.get("status") == "ok":
            lines.append(
                f"{name + ' (ms)':<40} {f['samples']:>10,} {'':>12} {'':>8} {'':>16} "
                f"{f['p50_ms']:>9.3f} {f['p99_ms']:>9.3f}"
            )
    spark_report = report.get("spark")
    if spark_report:
        for name, f in spark_report["figures"].items():
            label, share = limit_share(name, f, 1024, machine)
            lines.append(
                f"{'scan 1 KiB: ' + name:<40} {f['messages']:>10,} {f['msgs_per_s']:>12,} "
                f"{f['mb_per_s']:>8.1f} {_share(label, share):>16}"
            )
    console = report.get("console", {})
    if "pages" in console:
        scale = console["scale"]
        lines.append(
            f"console pages at {scale['topics']:,} topics, {scale['queues']:,} queues, "
            f"{scale['groups']} groups (ms; p50 and p95 of the wall clock, then the CPU p95):"
        )
        for page, f in console["pages"].items():
            lines.append(
                f"{'  ' + page:<40} {f['samples']:>10,} {'':>12} {'':>8} {'':>16} "
                f"{f['p50_ms']:>9.1f} {f['p95_ms']:>9.1f} {f['cpu_p95_ms']:>9.1f}"
            )
    alerts = console.get("alerts")
    if alerts:
        lines.append(
            f"{'alert evaluation, first (s)':<40} {alerts['group_queue_pairs']:>10,} "
            f"{'':>12} {'':>8} {'':>16} {alerts['first_s']:>9.3f}"
        )
        lines.append(
            f"{'alert evaluation, steady (s)':<40} {alerts['group_queue_pairs']:>10,} "
            f"{'':>12} {'':>8} {'':>16} {alerts['steady_p50_s']:>9.3f} "
            f"{alerts['steady_max_s']:>9.3f}"
        )
        lines.append(
            f"{'metrics sample (ms, the sampler task)':<40} {'':>10} {'':>12} {'':>8} {'':>16} "
            f"{alerts['sample_ms_p50']:>9.1f}"
        )
    lines.extend(monitoring_scale.format_lines(report.get("monitoring", {})))
    return "\n".join(lines)


def format_targets(rows: list[dict]) -> str:
    lines = [
        "Targets (issues 9, 22 and 34)",
        f"{'target':<72} {'measured':>12} {'needed':>10}  mark",
        "-" * 104,
    ]
    for row in rows:
        needed = ("<" if row["unit"] in ("ms", "s") else ">=") + f" {row['needed']:,}"
        lines.append(
            f"{row['target']:<72} {row['value']:>12,} {needed:>10}"
            f"  {'pass' if row['met'] else 'MISS'}"
        )
    met = sum(row["met"] for row in rows)
    lines.append(f"{met} of {len(rows)} met")
    return "\n".join(lines)


def format_report(report: dict) -> str:
    parts = []
    if report.get("limits"):
        parts.append(format_limits(report))
    if report.get("tidemark"):
        parts.append(format_tidemark(report))
    if report.get("peers"):
        parts.append(format_peers(report))
    more = format_more(report)
    if more.count("\n") > 2:
        parts.append(more)
    if report.get("filter"):
        parts.append(filter_bench.format_table(report["filter"]))
    if report.get("targets"):
        parts.append(format_targets(report["targets"]))
    machine = report["machine"]
    parts.append(
        f"{machine['cpus']} CPUs, load average {machine['load_start']} at start and "
        f"{machine['load_end']} at end; {report['started']} to {report['ended']} "
        f"({report['wall_s']['total']:.0f} s)"
    )
    return "\n\n".join(parts)


# -------------------------------------------------------------------------------- main


def _selection(only: str | None) -> tuple[set[str], list[str]]:
    if not only:
        return set(SECTIONS), list(PEERS)
    sections: set[str] = set()
    peers: list[str] = []
    for word in (w.strip() for w in only.split(",") if w.strip()):
        if word in SECTIONS:
            sections.add(word)
        elif word == "peers":
            peers.extend(PEERS)
        elif word == "redis":
            peers.extend(["redis_everysec", "redis_always"])
        elif word in PEERS:
            peers.append(word)
        elif word != "limits":
            raise SystemExit(
                f"--only: unknown section {word!r}; known: limits, "
                f"{', '.join(SECTIONS)}, peers, redis, {', '.join(PEERS)}"
            )
    return sections, [p for p in PEERS if p in peers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument("--tiny", action="store_true", help="tiny counts: the tests' run")
    parser.add_argument("--only", help="comma-separated sections (see the module's doc)")
    parser.add_argument("--count", type=int, help="messages per figure and size")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="body sizes")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    parser.add_argument("--output", help="also write the JSON line and the tables here")
    args = parser.parse_args()
    settings = dict(TINY if args.tiny else QUICK if args.quick else FULL)
    if args.count:
        settings["count"] = args.count
    sizes = [int(s) for s in args.sizes.split(",")]
    sections, peer_names = _selection(args.only)
    engine.READ_BATCH = READ_BATCH  # every system reads in batches of 500 here

    began = time.perf_counter()
    report: dict = {
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
            "load_start": [round(x, 2) for x in os.getloadavg()],
        },
        "settings": {**settings, "sizes": sizes, "batch": BATCH, "read_batch": READ_BATCH},
        "peer_info": peer_info(),
        "versions": versions(),
    }
    wall: dict[str, float] = {}

    def timed(name: str, function, *arguments):
        started = time.perf_counter()
        try:
            return function(*arguments)
        finally:
            wall[name] = round(time.perf_counter() - started, 1)
            print(f"[compare] {name}: {wall[name]} s", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="tidemark-compare-", dir=args.dir) as temp:
        workdir = Path(temp)
        report["limits"] = timed(
            "limits", limits.measure, workdir, settings["limit_mib"], settings["limit_syncs"]
        )
        if "tidemark" in sections:
            report["tidemark"] = {}
        if peer_names:
            report["peers"] = {}
        for size in sizes:
            if "tidemark" in sections:
                _settle()
                report["tidemark"][str(size)] = timed(
                    f"tidemark {size}",
                    tidemark_size,
                    workdir,
                    size,
                    settings["count"],
                    settings["single_sync"],
                )
            if peer_names:
                report["peers"][str(size)] = timed(
                    f"peers {size}", run_peers, workdir, size, settings["count"], peer_names
                )
        two: dict = {}
        if "lookups" in sections:
            _settle()
            two["query_by_key"] = timed(
                "query_by_key", engine_two.bench_query_by_key, workdir, settings["keys"]
            )
            _settle()
            two["offset_for_time"] = timed(
                "offset_for_time", engine_two.bench_offset_for_time, workdir, settings["time_count"]
            )
        if "processes" in sections:
            for processes in (1, 2, 4):
                _settle()
                two[f"producers_{processes}"] = timed(
                    f"producers_{processes}",
                    engine_two.bench_producers,
                    workdir,
                    processes,
                    settings["producer_count"],
                )
        if "latency" in sections:
            two["pull_latency_in_process"] = timed(
                "latency in process",
                engine_two.bench_latency_in_process,
                workdir,
                settings["samples"],
            )
            two["pull_latency_cross_process"] = timed(
                "latency cross process",
                engine_two.bench_latency_cross_process,
                workdir,
                settings["samples"],
            )
        if two:
            report["engine_two"] = two
        if "filter" in sections:
            _settle()
            report["filter"] = timed(
                "filter", filter_bench.run, workdir, settings["filter_count"], 1024
            )
        if "spark" in sections:
            _settle()
            report["spark"] = timed(
                "spark", spark, workdir, settings["spark_count"], settings["spark_masters"]
            )
        if sections & {"console", "alerts", "monitoring"}:
            _settle()
            report["console"] = timed(
                "console, alerts and monitoring",
                console_and_alerts,
                workdir,
                settings,
                "console" in sections,
                "alerts" in sections,
                "monitoring" in sections,
            )
            if "monitoring" in report["console"]:
                report["monitoring"] = report["console"].pop("monitoring")
        # Limits again at the end: each limit is the better of the two measurements, so
        # that a burst of someone else's I/O during one of them does not set it.
        report["limits_start"] = report["limits"]
        report["limits_end"] = timed(
            "limits again", limits.measure, workdir, settings["limit_mib"], settings["limit_syncs"]
        )
        report["limits"] = best_limits(report["limits_start"], report["limits_end"])
    report["targets"] = targets(report)
    wall["total"] = round(time.perf_counter() - began, 1)
    report["wall_s"] = wall
    report["machine"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    report["ended"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    line = json.dumps(report)
    table = format_report(report)
    print(line)
    print(table)
    if args.output:
        Path(args.output).write_text(line + "\n" + table + "\n")
    wrong = engine_two.failures(report.get("engine_two", {}))
    if wrong:
        print(f"wrong answers in: {', '.join(wrong)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
