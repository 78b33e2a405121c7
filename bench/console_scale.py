"""Console pages and the sampler on a topic of a million queues.

    .venv/bin/python bench/console_scale.py [--queues N] [--used N] [--groups N]
                                            [--repeat N] [--dir PATH]

Builds a store in a temporary directory: one shared topic ``big`` of ``--queues`` queues
(default 1,000,000) holding one message on each of ``--used`` queues spread evenly over
it (default 200,000), a few small topics, and ``--groups`` groups (default 3) committing
offsets on a subset of the used queues (the first group on the most). The store is closed
and the console opens it afresh, like a web worker started after the producers.

Then one sample is taken (its duration and report message are printed), and each page is
requested ``--repeat`` times after a first, cold request, through Django's test client
(logged in as a superuser): the topic page (first page, a middle page, a queue jump), the
topic list, the dashboard, the group list, a group's page and the API's topic and queue
list; p50 and p95 of the wall clock. Then samples are taken until every queue of the big
topic has been read once (a full rotation: ``queues / TIDEMARK_SAMPLE_QUEUE_BUDGET``
samples; their mean and max duration), and one more with the budget raised to every queue
(``full_read_sample``: what a sample costs without rotating, for comparison). Prints a
table, then one JSON line. Timings only: no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.console import STORE_OPTIONS, percentile, setup_django  # noqa: E402
from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

DEFAULT_QUEUES = 1_000_000
DEFAULT_USED = 200_000
DEFAULT_GROUPS = 3
DEFAULT_REPEAT = 10
SMALL_TOPICS = 20
TOPIC = "big"
TOPIC_TARGET_MS = 500.0
BATCH = 20_000


def build_store(path: Path, queues: int, used: int, groups: int) -> dict:
    """The big topic, its messages and groups' offsets, and a few small topics."""
    started = time.perf_counter()
    step = max(1, queues // used)
    used_queues = list(range(0, queues, step))[:used]
    commits = 0
    with MessageStore.open(path, StoreConfig(flush_mode="async", **STORE_OPTIONS)) as store:
        store.create_topic(TOPIC, queues=queues, layout="shared")
        for start in range(0, len(used_queues), BATCH):
            store.append_batch(
                TOPIC,
                [{"body": f'{{"q": {q}}}', "queue": q} for q in used_queues[start : start + BATCH]],
            )
        for i in range(SMALL_TOPICS):
            name = f"small-{i:02d}"
            store.create_topic(name, queues=4)
            store.append_batch(name, [{"body": "x", "queue": q} for q in range(4)])
        for g in range(groups):
            # group 0 on every 4th used queue, group 1 on every 40th, …
            subset = used_queues[:: 4 * 10**g]
            store.commit_offsets(
                f"group-{g}", TOPIC, {q: 1 for q in subset[::2]}, who="bench", reason="commit"
            )
            store.commit_offsets(
                f"group-{g}", TOPIC, {q: 0 for q in subset[1::2]}, who="bench", reason="commit"
            )
            commits += len(subset)
        store.flush()
    return {
        "queues": queues,
        "used_queues": len(used_queues),
        "groups": groups,
        "offset_commits": commits,
        "build_s": round(time.perf_counter() - started, 1),
    }


def run_sample() -> dict:
    from console.monitoring.sampler import take_sample

    time.sleep(0.002)  # a sample must be newer than the one before (ms clock)
    started = time.perf_counter()
    report = take_sample()
    return {
        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        "message": report.message(),
        "degraded": bool(getattr(report, "degraded", False)),
    }


def full_rotation(queues: int) -> dict:
    """As many samples as reading every queue once takes (queues / budget); durations."""
    from console.monitoring.scale import queue_budget

    budget = queue_budget()
    durations = [run_sample()["duration_ms"] for _ in range(-(-queues // budget))]
    return {
        "budget": budget,
        "samples": len(durations),
        "mean_ms": round(statistics.mean(durations), 1),
        "max_ms": max(durations),
    }


def full_read_sample(queues: int) -> dict:
    """One sample with the budget raised to every queue: no rotation."""
    from django.conf import settings

    before = getattr(settings, "TIDEMARK_SAMPLE_QUEUE_BUDGET", None)
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = queues
    try:
        return run_sample()
    finally:
        settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = before


def pages(queues: int) -> list[tuple[str, str]]:
    middle = queues // 2
    return [
        ("topic page 1", f"/topics/{TOPIC}/"),
        ("topic middle page", f"/topics/{TOPIC}/?page={max(1, middle // 100)}"),
        ("topic queue jump", f"/topics/{TOPIC}/?queue={middle + 7}"),
        ("topic list", "/topics/"),
        ("dashboard", "/"),
        ("groups", "/groups/"),
        ("group page", "/groups/group-0/"),
        ("api topic", f"/api/v1/topics/{TOPIC}/"),
        ("api queues", f"/api/v1/topics/{TOPIC}/queues/?page=2"),
    ]


def time_pages(client, urls: list[tuple[str, str]], repeat: int) -> dict:
    figures = {}
    for name, url in urls:
        started = time.perf_counter()
        response = client.get(url)
        first = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}, not 200")
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        figures[name] = {
            "url": url,
            "first_ms": round(first, 1),
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(percentile(times, 95), 1),
        }
        print(f"{name}: {figures[name]}", file=sys.stderr, flush=True)
    return figures


def format_table(report: dict) -> str:
    scale = report["scale"]
    lines = [
        f"console at scale: one shared topic of {scale['queues']:,} queues "
        f"({scale['used_queues']:,} with messages), {scale['groups']} groups; "
        f"built in {scale['build_s']} s",
        f"{'page':<20} {'first ms':>9} {'p50 ms':>9} {'p95 ms':>9}",
        "-" * 50,
    ]
    for name, figure in report["pages"].items():
        lines.append(
            f"{name:<20} {figure['first_ms']:>9.1f} {figure['p50_ms']:>9.1f} "
            f"{figure['p95_ms']:>9.1f}"
        )
    for label in ("first_sample", "second_sample", "full_read_sample"):
        sample = report.get(label)
        if sample:
            lines.append(f"{label}: {sample['duration_ms']:.0f} ms; {sample['message']}")
    rotation = report.get("rotation")
    if rotation:
        lines.append(
            f"full rotation: {rotation['samples']} samples of at most {rotation['budget']:,} "
            f"queues, mean {rotation['mean_ms']:.0f} ms, max {rotation['max_ms']:.0f} ms "
            f"(interval {report['interval_s']} s)"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=DEFAULT_QUEUES)
    parser.add_argument("--used", type=int, default=DEFAULT_USED, help="queues with a message")
    parser.add_argument("--groups", type=int, default=DEFAULT_GROUPS)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT)
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    args = parser.parse_args()
    if not 1 <= args.used <= args.queues or args.repeat < 1 or args.groups < 1:
        parser.error("need 1 <= --used <= --queues, --repeat >= 1, --groups >= 1")
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        workdir = Path(temp)
        store_dir = workdir / "store"
        scale = build_store(store_dir, args.queues, args.used, args.groups)
        print(f"built in {scale['build_s']} s", file=sys.stderr, flush=True)
        client = setup_django(workdir, store_dir)
        from storeadapter.access import close_all

        try:
            first_sample = run_sample()
            print(f"first sample: {first_sample}", file=sys.stderr, flush=True)
            figures = time_pages(client, pages(args.queues), args.repeat)
            second_sample = run_sample()
            rotation = full_rotation(args.queues) if second_sample["degraded"] else None
            full_read = full_read_sample(args.queues) if rotation else None
        finally:
            close_all()
    topic_pages = [f for name, f in figures.items() if name.startswith("topic ")]
    report = {
        "machine": {"cpus": os.cpu_count()},
        "scale": scale,
        "pages": figures,
        "first_sample": first_sample,
        "second_sample": second_sample,
        "rotation": rotation,
        "full_read_sample": full_read,
        "interval_s": 10,
        "topic_target_ms": TOPIC_TARGET_MS,
        "topic_met": all(f["p95_ms"] < TOPIC_TARGET_MS for f in topic_pages),
        "sampler_met": (rotation["max_ms"] if rotation else second_sample["duration_ms"]) < 10_000,
    }
    print(format_table(report))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
