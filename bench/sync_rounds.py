"""The 8-thread sync figure's rounds, step by step, from the kernel's timestamps.

    .venv/bin/python bench/sync_rounds.py [--size 50] [--count 16000] [--threads 8] [--dir PATH]

Runs bench/sync_counts.py's workload (8 threads of single sync ``append``s into a new sync
store) under ``perf record`` with the tracepoints ``syscalls:sys_enter_fdatasync``,
``syscalls:sys_exit_fdatasync``, ``sched:sched_waking`` (in the waker's context: who woke
whom) and ``sched:sched_switch`` (when a woken thread got a CPU), and splits each round,
from one flusher fdatasync's start to the next one's, into:

* ``fdatasync``: the flusher's fdatasync, entry to exit;
* ``flusher_after``: its exit until the flusher wakes the round's first appender (the
  watermark, marking the covered, the wake itself);
* ``first_run_delay``: that appender's wake until it is on a CPU;
* ``chain``: that appender on a CPU until the flusher is woken again (by the last of
  the group to register, or by its timer): the group's re-appends, one hand-off each;
* ``flusher_run_delay``: the flusher's wake until it is on a CPU;
* ``flusher_before``: the flusher on a CPU until its next fdatasync starts.

and the chain's hand-offs (one appender waking another, ``hop_*``): the wakee's delay
until it is on a CPU, and from then until it wakes the next one (its Python, its append,
its registration). Medians and means in µs over the rounds that show every step; the
tracing itself adds a few µs a traced event. ``any_thread``: the same rounds whichever
thread ran each fdatasync (the flusher, or an appender leading its group's round: sync31-s51),
split only into the fdatasync and the gap after it, with the appender-to-appender wakes in
the gap and the share of fdatasyncs an appender ran; and where the gap goes (sync31-s54):
the share of those wakes whose wakee got the waker's own CPU and each kind's wait for it
(``hop_delay_wakers_cpu_us``, ``hop_delay_other_cpu_us``), the fdatasync's thread from its
exit to its first wake of an appender (a leader's path after its round:
``leader_exit_to_its_first_wake_us``), the gap's mean, and the gaps with and without a
spell of the flusher on a CPU in them. Prints one JSON line. Needs perf and the
tracepoints (root, or perf_event_paranoid permitting).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import sync_counts  # noqa: E402

EVENTS = (
    "syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync,sched:sched_waking,sched:sched_switch"
)
FLUSHER = sync_counts.FLUSHER
STEPS = (
    "fdatasync",
    "flusher_after",
    "first_run_delay",
    "chain",
    "flusher_run_delay",
    "flusher_before",
)


def _fields(text: str) -> dict[str, str]:
    return dict(field.split("=", 1) for field in text.split() if "=" in field)


def _parse(script: str, pid: int, window: list[float]) -> dict:
    """The process's events inside the window, by kind, in time order."""
    syncs: list[tuple[float, str]] = []  # (time, "enter" | "exit"), the flusher's
    every_sync: list[tuple[float, str, int]] = []  # (time, "enter" | "exit", tid), any thread's
    wakings: list[tuple[float, int, int]] = []  # (time, waker tid, wakee tid)
    switch_in: dict[int, list[float]] = {}
    # The same switches with the CPU each thread got (time, cpu), the CPU of each waker
    # at its waking (by time, as wakings), and the flusher's spells on a CPU (in, out).
    switch_in_cpu: dict[int, list[tuple[float, int]]] = {}
    waker_cpu: list[int] = []
    flusher_spells: list[tuple[float, float]] = []
    flusher_in: float | None = None
    flusher = -1
    tids: set[int] = set()
    lines = []
    for line in script.splitlines():
        head, _, rest = line.partition(": ")
        parts = head.split()
        if len(parts) < 4 or "/" not in parts[1]:
            continue
        process, tid = (int(n) for n in parts[1].split("/"))
        at = float(parts[-1])
        if not window[0] <= at <= window[1]:
            continue
        if process == pid:
            tids.add(tid)
            if parts[0].startswith(FLUSHER):
                flusher = tid
        event, _, fields = rest.strip().partition(": ")
        cpu = int(parts[-2].strip("[]")) if parts[-2].startswith("[") else -1
        lines.append((at, process, tid, cpu, event, fields))
    for at, process, tid, cpu, event, fields in lines:
        if event.startswith("syscalls:sys_"):
            kind = "enter" if "enter" in event else "exit"
            if process == pid:
                every_sync.append((at, kind, tid))
            if tid == flusher:
                syncs.append((at, kind))
        elif event == "sched:sched_waking":
            wakee = int(_fields(fields).get("pid", -1))
            if wakee in tids:
                wakings.append((at, tid if process == pid else 0, wakee))
                waker_cpu.append(cpu)
        elif event == "sched:sched_switch":
            _prev, _, following = fields.partition(" ==> ")
            nxt = int(_fields(following).get("next_pid", -1))
            if tid == flusher and flusher_in is not None:
                flusher_spells.append((flusher_in, at))
                flusher_in = None
            if nxt in tids:
                switch_in.setdefault(nxt, []).append(at)
                switch_in_cpu.setdefault(nxt, []).append((at, cpu))
                if nxt == flusher:
                    flusher_in = at
    return {
        "syncs": syncs,
        "every_sync": every_sync,
        "wakings": wakings,
        "switch_in": switch_in,
        "switch_in_cpu": switch_in_cpu,
        "waker_cpu": waker_cpu,
        "flusher_spells": flusher_spells,
        "flusher": flusher,
    }


