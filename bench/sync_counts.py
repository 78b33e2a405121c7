"""The 8-thread sync figure's counts: syscalls, page faults and context switches a round.

    .venv/bin/python bench/sync_counts.py [--size 50] [--count 16000] [--threads 8] [--dir PATH]

Runs bench/sync_threads.py's workload (bench/engine.py's ``_append_threads``: 8 threads of
single sync ``append``s into a new sync store) under ``perf record`` (the tracepoints
``raw_syscalls:sys_enter``, ``sched:sched_switch`` and ``exceptions:page_fault_user``,
timestamps on CLOCK_MONOTONIC) and counts, inside the workload's window only, each thread
kind's syscalls by name, its page faults and its context switches, voluntary (it slept)
and involuntary (preempted), a fdatasync (a group commit round) and a message. The flusher
is the thread named ``tidemark-group-commit``; the appenders are the rest of the process.
These counts do not move with the machine's load the way the wall clock does
(docs/PERFORMANCE.md, "sync31-s47"); the involuntary switches do (other processes
preempt), so read them beside the load. Prints one JSON line. Needs perf and the
tracepoints (root, or perf_event_paranoid permitting).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

EVENTS = "raw_syscalls:sys_enter,sched:sched_switch,exceptions:page_fault_user"
FLUSHER = "tidemark-group"  # the flusher's name as the kernel keeps it (15 bytes)
#: Context switches counted: voluntary (the thread slept), involuntary (preempted), and
#: the involuntary ones split by the thread that took the CPU.
SWITCHES = (
    "voluntary",
    "involuntary",
    "involuntary_to_ours",
    "involuntary_to_flusher",
    "involuntary_to_others",
)


def _workload(work: Path, size: int, count: int, threads: int) -> dict:
    """The 8 threads' run alone; its window on CLOCK_MONOTONIC and its fdatasyncs."""
    import compare
    import engine

    path = work / "threads-sync"
    store = engine._open(path, "sync", 1 << 30)
    try:
        bodies = compare.bodies_for(size, count)
        syncs = store.stats(topics=False).commit_log.syncs
        started = time.clock_gettime(time.CLOCK_MONOTONIC)
        seconds = engine._append_threads(store, bodies, threads)
        ended = time.clock_gettime(time.CLOCK_MONOTONIC)
        syncs = store.stats(topics=False).commit_log.syncs - syncs
    finally:
        store.close()
    return {"window": [started, ended], "syncs": syncs, "seconds": seconds, "count": count}


def _syscall_names() -> dict[int, str]:
    """x86-64 syscall numbers to names, from the kernel's unistd header if installed."""
    names = {}
    for header in (
        "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
        "/usr/include/asm/unistd_64.h",
    ):
        try:
            text = Path(header).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("__NR_"):
                names[int(parts[2])] = parts[1][5:]
        break
    return names


def _count(script: str, pid: int, window: list[float]) -> dict:
    names = _syscall_names()
    syscalls: dict[str, Counter] = {"flusher": Counter(), "appenders": Counter()}
    switches: dict[str, Counter] = {"flusher": Counter(), "appenders": Counter()}
    faults: Counter = Counter()
    ours: set[int] = set()
    preempted: list[tuple[str, int]] = []
    for line in script.splitlines():
        # comm  pid/tid  [cpu]  time:  event:  fields
        head, _, rest = line.partition(": ")
        parts = head.split()
        if len(parts) < 4 or "/" not in parts[1]:
            continue
        process, tid = (int(n) for n in parts[1].split("/"))
        at = float(parts[-1])
        if process != pid or not window[0] <= at <= window[1]:
            continue
        ours.add(tid)
        kind = "flusher" if parts[0].startswith(FLUSHER) else "appenders"
        event, _, fields = rest.strip().partition(": ")
        if event == "raw_syscalls:sys_enter":
            number = int(fields.split("NR ")[1].split()[0])
            syscalls[kind][names.get(number, str(number))] += 1
        elif event == "exceptions:page_fault_user":
            faults[kind] += 1
        elif event == "sched:sched_switch":
            prev, _, following = fields.partition(" ==> ")
            state = dict(field.split("=", 1) for field in prev.split() if "=" in field)
            if state.get("prev_state", "") in ("R", "R+"):
                switches[kind]["involuntary"] += 1
                after = dict(field.split("=", 1) for field in following.split() if "=" in field)
                preempted.append((kind, int(after.get("next_pid", -1))))
                if after.get("next_comm", "").startswith(FLUSHER):
                    switches[kind]["involuntary_to_flusher"] += 1
            else:
                switches[kind]["voluntary"] += 1
    # An involuntary switch to another thread of this process (the flusher or an
    # appender woken onto the CPU) is the workload's own; to anything else, the load's.
    for kind, following in preempted:
        switches[kind]["involuntary_to_ours" if following in ours else "involuntary_to_others"] += 1
    return {"syscalls": syscalls, "switches": switches, "faults": faults}


def traced_workload(
    events: str, size: int, count: int, threads: int, workdir: str | None, *, ns: bool
) -> tuple[dict, str]:
    """Run the workload in a child under ``perf record -e events``: its JSON result and the
    ``perf script`` text (stamped in ns when ``ns``)."""
    with tempfile.TemporaryDirectory(dir=workdir) as work:
        data = Path(work) / "perf.data"
        child = subprocess.run(
            ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-m", "16M", "-e", events]
            + ["-o", str(data), "--", sys.executable, __file__, "--size", str(size)]
            + ["--count", str(count), "--threads", str(threads), "--child", work],
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(child.stdout.strip().splitlines()[-1])
        fields = ["-F", "comm,pid,tid,cpu,time,event,trace"]
        script = subprocess.run(
            ["perf", "script", *(["--ns"] if ns else []), "-i", str(data), *fields],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return result, script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50, help="body size (compare.py: 50)")
    parser.add_argument("--count", type=int, default=16_000, help="messages in all")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    parser.add_argument("--threads", type=int, default=8, help="appending threads (8)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import os

        result = _workload(Path(args.child), args.size, args.count, args.threads)
        result["pid"] = os.getpid()
        print(json.dumps(result))
        return
    result, script = traced_workload(
        EVENTS, args.size, args.count, args.threads, args.dir, ns=False
    )
    counted = _count(script, result["pid"], result["window"])
    syncs = max(result["syncs"], 1)
    count = result["count"]
    out = {
        "size": args.size,
        "threads": args.threads,
        "count": count,
        "fdatasyncs": result["syncs"],
        "msgs_per_fdatasync": round(count / syncs, 2),
        "msgs_per_s": round(count / result["seconds"]),
    }
    for kind in ("flusher", "appenders"):
        calls = counted["syscalls"][kind]
        out[f"{kind}_syscalls_per_fdatasync"] = round(sum(calls.values()) / syncs, 2)
        out[f"{kind}_syscalls_by_name_per_fdatasync"] = {
            name: round(n / syncs, 2) for name, n in calls.most_common()
        }
        moved = counted["switches"][kind]
        out[f"{kind}_page_faults_per_fdatasync"] = round(counted["faults"][kind] / syncs, 2)
        out[f"{kind}_switches_per_fdatasync"] = {
            how: round(moved[how] / syncs, 2) for how in SWITCHES
        }
    out["switches_per_msg"] = {
        how: round(
            sum(counted["switches"][kind][how] for kind in ("flusher", "appenders")) / count, 3
        )
        for how in SWITCHES
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
