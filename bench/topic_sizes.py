"""The cost of counting topic sizes in the monitoring sampler (issue 30), at scale.

    .venv/bin/python bench/topic_sizes.py [--topics N] [--queues-per-topic N] [--messages N]
                                          [--rounds N]

Builds a store of ``--topics`` topics of ``--queues-per-topic`` queues (default 1,000 × 10:
10,000 queues) with ``--messages`` messages per queue, then times ``take_sample`` (this
process's CPU time) in three situations, each with the size count on and, as the peer in
the same run, off (``SizeTally.count`` replaced by a no-op):

- ``first``: the first sample, which counts every entry of the store;
- ``counting, 1 append per queue``: a sample that counts (once every
  ``TIDEMARK_SIZE_EVERY_S``) after one more message on every queue: the worst case, every
  queue's file read;
- ``between counts, 1 append per queue``: a sample that only drops deleted segments;
- ``counting, no appends``: a counting sample with nothing new.

Each steady figure is the median of ``--rounds`` samples. Prints a table, then one JSON
line. Timings only: no test asserts them.
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

from bench.console import STORE_OPTIONS  # noqa: E402
from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402


def build(store_dir: Path, topics: int, queues: int, messages: int) -> None:
    with MessageStore.open(store_dir, StoreConfig(**STORE_OPTIONS)) as store:
        for t in range(topics):
            name = f"topic-{t:04d}"
            store.create_topic(name, queues=queues)
            store.append_batch(
                name,
                [{"body": b"m" * 100, "queue": q} for q in range(queues) for _ in range(messages)],
            )


def append_one_each(topics: int, queues: int) -> None:
    from console.core.store import get_store

    store = get_store()
    for t in range(topics):
        store.append_batch(
            f"topic-{t:04d}", [{"body": b"n" * 100, "queue": q} for q in range(queues)]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--queues-per-topic", type=int, default=10)
    parser.add_argument("--messages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="tidemark-sizes-"))
    store_dir = workdir / "store"
    build(store_dir, args.topics, args.queues_per_topic, args.messages)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DEBUG", "true")
    os.environ["TIDEMARK_STORE_DIR"] = str(store_dir)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from console.monitoring import sizes
    from console.monitoring.models import (
        CommitWindow,
        GroupSample,
        OffsetTimeline,
        StoreSample,
        TopicBytes,
        TopicSample,
    )
    from console.monitoring.sampler import take_sample

    settings.TIDEMARK_STORE_DIR = store_dir
    settings.TIDEMARK_STORE_OPTIONS = dict(STORE_OPTIONS)
    clock = {"ms": 1_800_000_000_000}
    results: dict[str, dict[str, float]] = {}
    real_count = sizes.SizeTally.count

    def cpu_sample() -> float:
        clock["ms"] += 10_000
        started = time.process_time()
        report = take_sample(clock["ms"])
        assert report.written, report.skipped
        return (time.process_time() - started) * 1000

    for mode in ("on", "off"):
        os.environ["DATABASE_URL"] = f"sqlite:///{workdir / f'{mode}.sqlite3'}"
        connection.close()
        connection.settings_dict["NAME"] = str(workdir / f"{mode}.sqlite3")
        call_command("migrate", verbosity=0)
        for model in (
            StoreSample,
            TopicSample,
            GroupSample,
            OffsetTimeline,
            CommitWindow,
            TopicBytes,
        ):
            model.objects.all().delete()
        sizes.SizeTally.count = real_count if mode == "on" else (lambda *a, **k: None)
        settings.TIDEMARK_SIZE_EVERY_S = 1
        first = cpu_sample()
        counting, between = [], []
        for _ in range(args.rounds):
            settings.TIDEMARK_SIZE_EVERY_S = 1
            append_one_each(args.topics, args.queues_per_topic)
            counting.append(cpu_sample())
            settings.TIDEMARK_SIZE_EVERY_S = 3600
            append_one_each(args.topics, args.queues_per_topic)
            between.append(cpu_sample())
        settings.TIDEMARK_SIZE_EVERY_S = 1
        cpu_sample()  # count what the samples between counts left
        idle = [cpu_sample() for _ in range(args.rounds)]
        results[mode] = {
            "first": round(first, 1),
            "counting, 1 append per queue": round(statistics.median(counting), 1),
            "between counts, 1 append per queue": round(statistics.median(between), 1),
            "counting, no appends": round(statistics.median(idle), 1),
        }
    sizes.SizeTally.count = real_count

    print(f"{'sample (CPU ms)':<36} {'sizes on':>10} {'sizes off':>10}")
    for name in results["on"]:
        print(f"{name:<36} {results['on'][name]:>10} {results['off'][name]:>10}")
    print(
        json.dumps(
            {
                "topics": args.topics,
                "queues": args.topics * args.queues_per_topic,
                "messages_per_queue": args.messages,
                "cpu_ms": results,
            }
        )
    )


if __name__ == "__main__":
    main()
