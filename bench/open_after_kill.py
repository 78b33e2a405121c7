"""The open of a shared topic's store after its writer was SIGKILLed (issue 33: "a million
queues after a SIGKILL: under 10 s, memory bounded").

    python bench/open_after_kill.py build DIR --queues 1000000 --messages 4000000 [--groups 2]
    python bench/open_after_kill.py open DIR [--drop-groups]

``build`` makes a store at DIR in a child process: one shared topic of ``--queues``
queues, ``--messages`` messages of 58 bytes in batches of 1,000 ``{body, queue}`` dicts
to random queues (default settings: the log flushed every 500 ms, the blocks on their own
cadence), then SIGKILLs the child right after its last batch; with ``--groups N``, N groups commit a
position on every queue before the last batch (an operator's groups: the open's clamp of
positions past the ends looks at each). ``open`` opens the store at
DIR once (copy it first: the open recovers it) and prints, as JSON, the open's CPU
seconds (user + system of this process, ``getrusage`` around ``MessageStore.open``), its
wall seconds, the peak RSS of the process when the open returns and after the recovery
report is read (the store's threads run meanwhile), its RSS before the open and after it
(anonymous and file-backed), the groups' positions and what recovery reports; with
``--drop-groups`` the copy's offsets are removed first, so the same store's open without
its groups is printed beside the one with them. Run it with ``PYTHONPATH`` set
to the engine to measure (a base beside a change).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import sys
import time


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _rss_parts_mb() -> dict[str, float]:
    """The process's resident set now, anonymous and file-backed (mapped files)."""
    parts = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("RssAnon:", "RssFile:")):
                name, value, _ = line.split()
                parts[name[:-1]] = round(int(value) / 1024)
    return parts


def build(
    path: str, queues: int, messages: int, retain_half: bool = False, groups: int = 0
) -> None:
    pid = os.fork()
    if pid == 0:
        from storeadapter.engine import MessageStore, StoreConfig

        small = StoreConfig(retention_hours=1, segment_bytes=32 << 20)
        store = MessageStore.open(path, small if retain_half else None)
        store.create_topic("million", queues=queues, layout="shared")
        rng = random.Random(33)
        body = b"x" * 58
        sent = 0
        held = [0] * queues  # messages per queue, for the groups' positions
        while sent < messages:
            if retain_half and sent == messages // 2:
                # Retention deletes the segments of the first half: most queues' first
                # entries are then below the log's start (their minimums move on open).
                store.flush()
                cut = store.stats().commit_log.tail
                later = int(time.time() * 1000) + 10 * 365 * 86_400_000
                store.delete_expired(now_ms=later, may_delete=lambda s, cut=cut: s["end"] <= cut)
            n = min(1000, messages - sent)
            batch = [rng.randrange(queues) for _ in range(n)]
            for queue in batch:
                held[queue] += 1
            store.append_batch("million", [{"body": body, "queue": queue} for queue in batch])
            sent += n
            if groups and sent == messages - n:
                # Before the last batch: group g committed (g+1)/groups of every queue
                # (group 0 of 1 everything), in commits of 100,000 queues.
                for g in range(groups):
                    for low in range(0, queues, 100_000):
                        offsets = {
                            q: held[q] * (g + 1) // groups
                            for q in range(low, min(queues, low + 100_000))
                        }
                        store.commit_offsets(f"group{g}", "million", offsets, who="bench")
                print(f"{groups} groups committed on {queues} queues", flush=True)
            if sent % 500_000 == 0:
                print(f"{sent} sent", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def open_once(path: str, drop_groups: bool = False) -> None:
    import shutil

    from storeadapter.engine import MessageStore

    if drop_groups:
        shutil.rmtree(os.path.join(path, "offsets"))

    rss_before = _rss_mb()
    cpu, wall = _cpu(), time.perf_counter()
    store = MessageStore.open(path)
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    peak_at_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = store.stats(topics=False).last_recovery
    held = store._offsets  # noqa: SLF001 - a count, without a group walk
    if hasattr(held, "topic_positions"):
        positions = sum(len(queues) for _group, _topic, queues in held.topic_positions())
    else:  # an engine before the positions were kept by group and topic
        positions = len(held.offsets)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    parts = _rss_parts_mb()
    store.close()
    print(
        json.dumps(
            {
                "open_cpu_s": round(cpu, 2),
                "open_wall_s": round(wall, 2),
                "peak_rss_at_open_mb": round(peak_at_open),
                "peak_rss_mb": round(peak),
                "rss_before_open_mb": round(rss_before),
                "rss_anon_after_mb": parts.get("RssAnon"),
                "rss_file_after_mb": parts.get("RssFile"),
                "records_past_dispatched": report.records,
                "native_replayed": report.native_replayed,
                "native_ends": getattr(report, "native_ends", None),
                "dropped_queue_entries": report.dropped_queue_entries,
                "clean_shutdown": report.clean_shutdown,
                "group_positions": positions,
                "offsets_clamped": len(report.offsets_clamped),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["build", "open"])
    parser.add_argument("dir")
    parser.add_argument("--queues", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument(
        "--groups",
        type=int,
        default=0,
        help="build: this many groups commit a position on every queue before the last batch",
    )
    parser.add_argument(
        "--drop-groups",
        action="store_true",
        help="open: remove the copy's offsets first (the same store without its groups)",
    )
    parser.add_argument(
        "--retain-half",
        action="store_true",
        help="build: retention deletes the log's first half midway (32 MiB segments)",
    )
    args = parser.parse_args()
    if args.what == "build":
        build(args.dir, args.queues, args.messages, args.retain_half, args.groups)
    else:
        open_once(args.dir, args.drop_groups)


if __name__ == "__main__":
    sys.exit(main())
