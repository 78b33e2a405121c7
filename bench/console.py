"""Console page latency at scale, through Django's test client.

    .venv/bin/python bench/console.py [--topics N] [--queues N] [--groups N] [--repeat N]
                                      [--messages N] [--topics-per-group N] [--dir PATH]

Builds a store in a temporary directory (small segment and index files, as the console
tests use): ``--topics`` topics holding ``--queues`` queues in all (one topic gets the
most queues, the rest share the others evenly), ``--messages`` messages per queue, and
``--groups`` consumer groups, each committing offsets (twice, so it has a history) on
every queue of ``--topics-per-group`` topics; every fourth group also consumes the
biggest topic. The builder process closes the store; the console then opens it afresh
in this process, like a web worker started after the producers and consumers.

Django runs with ``console.settings`` on a temporary SQLite database (migrated here),
logged in as a superuser with ``force_login``. Each round requests every page once, in
turn; the first round is reported apart (``first_ms``: the cold request, which loads the
queues it touches) and the other ``--repeat`` rounds give p50, p95 and max of the wall
clock, and p50 and p95 of this process's CPU time (garbage collections included): on a
shared machine, a wall-clock tail well above the CPU one was spent waiting for a core.
Every response must be a 200 or the run stops. Prints a table, then one JSON line.
Timings only: no test asserts them.

Pages: the dashboard, the topic list (first page; and page 2 of a search sorted by last
write), the biggest topic's page, the group list, the page of a group consuming the
biggest topic, storage, and a message search by queue range (the biggest topic's queue 0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

DEFAULT_TOPICS = 1_000
DEFAULT_QUEUES = 10_000
DEFAULT_GROUPS = 200
DEFAULT_REPEAT = 30
DEFAULT_MESSAGES = 3
DEFAULT_TOPICS_PER_GROUP = 5
BIG_TOPIC_QUEUES = 256
TARGET_P95_MS = 150.0
SEED = 20240611

#: Small files, as in tests/console/conftest.py: a default segment reserves 1 GiB and
#: the key index 420 MB.
STORE_OPTIONS = {
    "segment_bytes": 16 << 20,
    "index_slots": 4096,
    "index_entries": 65_536,
    "queue_file_entries": 10_000,
    "disk_warn_ratio": 1.0,
    "disk_force_ratio": 1.0,
    "disk_reject_ratio": 1.0,
}


def queue_counts(topics: int, queues: int) -> list[int]:
    """Queues per topic: the first topic gets the most, the others share the rest."""
    if queues < topics:
        raise SystemExit(f"--queues ({queues}) must be at least --topics ({topics})")
    big = min(BIG_TOPIC_QUEUES, queues - (topics - 1)) if topics > 1 else queues
    rest = queues - big
    counts = [big]
    for i in range(topics - 1):
        counts.append(rest // (topics - 1) + (1 if i < rest % (topics - 1) else 0))
    return counts


def topic_name(i: int) -> str:
    return f"topic-{i:04d}"


def build_store(path: Path, topics: int, queues: int, groups: int, messages: int, per_group: int):
    """Create the topics, messages and groups' offsets; return the scale built."""
    rng = random.Random(SEED)
    counts = queue_counts(topics, queues)
    started = time.perf_counter()
    total_messages = commits = 0
    with MessageStore.open(path, StoreConfig(flush_mode="async", **STORE_OPTIONS)) as store:
        for i, count in enumerate(counts):
            name = topic_name(i)
            store.create_topic(name, queues=count)
            batch = [
                {"body": f'{{"topic": "{name}", "n": {n}}}', "queue": q, "key": f"k{q}-{n}"}
                for q in range(count)
                for n in range(messages)
            ]
            if batch:
                store.append_batch(name, batch)
                total_messages += len(batch)
        for g in range(groups):
            group = f"group-{g:03d}"
            chosen = set(rng.sample(range(1, topics), min(per_group, topics - 1)))
            if g % 4 == 0 or topics == 1:
                chosen.add(0)
            for t in sorted(chosen):
                name = topic_name(t)
                first = {q: rng.randint(0, messages // 2) for q in range(counts[t])}
                second = {q: rng.randint(first[q], messages) for q in range(counts[t])}
                store.commit_offsets(group, name, first, who="bench", reason="commit")
                store.commit_offsets(group, name, second, who="bench", reason="commit")
                commits += 2 * counts[t]
        store.flush()
    return {
        "topics": topics,
        "queues": sum(counts),
        "biggest_topic_queues": counts[0],
        "groups": groups,
        "messages": total_messages,
        "offset_commits": commits,
        "build_s": round(time.perf_counter() - started, 1),
    }


def setup_django(workdir: Path, store_dir: Path):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DEBUG", "true")  # a workstation's settings, as `make run`'s
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


def pages(scale: dict) -> list[tuple[str, str]]:
    big = topic_name(0)
    busiest = "group-000"  # consumes the biggest topic
    sorted_query = urlencode({"q": "1", "sort": "last_write", "page": 2})
    messages_query = urlencode({"mode": "range", "topic": big, "queue": 0})
    return [
        ("dashboard", "/"),
        ("topics", "/topics/"),
        ("topics sorted+searched", f"/topics/?{sorted_query}"),
        ("topic detail (biggest)", f"/topics/{big}/"),
        ("groups", "/groups/"),
        ("group detail", f"/groups/{busiest}/"),
        ("storage", "/storage/"),
        ("messages (range)", f"/messages/?{messages_query}"),
    ]


def time_pages(client, urls: list[tuple[str, str]], repeat: int) -> dict:
    """Wall-clock and CPU time (this process's, garbage collections included) per page.

    The CPU figure tells the page's own cost from waiting for a core that another
    process was using: on a shared machine the wall-clock tail can be someone else's.
    """
    samples: dict[str, list[float]] = {name: [] for name, _ in urls}
    cpu: dict[str, list[float]] = {name: [] for name, _ in urls}
    first: dict[str, float] = {}
    for round_number in range(repeat + 1):
        for name, url in urls:
            cpu_started = time.process_time()
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            cpu_elapsed = (time.process_time() - cpu_started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{url} answered {response.status_code}, not 200")
            if round_number == 0:
                first[name] = elapsed
            else:
                samples[name].append(elapsed)
                cpu[name].append(cpu_elapsed)
    figures = {}
    for name, url in urls:
        times = sorted(samples[name])
        cpu_times = sorted(cpu[name])
        figures[name] = {
            "url": url,
            "first_ms": round(first[name], 1),
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(percentile(times, 95), 1),
            "max_ms": round(times[-1], 1),
            "cpu_p50_ms": round(statistics.median(cpu_times), 1),
            "cpu_p95_ms": round(percentile(cpu_times, 95), 1),
            "samples": len(times),
        }
    return figures


def percentile(ordered: list[float], p: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def format_table(report: dict) -> str:
    scale = report["scale"]
    lines = [
        f"console pages: {scale['topics']:,} topics, {scale['queues']:,} queues "
        f"(biggest topic {scale['biggest_topic_queues']}), {scale['groups']} groups, "
        f"{scale['messages']:,} messages; target p95 < {TARGET_P95_MS:g} ms",
        f"{'page':<26} {'first ms':>9} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9} "
        f"{'cpu p95':>9}  target",
        "-" * 82,
    ]
    for name, figure in report["pages"].items():
        met = "ok" if figure["p95_ms"] < TARGET_P95_MS else "MISSED"
        lines.append(
            f"{name:<26} {figure['first_ms']:>9.1f} {figure['p50_ms']:>9.1f} "
            f"{figure['p95_ms']:>9.1f} {figure['max_ms']:>9.1f} {figure['cpu_p95_ms']:>9.1f}  {met}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=DEFAULT_TOPICS)
    parser.add_argument("--queues", type=int, default=DEFAULT_QUEUES, help="queues in all")
    parser.add_argument("--groups", type=int, default=DEFAULT_GROUPS)
    parser.add_argument(
        "--repeat", type=int, default=DEFAULT_REPEAT, help="timed requests per page"
    )
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES, help="messages per queue")
    parser.add_argument(
        "--topics-per-group",
        type=int,
        default=DEFAULT_TOPICS_PER_GROUP,
        help="topics each group commits offsets on",
    )
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    args = parser.parse_args()
    if args.topics < 1 or args.repeat < 1 or args.groups < 1:
        parser.error("--topics, --groups and --repeat must be at least 1")
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        workdir = Path(temp)
        store_dir = workdir / "store"
        scale = build_store(
            store_dir,
            args.topics,
            args.queues,
            args.groups,
            args.messages,
            args.topics_per_group,
        )
        client = setup_django(workdir, store_dir)
        from storeadapter.access import close_all

        try:
            figures = time_pages(client, pages(scale), args.repeat)
        finally:
            close_all()
    report = {
        "machine": {"cpus": os.cpu_count()},
        "scale": scale,
        "target_p95_ms": TARGET_P95_MS,
        "pages": figures,
        "met": all(f["p95_ms"] < TARGET_P95_MS for f in figures.values()),
    }
    print(format_table(report))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
