"""CPU of the figures issue 29 must not slow down, runnable on an old tree as on this one.

    PYTHONPATH=<tree> .venv/bin/python bench/nothing_slower.py appends|console|spark [options]

Imports the engine and the console from ``PYTHONPATH`` (not from this file's tree), so the
same driver measures a tree from before issue 29 and this one, in turn, in the same
minutes. Every figure is CPU time, not wall time (the machine is shared):

- ``appends``: single appends (async and sync) and batches of 500 (async and sync), µs of
  the process's CPU (every thread: the flusher's work included, up to a final ``flush``)
  per message;
- ``console``: bench/console.py's store and pages (CPU ms per request, median over the
  rounds), then the alert task's work (``current_metrics`` + ``evaluate`` over the
  console's store after each new sample, as bench/compare.py's ``alert_evaluation``), then
  bench/monitoring_scale.py's status evaluation (1,000 groups x 20 queues by default):
  CPU ms per evaluation, median of the steady rounds;
- ``pages``: the console part's pages only (``--page NAME`` for some of them,
  ``--profile`` for a CPU-timed cProfile of the timed requests on stderr);
- ``spark``: a store of ``--count`` messages, one ``local[N]`` session, one warm-up query,
  then ``--rounds`` timed queries (count and body bytes); CPU of the whole process tree
  (driver, JVM, Python workers) from the cgroup ``cpu_of`` put it in, per message.

Prints one JSON line. Timings only: no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# bench/console.py would shadow the console package: import nothing from this directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

TOPIC = "bench"
QUEUES = 4
BATCH = 500

#: bench/console.py's store options (small files).
STORE_OPTIONS = {
    "segment_bytes": 16 << 20,
    "index_slots": 4096,
    "index_entries": 65_536,
    "queue_file_entries": 10_000,
    "disk_warn_ratio": 1.0,
    "disk_force_ratio": 1.0,
    "disk_reject_ratio": 1.0,
}

#: bench/compare.py's alert rules.
ALERT_RULES = (
    ("lag above 0 messages", "lag_messages", 0.0),
    ("lag above 60 s", "lag_seconds", 60.0),
    ("drain above 1 h", "drain_seconds", 3600.0),
    ("status WARN or worse", "status_warn", None),
    ("status ERR", "status_err", None),
    ("expiry within 24 h", "expiry_hours", 24.0),
    ("disk above 90%", "disk_ratio", 0.9),
)


def engine_file() -> str:
    import storeadapter.engine as engine
    from storeadapter.engine import _native

    return f"{engine.__file__} {_native.__file__}"


# ----------------------------------------------------------------------------- appends


def appends(workdir: Path, count: int, size: int) -> dict:
    from storeadapter.engine import MessageStore, StoreConfig

    rng = random.Random(size)
    bodies = [rng.randbytes(size) for _ in range(min(count, 50_000))]
    bodies = (bodies * (count // len(bodies) + 1))[:count]
    batches = [bodies[i : i + BATCH] for i in range(0, count, BATCH)]
    results = {}
    for name, mode, batched, n in (
        ("single_async", "async", False, count),
        ("batch_async", "async", True, count),
        ("single_sync", "sync", False, min(count, 5_000)),
        ("batch_sync", "sync", True, count),
    ):
        path = workdir / name
        shutil.rmtree(path, ignore_errors=True)
        store = MessageStore.open(path, StoreConfig(segment_bytes=1 << 30, flush_mode=mode))
        store.create_topic(TOPIC, queues=QUEUES)
        started = time.process_time()
        if batched:
            for batch in batches:
                store.append_batch(TOPIC, batch)
        else:
            append = store.append
            for body in bodies[:n]:
                append(TOPIC, body)
        store.flush()
        cpu = time.process_time() - started
        store.close()
        shutil.rmtree(path)
        results[name] = round(cpu / n * 1e6, 3)
    return {"cpu_us_per_msg": results, "count": count, "size": size}


# ----------------------------------------------------------------------------- console


def queue_counts(topics: int, queues: int) -> list[int]:
    big = min(256, queues - (topics - 1)) if topics > 1 else queues
    rest = queues - big
    counts = [big]
    for i in range(topics - 1):
        counts.append(rest // (topics - 1) + (1 if i < rest % (topics - 1) else 0))
    return counts


def topic_name(i: int) -> str:
    return f"topic-{i:04d}"


def build_console_store(path: Path, topics: int, queues: int, groups: int) -> None:
    """bench/console.py's build_store (3 messages a queue, 5 topics a group)."""
    from storeadapter.engine import MessageStore, StoreConfig

    rng = random.Random(20240611)
    counts = queue_counts(topics, queues)
    messages, per_group = 3, 5
    with MessageStore.open(path, StoreConfig(flush_mode="async", **STORE_OPTIONS)) as store:
        for i, count in enumerate(counts):
            name = topic_name(i)
            store.create_topic(name, queues=count)
            batch = [
                {"body": f'{{"topic": "{name}", "n": {n}}}', "queue": q, "key": f"k{q}-{n}"}
                for q in range(count)
                for n in range(messages)
            ]
            store.append_batch(name, batch)
        for g in range(groups):
            group = f"group-{g:03d}"
            chosen = set(rng.sample(range(1, topics), min(per_group, topics - 1)))
            if g % 4 == 0:
                chosen.add(0)
            for t in sorted(chosen):
                name = topic_name(t)
                first = {q: rng.randint(0, messages // 2) for q in range(counts[t])}
                second = {q: rng.randint(first[q], messages) for q in range(counts[t])}
                store.commit_offsets(group, name, first, who="bench", reason="commit")
                store.commit_offsets(group, name, second, who="bench", reason="commit")
        store.flush()


def setup_django(workdir: Path, store_dir: Path):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DEBUG", "true")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'console.sqlite3'}"
    os.environ["TIDEMARK_STORE_DIR"] = str(store_dir)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    settings.TIDEMARK_STORE_DIR = store_dir
    settings.TIDEMARK_STORE_OPTIONS = dict(STORE_OPTIONS)
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", "bench@localhost", "bench-pass")
    client = Client()
    client.force_login(user)
    return client


def console_pages() -> list[tuple[str, str]]:
    from urllib.parse import urlencode

    big = topic_name(0)
    return [
        ("dashboard", "/"),
        ("topics", "/topics/"),
        (
            "topics sorted+searched",
            "/topics/?" + urlencode({"q": "1", "sort": "last_write", "page": 2}),
        ),
        ("topic detail", f"/topics/{big}/"),
        ("groups", "/groups/"),
        ("group detail", "/groups/group-000/"),
        ("storage", "/storage/"),
        (
            "messages (range)",
            "/messages/?" + urlencode({"mode": "range", "topic": big, "queue": 0}),
        ),
    ]


def time_pages(client, repeat: int, only: list[str] | None = None) -> dict:
    cpu: dict[str, list[float]] = {}
    pages = [(n, u) for n, u in console_pages() if not only or n in only]
    for round_number in range(repeat + 1):
        for name, url in pages:
            started = time.process_time()
            response = client.get(url)
            elapsed = (time.process_time() - started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{url} answered {response.status_code}")
            if round_number:
                cpu.setdefault(name, []).append(elapsed)
    figures = {name: round(statistics.median(v), 2) for name, v in cpu.items()}
    figures["all pages (sum of medians)"] = round(sum(figures.values()), 2)
    return figures


def sample() -> None:
    from console.monitoring.sampler import take_sample

    time.sleep(0.005)
    report = take_sample()
    if not report.written:
        raise RuntimeError(f"no sample written: {report.skipped}")


def alert_evaluation(rounds: int) -> dict:
    """bench/compare.py's alert_evaluation, CPU per evaluation (steady: the first apart)."""
    from django.conf import settings
    from django.utils import timezone

    from console.alerts.evaluate import evaluate
    from console.alerts.models import AlertRule
    from console.alerts.tasks import current_metrics

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    for name, kind, threshold in ALERT_RULES:
        AlertRule.objects.create(
            name=name, kind=kind, threshold=threshold, recipients="ops@example.com"
        )
    sample()
    cpu = []
    pairs = 0
    for _ in range(rounds + 1):
        sample()
        started = time.process_time()
        groups, store = current_metrics()
        changes = evaluate(groups, store, timezone.now())
        cpu.append((time.process_time() - started) * 1000)
        if changes.rule_failures:
            raise RuntimeError(f"{changes.rule_failures} alert rules failed")
        pairs = sum(len(group.queues) for group in groups)
    return {
        "first_cpu_ms": round(cpu[0], 1),
        "steady_cpu_ms": round(statistics.median(cpu[1:]), 1),
        "group_queue_pairs": pairs,
    }


def status_evaluation(workdir: Path, groups: int, group_queues: int, rounds: int) -> dict:
    """bench/monitoring_scale.py's status_evaluation, CPU per evaluation."""
    from django.conf import settings
    from django.utils import timezone

    from console.alerts.evaluate import evaluate
    from console.alerts.models import AlertEvent, AlertRule
    from console.monitoring import current
    from console.monitoring.models import GroupSample, StoreSample, TopicSample
    from storeadapter.access import close_all
    from storeadapter.engine import MessageStore, StoreConfig

    path = workdir / "monitoring-evaluation"
    topics = min(50, groups)
    per_topic = -(-groups // topics)
    with MessageStore.open(path, StoreConfig(flush_mode="async", **STORE_OPTIONS)) as store:
        for t in range(topics):
            name = f"mon-{t:04d}"
            store.create_topic(name, queues=group_queues)
            store.append_batch(
                name, [{"body": b"m", "queue": q} for q in range(group_queues) for _ in range(3)]
            )
            for g in range(per_topic):
                store.commit_offsets(
                    f"mon-group-{t:04d}-{g:03d}",
                    name,
                    dict.fromkeys(range(group_queues), 1),
                    who="bench",
                    reason="commit",
                )
        store.flush()
    close_all()
    settings.TIDEMARK_STORE_DIR = path
    from django.apps import apps

    for model in apps.get_app_config("monitoring").get_models():
        model.objects.all().delete()
    AlertEvent.objects.all().delete()
    AlertRule.objects.all().delete()
    del GroupSample, StoreSample, TopicSample
    current._cache.update(token=None, groups=None)
    rules = [
        ("group in error", AlertRule.STATUS_ERR, None),
        ("group warning", AlertRule.STATUS_WARN, None),
        ("lag above 1", AlertRule.LAG_MESSAGES, 1),
        ("lag above 10 s", AlertRule.LAG_SECONDS, 10),
        ("drains in more than 10 min", AlertRule.DRAIN_SECONDS, 600),
    ]
    for name, kind, threshold in rules:
        AlertRule.objects.create(
            name=name, kind=kind, threshold=threshold, recipients="ops@example.com"
        )
    sample()
    cpu = []
    seen = 0
    for _ in range(rounds + 1):
        sample()
        started = time.process_time()
        metrics = current.group_metrics()
        changes = evaluate(metrics, current.store_metrics(), timezone.now())
        cpu.append((time.process_time() - started) * 1000)
        if changes.rule_failures:
            raise RuntimeError(f"{changes.rule_failures} alert rules failed")
        seen = len(metrics)
    close_all()
    shutil.rmtree(path, ignore_errors=True)
    return {
        "groups": seen,
        "first_cpu_ms": round(cpu[0], 1),
        "steady_cpu_ms": round(statistics.median(cpu[1:]), 1),
    }


def console(workdir: Path, args) -> dict:
    store_dir = workdir / "store"
    build_console_store(store_dir, args.topics, args.queues, args.groups)
    client = setup_django(workdir, store_dir)
    from storeadapter.access import close_all

    try:
        pages = time_pages(client, args.repeat)
        alerts = alert_evaluation(args.rounds)
        status = status_evaluation(workdir, args.mon_groups, args.mon_group_queues, args.rounds)
    finally:
        close_all()
    return {"pages_cpu_ms": pages, "alert_evaluation": alerts, "status_evaluation": status}


def pages_only(workdir: Path, args) -> dict:
    """The console part's pages alone (no alert or status evaluation)."""
    store_dir = workdir / "store"
    build_console_store(store_dir, args.topics, args.queues, args.groups)
    client = setup_django(workdir, store_dir)
    from storeadapter.access import close_all

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)
    try:
        if profiler is not None:
            time_pages(client, 0, args.page)
            profiler.enable()
        pages = time_pages(client, args.repeat, args.page)
    finally:
        if profiler is not None:
            import pstats

            profiler.disable()
            if args.profile_out:
                profiler.dump_stats(args.profile_out)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(60)
        close_all()
    return {"pages_cpu_ms": pages}


# ----------------------------------------------------------------------------- spark


def cgroup_usage() -> int:
    """CPU ns of this process's cpuacct cgroup (cpu_of's), children and JVM included."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, group = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            if group == "/":
                raise SystemExit("run under cpu_of: the root cgroup counts the whole machine")
            return int(Path(f"/sys/fs/cgroup/cpuacct{group}/cpuacct.usage").read_text())
    raise SystemExit("no cpuacct cgroup")


def spark(workdir: Path, args) -> dict:
    from storeadapter.engine import MessageStore, StoreConfig

    path = workdir / "store"
    rng = random.Random(args.size)
    bodies = [rng.randbytes(args.size) for _ in range(1000)]
    with MessageStore.open(path, StoreConfig(segment_bytes=64 << 20, flush_mode="async")) as store:
        store.create_topic(TOPIC, queues=QUEUES)
        for start in range(0, args.count, BATCH):
            store.append_batch(
                TOPIC, [bodies[i % 1000] for i in range(start, min(args.count, start + BATCH))]
            )
        store.flush()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from storeadapter.spark import register

    spark_session = (
        SparkSession.builder.appName("tidemark-nothing-slower")
        .master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark_session.sparkContext.setLogLevel("ERROR")
    register(spark_session)

    def query():
        frame = spark_session.read.format("tidemark").load(str(path))
        return frame.agg(F.count(F.lit(1)).alias("n"), F.sum(F.octet_length("body")).alias("b"))

    def worker_tree(_):
        import storeadapter

        return [storeadapter.__file__]

    try:
        tree = spark_session.sparkContext.parallelize([0], 1).mapPartitions(worker_tree).collect()
        query().collect()
        cpu, wall = [], []
        for _ in range(args.rounds):
            used, started = cgroup_usage(), time.perf_counter()
            row = query().collect()[0]
            wall.append(time.perf_counter() - started)
            cpu.append((cgroup_usage() - used) / 1e9)
            if row["n"] != args.count:
                raise SystemExit(f"counted {row['n']} of {args.count}")
    finally:
        spark_session.stop()
    return {
        "worker_storeadapter": tree[0],
        "master": args.master,
        "count": args.count,
        "cpu_s": [round(c, 3) for c in cpu],
        "cpu_ns_per_msg": round(statistics.median(cpu) / args.count * 1e9, 1),
        "wall_s": [round(w, 3) for w in wall],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("appends", "console", "pages", "spark"))
    parser.add_argument("--page", action="append", help="pages: only this page (repeatable)")
    parser.add_argument("--profile", action="store_true", help="pages: cProfile on stderr")
    parser.add_argument("--profile-out", help="pages: also dump the profile to this file")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mon-groups", type=int, default=1_000)
    parser.add_argument("--mon-group-queues", type=int, default=20)
    parser.add_argument("--master", default="local[1]")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        workdir = Path(temp)
        if args.what == "appends":
            result = appends(workdir, args.count, args.size)
        elif args.what == "console":
            result = console(workdir, args)
        elif args.what == "pages":
            result = pages_only(workdir, args)
        else:
            result = spark(workdir, args)
    print(json.dumps({"what": args.what, "engine": engine_file(), **result}))


if __name__ == "__main__":
    main()