def _any_rounds(parsed: dict) -> dict:
    """Rounds from one fdatasync's start to the next one's, whichever thread ran each
    (the flusher, or an appender leading its group's round): the fdatasync, the gap to
    the next one, the wakes of one appender by another inside the gap, and the share
    of fdatasyncs an appender ran."""
    import bisect

    flusher = parsed["flusher"]
    wakings = parsed["wakings"]
    waking_at = [w[0] for w in wakings]
    pairs = []
    started: dict[int, float] = {}
    for at, kind, tid in parsed["every_sync"]:
        if kind == "enter":
            started[tid] = at
        elif tid in started:
            pairs.append((started.pop(tid), at, tid))
    pairs.sort()
    waker_cpu = parsed["waker_cpu"]
    switch_in_cpu = parsed["switch_in_cpu"]
    spells = parsed["flusher_spells"]
    spell_at = [spell[0] for spell in spells]
    rounds: dict[str, list[float]] = {"round": [], "fdatasync": [], "gap": []}
    hops: list[int] = []
    # Where the gap goes (sync31-s54): each hop by the CPU its wakee got (the waker's
    # or the other) and its wait for it, the fdatasync's thread from its exit to its
    # first wake of an appender (a leader's path), and the gaps with and without a
    # spell of the flusher on a CPU.
    delay: dict[str, list[float]] = {"wakers_cpu": [], "other_cpu": []}
    # Each hop's place in its gap (0: the first wake after the fdatasync) and whether
    # its wakee got the other CPU, and each gap's sum of other-CPU waits (sync31-s58).
    by_place: dict[int, list[int]] = {}
    other_wait_a_gap: list[float] = []
    leader_path: list[float] = []
    gaps_by_flusher: dict[str, list[float]] = {"with": [], "without": []}

    def ran_on(tid: int, at: float) -> tuple[float, int] | None:
        times = switch_in_cpu.get(tid, [])
        i = bisect.bisect_left(times, (at, -1))
        return times[i] if i < len(times) else None

    for (enter, exited, tid), (next_enter, _, _) in zip(pairs, pairs[1:], strict=False):
        if next_enter < exited:
            continue  # overlapping fdatasyncs: not a round of this mechanism
        rounds["round"].append(next_enter - enter)
        rounds["fdatasync"].append(exited - enter)
        rounds["gap"].append(next_enter - exited)
        lo = bisect.bisect_left(waking_at, exited)
        hi = bisect.bisect_left(waking_at, next_enter)
        inside = [
            (w, waker_cpu[lo + k])
            for k, w in enumerate(wakings[lo:hi])
            if w[1] not in (0, flusher) and w[2] != flusher
        ]
        hops.append(len(inside))
        firsts = [w[0] for w, _cpu in inside if w[1] == tid]
        if tid != flusher and firsts:
            leader_path.append(firsts[0] - exited)
        other_wait = 0.0
        for place, ((at, _waker, wakee), cpu) in enumerate(inside):
            ran = ran_on(wakee, at)
            if ran is None or ran[0] > next_enter:
                continue
            delay["wakers_cpu" if ran[1] == cpu else "other_cpu"].append(ran[0] - at)
            by_place.setdefault(place, []).append(int(ran[1] != cpu))
            if ran[1] != cpu:
                other_wait += ran[0] - at
        other_wait_a_gap.append(other_wait)
        first = bisect.bisect_left(spell_at, exited - 0.01)
        ran_in_gap = False
        for spell_in, spell_out in spells[first:]:
            if spell_in >= next_enter:
                break
            if spell_out > exited:
                ran_in_gap = True
                break
        gaps_by_flusher["with" if ran_in_gap else "without"].append(next_enter - exited)

    def median(values: list[float]) -> float | None:
        return round(statistics.median(values) * 1e6, 1) if values else None

    def mean(values: list[float]) -> float | None:
        return round(statistics.fmean(values) * 1e6, 1) if values else None

    hop_count = max(len(delay["wakers_cpu"]) + len(delay["other_cpu"]), 1)
    where = {
        "hops_wakee_on_the_wakers_cpu": round(len(delay["wakers_cpu"]) / hop_count, 3),
        **{
            f"hop_delay_{name}_us": {"median": median(values), "mean": mean(values)}
            for name, values in delay.items()
        },
        "leader_exit_to_its_first_wake_us": {
            "median": median(leader_path),
            "mean": mean(leader_path),
        },
        "gaps_with_a_flusher_spell": round(
            len(gaps_by_flusher["with"]) / max(len(rounds["gap"]), 1), 3
        ),
        **{
            f"gap_{name}_a_flusher_spell_us": median(values)
            for name, values in gaps_by_flusher.items()
        },
        "gap_mean_us": mean(rounds["gap"]),
        "other_cpu_wait_a_gap_us": mean(other_wait_a_gap),
        "other_cpu_share_by_place": {
            str(place): round(statistics.fmean(flags), 3)
            for place, flags in sorted(by_place.items())
            if place < 8
        },
    }

    return {
        "fdatasyncs_seen": len(pairs),
        "by_an_appender": round(sum(1 for p in pairs if p[2] != flusher) / max(len(pairs), 1), 3),
        **{f"{name}_us": median(values) for name, values in rounds.items()},
        "round_p90_us": round(statistics.quantiles(rounds["round"], n=10)[-1] * 1e6, 1)
        if len(rounds["round"]) > 1
        else None,
        "appender_wakes_an_appender_a_gap": round(statistics.fmean(hops), 2) if hops else None,
        **where,
    }


