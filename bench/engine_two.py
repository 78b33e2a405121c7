"""Store engine benchmark, part two: key and time lookups, many producers, pull latency.

    .venv/bin/python bench/engine_two.py [--keys N] [--time-count N] [--producer-count N]
                                         [--samples N] [--dir PATH]

Also run by ``bench/engine.py`` (``--part two`` or ``--all``, the default). Prints one
JSON line, then a table with the targets from the engine issue (part two) beside the
figures. Every figure checks its answers; a wrong answer is reported (status "wrong")
and makes ``main`` exit with status 1 after printing. Timings only: no test asserts them.

Figures:

* ``query_by_key``: N messages of ~50 B, each with its own key, appended in batches of
  500 (the build rate is reported too); then random single-key queries (limit=1), each
  checked to return the message that carries that key.
* ``offset_for_time``: 1,000,000 messages over 4 queues appended as fast as the engine
  goes; random timestamps between each queue's first and last store time; each answer
  checked against the definition (first offset whose store time is >= t) by reading
  that offset and the one before it.
* ``producers_N``: N producer processes (spawned; each opens the store itself), batches
  of 500 bodies of 1 KiB, async flush; total messages/s and MB/s from the first
  process's start to the last one's end, after checking that every queue's offsets are
  dense (the queue ranges add up to the total). Each on equal page terms: once the
  producers have opened the store, and just before they start, this process writes the
  bytes they will write into a file and deletes it (``page_backing.fresh_pages``:
  ``fresh_us_per_mb`` is what a MB of new pages cost it), so that the figure does not
  hang on what the figure before it freed (docs/PERFORMANCE.md, procs31-s55).
* ``pull_latency_*``: append-to-pull latency. A consumer pulls (timeout_s=1) and commits
  what it got; the producer appends one message at a time after a small random gap. The
  producer waits until the previous message was received and committed before its gap,
  so every sample is one wake-up, not a queue behind a commit. In one process the
  stamp is ``time.perf_counter_ns``; across processes (producer in a child process)
  it is ``time.time_ns``, the one system clock both processes read.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue as queue_module
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from page_backing import fresh_pages  # noqa: E402

from storeadapter.engine import Message, MessageStore, StoreConfig  # noqa: E402

QUEUES = 4
BATCH = 500
KEY_BODY_BYTES = 50
PRODUCER_BODY_BYTES = 1024

DEFAULT_KEYS = 1_000_000
DEFAULT_KEY_QUERIES = 20_000
DEFAULT_TIME_COUNT = 1_000_000
DEFAULT_TIME_LOOKUPS = 20_000
DEFAULT_PRODUCER_COUNT = 1_000_000
DEFAULT_PRODUCERS = (1, 2, 4)
DEFAULT_SAMPLES = 2_000
WARMUP_SAMPLES = 20
GAP_S = (0.0002, 0.002)
STALL_S = 30.0

# Targets from the engine issue, part two (latency in ms, lower is better).
TARGETS = {
    "pull_latency_in_process": {"p99_ms": 2.0},
    "pull_latency_cross_process": {"p99_ms": 20.0},
}


def _config(**overrides) -> StoreConfig:
    return StoreConfig(flush_mode="async", **overrides)


def _fresh(workdir: Path, name: str) -> Path:
    path = Path(workdir) / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def _key(i: int) -> str:
    return f"key-{i:010d}"


def _key_body(i: int) -> bytes:
    return f"body-{i:010d}".encode().ljust(KEY_BODY_BYTES, b".")


# ------------------------------------------------------------- query_by_key


def bench_query_by_key(
    workdir: Path,
    keys: int = DEFAULT_KEYS,
    queries: int = DEFAULT_KEY_QUERIES,
    index_slots: int = 5_000_000,
    index_entries: int = 20_000_000,
    seed: int = 1,
) -> dict:
    """Build an index of ``keys`` distinct keys, then time ``queries`` random lookups."""
    rng = random.Random(seed)
    path = _fresh(workdir, "keys")
    config = _config(index_slots=index_slots, index_entries=index_entries)
    with MessageStore.open(path, config) as store:
        store.create_topic("keys", queues=QUEUES)
        build_seconds = 0.0
        for start in range(0, keys, BATCH):
            batch = [
                Message(_key_body(i), key=_key(i)) for i in range(start, min(start + BATCH, keys))
            ]
            began = time.perf_counter()
            store.append_batch("keys", batch)
            build_seconds += time.perf_counter() - began
        wanted = [rng.randrange(keys) for _ in range(queries)]
        names = [_key(i) for i in wanted]
        query = store.query_by_key
        answers = []
        began = time.perf_counter()
        for name in names:
            answers.append(query("keys", name, None, None, 1))
        seconds = time.perf_counter() - began
        wrong = []
        for i, name, found in zip(wanted, names, answers, strict=True):
            if len(found) != 1 or name not in found[0].keys or found[0].body != _key_body(i):
                wrong.append(
                    {"key": name, "got": [(m.keys, m.body[:20].decode()) for m in found[:2]]}
                )
        missing_key = query("keys", "no-such-key", None, None, 1)
        if missing_key:
            wrong.append({"key": "no-such-key", "got": len(missing_key)})
    shutil.rmtree(path, ignore_errors=True)
    return {
        "status": "wrong" if wrong else "ok",
        "keys": keys,
        "queries": queries,
        "queries_per_s": round(queries / seconds),
        "build_msgs_per_s": round(keys / build_seconds),
        "build_s": round(build_seconds, 2),
        "wrong": len(wrong),
        "wrong_examples": wrong[:3],
    }


# ---------------------------------------------------------- offset_for_time


def bench_offset_for_time(
    workdir: Path,
    count: int = DEFAULT_TIME_COUNT,
    lookups: int = DEFAULT_TIME_LOOKUPS,
    seed: int = 2,
) -> dict:
    """Append ``count`` messages over 4 queues, time ``lookups`` random time lookups."""
    rng = random.Random(seed)
    path = _fresh(workdir, "times")
    body = b"t" * KEY_BODY_BYTES
    result: dict = {"count": count, "lookups": lookups}
    try:
        with MessageStore.open(path, _config()) as store:
            store.create_topic("times", queues=QUEUES)
            began = time.perf_counter()
            batch = [body] * BATCH
            for start in range(0, count, BATCH):
                store.append_batch("times", batch[: min(BATCH, count - start)])
            result["append_s"] = round(time.perf_counter() - began, 2)
            lookup = store.offset_for_time
            ranges = {}
            for q in range(QUEUES):
                low, high = store.queue_range("times", q)
                first = store.read("times", q, low, 1)[0].store_time_ms
                last = store.read("times", q, high - 1, 1)[0].store_time_ms
                ranges[q] = (low, high, first, last)
            result["store_time_span_ms"] = max(r[3] for r in ranges.values()) - min(
                r[2] for r in ranges.values()
            )
            asks = []
            for _ in range(lookups):
                q = rng.randrange(QUEUES)
                asks.append((q, rng.randint(ranges[q][2], ranges[q][3])))
            began = time.perf_counter()
            answers = [lookup("times", q, t) for q, t in asks]
            seconds = time.perf_counter() - began

            # Edge cases, not timed: before the first store time -> min; after the last -> max.
            checks = list(zip(asks, answers, strict=True))
            for q, (_, _, first, last) in ranges.items():
                checks.append(((q, first - 1000), lookup("times", q, first - 1000)))
                checks.append(((q, last + 1000), lookup("times", q, last + 1000)))
                checks.append(((q, 0), lookup("times", q, 0)))
            wrong = []
            for (q, t), offset in checks:
                low, high = ranges[q][0], ranges[q][1]
                fine = isinstance(offset, int) and low <= offset <= high
                if fine and offset < high:
                    fine = store.read("times", q, offset, 1)[0].store_time_ms >= t
                if fine and offset > low:
                    fine = store.read("times", q, offset - 1, 1)[0].store_time_ms < t
                if not fine:
                    wrong.append({"queue": q, "t": t, "got": offset, "range": [low, high]})
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return {
        **result,
        "status": "wrong" if wrong else "ok",
        "lookups_per_s": round(lookups / seconds),
        "wrong": len(wrong),
        "wrong_examples": wrong[:3],
    }


# ---------------------------------------------------------------- producers


def _producer(path: str, count: int, seed: int, barriers, results) -> None:
    """One producer process: open the store, wait for the others, append, report."""
    rng = random.Random(seed)
    pool = [rng.randbytes(PRODUCER_BODY_BYTES) for _ in range(BATCH * 2)]
    batches = []
    for start in range(0, count, BATCH):
        size = min(BATCH, count - start)
        offset = rng.randrange(BATCH)
        batches.append(pool[offset : offset + size])
    store = MessageStore.open(path, _config())
    try:
        for barrier in barriers:  # opened; then go, after the fresh pages
            barrier.wait()
        began = time.monotonic()
        written = 0
        for batch in batches:
            written += len(store.append_batch("topic", batch))
        ended = time.monotonic()
    finally:
        store.close()
    results.put((began, ended, written))


def bench_producers(
    workdir: Path,
    processes: int,
    count: int = DEFAULT_PRODUCER_COUNT,
) -> dict:
    """``count`` messages of 1 KiB appended by ``processes`` producer processes at once."""
    context = multiprocessing.get_context("spawn")
    path = _fresh(workdir, f"producers-{processes}")
    with MessageStore.open(path, _config()) as store:
        store.create_topic("topic", queues=QUEUES)
    barriers = (context.Barrier(processes + 1), context.Barrier(processes + 1))
    results = context.Queue()
    shares = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
    workers = [
        context.Process(target=_producer, args=(str(path), share, i, barriers, results))
        for i, share in enumerate(shares)
    ]
    for worker in workers:
        worker.start()
    try:
        barriers[0].wait(timeout=600)
        pages = fresh_pages(str(workdir), count * (PRODUCER_BODY_BYTES + 100) // 1_000_000)
        barriers[1].wait(timeout=600)
    except threading.BrokenBarrierError:
        pages = {}
    reports = []
    for _ in workers:
        try:
            reports.append(results.get(timeout=600))
        except queue_module.Empty:
            break
    for worker in workers:
        worker.join(timeout=60)
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed or len(reports) != processes:
        shutil.rmtree(path, ignore_errors=True)
        return {"status": "wrong", "error": f"producer processes failed: exit codes {failed}"}
    seconds = max(r[1] for r in reports) - min(r[0] for r in reports)
    written = sum(r[2] for r in reports)
    with MessageStore.open(path, _config()) as store:
        ranges = [store.queue_range("topic", q) for q in range(QUEUES)]
        # Spot-check density: every offset at a queue's ends and a few inside is readable
        # and says it is that offset.
        rng = random.Random(processes)
        holes = 0
        for q, (low, high) in enumerate(ranges):
            for offset in {low, high - 1, *rng.sample(range(low, high), min(50, high - low))}:
                got = store.read("topic", q, offset, 1)
                if not got or got[0].queue_offset != offset:
                    holes += 1
    shutil.rmtree(path, ignore_errors=True)
    total = sum(high - low for low, high in ranges)
    dense = total == count == written and all(low == 0 for low, _ in ranges) and not holes
    return {
        "status": "ok" if dense else "wrong",
        "processes": processes,
        "count": count,
        "msgs_per_s": round(count / seconds),
        "mb_per_s": round(count * PRODUCER_BODY_BYTES / seconds / 1e6, 1),
        "seconds": round(seconds, 2),
        "fresh_us_per_mb": pages.get("us_per_mb"),
        "queue_ranges": ranges,
    }


# ------------------------------------------------------------- pull latency


def _summary(latencies_ns: list[int], target: dict) -> dict:
    ordered = sorted(latencies_ns)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1e6

    return {
        "samples": len(ordered),
        "p50_ms": round(at(0.50), 3),
        "p90_ms": round(at(0.90), 3),
        "p99_ms": round(at(0.99), 3),
        "max_ms": round(ordered[-1] / 1e6, 3),
        "mean_ms": round(statistics.fmean(ordered) / 1e6, 3),
        "target_p99_ms": target["p99_ms"],
        "met": at(0.99) < target["p99_ms"],
    }


def _consume(store, topic, total, clock, acknowledge, latencies, errors) -> None:
    """Pull until ``total`` messages arrived; note each latency, commit, acknowledge."""
    received = 0
    last_seen = time.monotonic()
    try:
        while received < total:
            messages = store.pull("lat", topic, 0, 32, timeout_s=1)
            now = clock()
            if not messages:
                if time.monotonic() - last_seen > STALL_S:
                    raise TimeoutError(f"no message for {STALL_S} s after {received}")
                continue
            last_seen = time.monotonic()
            for message in messages:
                latencies.append(now - int(message.body))
            received += len(messages)
            store.commit_offset("lat", topic, 0, messages[-1].queue_offset + 1)
            for _ in messages:
                acknowledge()
    except BaseException as error:  # report it to the main thread
        errors.append(error)
        acknowledge()


def bench_latency_in_process(workdir: Path, samples: int = DEFAULT_SAMPLES, seed: int = 3) -> dict:
    """A thread pulls while the main thread appends one message at a time."""
    rng = random.Random(seed)
    path = _fresh(workdir, "latency-local")
    total = samples + WARMUP_SAMPLES
    latencies: list[int] = []
    errors: list[BaseException] = []
    acks: queue_module.SimpleQueue = queue_module.SimpleQueue()
    with MessageStore.open(path, _config()) as store:
        store.create_topic("lat", queues=1)
        consumer = threading.Thread(
            target=_consume,
            args=(
                store,
                "lat",
                total,
                time.perf_counter_ns,
                lambda: acks.put(1),
                latencies,
                errors,
            ),
            daemon=True,
        )
        consumer.start()
        for _ in range(total):
            time.sleep(rng.uniform(*GAP_S))
            store.append("lat", str(time.perf_counter_ns()).encode())
            try:
                acks.get(timeout=STALL_S)
            except queue_module.Empty:
                errors.append(TimeoutError("the consumer thread stopped receiving"))
                break
            if errors:
                break
        consumer.join(timeout=STALL_S)
    shutil.rmtree(path, ignore_errors=True)
    if errors or len(latencies) < total:
        return {"status": "wrong", "error": repr(errors[0]) if errors else "lost messages"}
    return {
        "status": "ok",
        **_summary(latencies[WARMUP_SAMPLES:], TARGETS["pull_latency_in_process"]),
    }


def _remote_producer(path: str, total: int, seed: int, go) -> None:
    """Child process: append one stamped message each time the parent says go."""
    rng = random.Random(seed)
    store = MessageStore.open(path, _config())
    try:
        go.send("ready")
        for _ in range(total):
            if not go.poll(STALL_S):
                break
            if go.recv() != "go":
                break
            time.sleep(rng.uniform(*GAP_S))
            store.append("lat", str(time.time_ns()).encode())
    finally:
        store.close()


def bench_latency_cross_process(
    workdir: Path, samples: int = DEFAULT_SAMPLES, seed: int = 4
) -> dict:
    """The producer appends in a child process; this process pulls."""
    context = multiprocessing.get_context("spawn")
    path = _fresh(workdir, "latency-remote")
    total = samples + WARMUP_SAMPLES
    latencies: list[int] = []
    errors: list[BaseException] = []
    with MessageStore.open(path, _config()) as store:
        store.create_topic("lat", queues=1)
        here, there = context.Pipe()
        child = context.Process(target=_remote_producer, args=(str(path), total, seed, there))
        child.start()
        ready = here.poll(60) and here.recv() == "ready"
        if ready:
            here.send("go")
            _consume(store, "lat", total, time.time_ns, lambda: here.send("go"), latencies, errors)
        here.send("stop")
        child.join(timeout=60)
    shutil.rmtree(path, ignore_errors=True)
    if not ready or errors or len(latencies) < total:
        return {
            "status": "wrong",
            "error": repr(errors[0]) if errors else "the producer process never got ready",
        }
    return {
        "status": "ok",
        **_summary(latencies[WARMUP_SAMPLES:], TARGETS["pull_latency_cross_process"]),
    }


# --------------------------------------------------------------------- all


def run_part_two(
    workdir: Path,
    keys: int = DEFAULT_KEYS,
    time_count: int = DEFAULT_TIME_COUNT,
    producer_count: int = DEFAULT_PRODUCER_COUNT,
    producers: tuple[int, ...] = DEFAULT_PRODUCERS,
    samples: int = DEFAULT_SAMPLES,
) -> dict:
    """Every part-two figure, in a dict keyed by figure name."""
    workdir = Path(workdir)
    report: dict = {}
    timings: dict = {}

    def timed(name: str, function, *args) -> None:
        began = time.perf_counter()
        report[name] = function(workdir, *args)
        timings[name] = round(time.perf_counter() - began, 1)

    timed("query_by_key", bench_query_by_key, keys)
    timed("offset_for_time", bench_offset_for_time, time_count)
    for processes in producers:
        timed(f"producers_{processes}", bench_producers, processes, producer_count)
    timed("pull_latency_in_process", bench_latency_in_process, samples)
    timed("pull_latency_cross_process", bench_latency_cross_process, samples)
    report["wall_s"] = timings
    return report


def failures(report: dict) -> list[str]:
    """Names of figures whose answers were wrong."""
    return [
        name
        for name, figure in report.items()
        if isinstance(figure, dict) and figure.get("status") == "wrong"
    ]


def format_table(report: dict) -> str:
    lines = [
        f"{'figure (part two)':<30} {'count':>10} {'per second':>12} {'MB/s':>8} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'target':>12}",
        "-" * 94,
    ]

    def problem(name: str, figure: dict) -> bool:
        if figure.get("status") == "wrong":
            detail = figure.get("error") or (
                f"{figure.get('wrong')} wrong answers" if figure.get("wrong") else ""
            )
            lines.append(f"{name:<30} {figure['status'].upper():>10}  {detail}")
            return True
        return False

    figure = report.get("query_by_key")
    if figure and not problem("query_by_key", figure):
        lines.append(
            f"{'key index build (append)':<30} {figure['keys']:>10,} "
            f"{figure['build_msgs_per_s']:>12,}"
        )
        lines.append(
            f"{'query_by_key (limit=1)':<30} {figure['keys']:>10,} {figure['queries_per_s']:>12,}"
            f" {'':>8} {'':>8} {'':>8} {'10M keys':>12}"
        )
    figure = report.get("offset_for_time")
    if figure and not problem("offset_for_time", figure):
        lines.append(
            f"{'offset_for_time':<30} {figure['count']:>10,} {figure['lookups_per_s']:>12,}"
        )
    for name, figure in report.items():
        if not name.startswith("producers_") or problem(name, figure):
            continue
        label = f"append, {figure['processes']} producer process" + (
            "es" if figure["processes"] > 1 else ""
        )
        lines.append(
            f"{label:<30} {figure['count']:>10,} {figure['msgs_per_s']:>12,} "
            f"{figure['mb_per_s']:>8.1f}"
        )
    for name in ("pull_latency_in_process", "pull_latency_cross_process"):
        figure = report.get(name)
        if figure and not problem(name, figure):
            limit = f"{figure['target_p99_ms']:g}"
            target = f"p99 < {limit} ms" + ("" if figure["met"] else " (missed)")
            lines.append(
                f"{name:<30} {figure['samples']:>10,} {'':>12} {'':>8} "
                f"{figure['p50_ms']:>8.3f} {figure['p99_ms']:>8.3f} "
                f"{target:>12}"
            )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The part-two options, shared with bench/engine.py."""
    parser.add_argument(
        "--keys", type=int, default=DEFAULT_KEYS, help="distinct keys for query_by_key"
    )
    parser.add_argument(
        "--time-count",
        type=int,
        default=DEFAULT_TIME_COUNT,
        help="messages for offset_for_time",
    )
    parser.add_argument(
        "--producer-count",
        type=int,
        default=DEFAULT_PRODUCER_COUNT,
        help="messages per producer-process figure (split over the processes)",
    )
    parser.add_argument(
        "--producers",
        default=",".join(map(str, DEFAULT_PRODUCERS)),
        help="producer process counts, comma-separated",
    )
    parser.add_argument(
        "--samples", type=int, default=DEFAULT_SAMPLES, help="latency samples per figure"
    )


def run_from_arguments(workdir: Path, args: argparse.Namespace) -> dict:
    return run_part_two(
        workdir,
        keys=args.keys,
        time_count=args.time_count,
        producer_count=args.producer_count,
        producers=tuple(int(p) for p in args.producers.split(",")),
        samples=args.samples,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        report = {
            "machine": {"cpus": os.cpu_count()},
            "part_two": run_from_arguments(Path(temp), args),
        }
    print(json.dumps(report))
    print(format_table(report["part_two"]))
    wrong = failures(report["part_two"])
    if wrong:
        print(f"wrong answers in: {', '.join(wrong)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