def _rounds(parsed: dict) -> dict:
    import bisect

    flusher = parsed["flusher"]
    syncs = parsed["syncs"]
    wakings = parsed["wakings"]
    switch_in = parsed["switch_in"]
    waking_at = [w[0] for w in wakings]

    def run_at(tid: int, at: float) -> float | None:
        times = switch_in.get(tid, [])
        i = bisect.bisect_left(times, at)
        return times[i] if i < len(times) else None

    spans = []
    i = 0
    while i + 1 < len(syncs) and syncs[i][1] != "enter":
        i += 1
    pairs = []
    while i + 1 < len(syncs):
        if syncs[i][1] == "enter" and syncs[i + 1][1] == "exit":
            pairs.append((syncs[i][0], syncs[i + 1][0]))
            i += 2
        else:
            i += 1
    steps: dict[str, list[float]] = {name: [] for name in STEPS}
    hop_delay: list[float] = []
    hop_run: list[float] = []
    hops_a_round: list[int] = []
    timer_woken = 0
    skipped = 0
    not_woken = 0
    for (enter, exited), (next_enter, _) in zip(pairs, pairs[1:], strict=False):
        lo = bisect.bisect_left(waking_at, exited)
        hi = bisect.bisect_left(waking_at, next_enter)
        inside = wakings[lo:hi]
        first = next((w for w in inside if w[1] == flusher and w[2] != flusher), None)
        woke_flusher = [w for w in inside if w[2] == flusher]
        if first is None or not woke_flusher:
            # Not woken by one of the process's threads: by its timer (the gather's
            # window ran out), whose wake is recorded on no thread of the process.
            skipped += 1
            not_woken += first is not None and not woke_flusher
            continue
        last = woke_flusher[-1]
        first_run = run_at(first[2], first[0])
        flusher_run = run_at(flusher, last[0])
        if first_run is None or flusher_run is None or flusher_run > next_enter:
            skipped += 1
            continue
        if last[1] == 0:
            timer_woken += 1
        steps["fdatasync"].append(exited - enter)
        steps["flusher_after"].append(first[0] - exited)
        steps["first_run_delay"].append(first_run - first[0])
        steps["chain"].append(last[0] - first_run)
        steps["flusher_run_delay"].append(flusher_run - last[0])
        steps["flusher_before"].append(next_enter - flusher_run)
        hops = [w for w in inside if w[1] not in (0, flusher) and w[2] != flusher]
        hops_a_round.append(len(hops))
        for at, _waker, wakee in hops:
            ran = run_at(wakee, at)
            if ran is None or ran > next_enter:
                continue
            hop_delay.append(ran - at)
            onward = next((w[0] for w in hops if w[1] == wakee and w[0] >= ran), None)
            if onward is None:
                onward = next((w[0] for w in woke_flusher if w[1] == wakee and w[0] >= ran), None)
            if onward is not None:
                hop_run.append(onward - ran)
        spans.append(next_enter - enter)

    def summary(values: list[float]) -> dict:
        if len(values) < 2:
            return {"median": None, "mean": None, "p90": None}
        return {
            "median": round(statistics.median(values) * 1e6, 1),
            "mean": round(statistics.fmean(values) * 1e6, 1),
            "p90": round(statistics.quantiles(values, n=10)[-1] * 1e6, 1),
        }

    return {
        "rounds": len(spans),
        "rounds_skipped": skipped,
        "rounds_flusher_not_woken_by_a_thread": not_woken,
        "rounds_flusher_woken_by_timer": timer_woken,
        "round_us": summary(spans),
        "steps_us": {name: summary(values) for name, values in steps.items()},
        "appender_wakes_an_appender_a_round": round(statistics.fmean(hops_a_round), 2)
        if hops_a_round
        else None,
        "hop_run_delay_us": summary(hop_delay),
        "hop_on_cpu_until_next_wake_us": summary(hop_run),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50, help="body size (compare.py: 50)")
    parser.add_argument("--count", type=int, default=16_000, help="messages in all")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    parser.add_argument("--threads", type=int, default=8, help="appending threads (8)")
    args = parser.parse_args()
    result, script = sync_counts.traced_workload(
        EVENTS, args.size, args.count, args.threads, args.dir, ns=True
    )
    parsed = _parse(script, result["pid"], result["window"])
    rounds = _rounds(parsed)
    rounds["any_thread"] = _any_rounds(parsed)
    syncs = max(result["syncs"], 1)
    print(
        json.dumps(
            {
                "size": args.size,
                "threads": args.threads,
                "count": result["count"],
                "fdatasyncs": result["syncs"],
                "msgs_per_fdatasync": round(result["count"] / syncs, 2),
                "msgs_per_s": round(result["count"] / result["seconds"]),
                **rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
