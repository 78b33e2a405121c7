"""Instructions a console request, page by page, under callgrind, trees side by side.

    .venv/bin/python bench/page_instructions.py --tree /work/base-64399ea --tree . [options]

The low-noise figure for issue 29's "nothing else slower: the console pages" (CPU time on a
shared machine moves ±5–10 % a round; instruction counts of one tree agree within 0.5 %).
For each ``--tree`` (in turn, ``--rounds`` times, the order alternated) it runs, under
``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`` and with
``PYTHONHASHSEED=0``, bench/nothing_slower.py's pages driver (its quick-scale store: 100
topics, 1,000 queues, 20 groups; a superuser; ``DEBUG=true``) importing the engine and the
console from that tree (``PYTHONPATH=<tree>``), so an old tree is measured by its own code.
Instrumentation starts after the store is built and Django set up; then ``--warm`` rounds of
every page, then for each page collection is switched on around ``--requests`` requests of
it and the counts dumped under the page's name (a small C helper calling
``CALLGRIND_TOGGLE_COLLECT`` / ``CALLGRIND_DUMP_STATS_AT``, compiled with gcc into a
temporary directory and called through ctypes). User-space instructions only.

Prints a table (millions of instructions a request; each tree's ratio to the first) and one
JSON line; ``--keep DIR`` keeps each run's dumps (one file a page, named by the page in its
``desc: Trigger`` line) for ``callgrind_annotate``. Figures only: no test asserts them.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPER_C = """\
#include <valgrind/callgrind.h>
void tm_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void tm_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void tm_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""
QUICK = {"topics": 100, "queues": 1_000, "groups": 20}


def build_helper(directory: Path) -> Path:
    """The callgrind client-request helper as a shared library in ``directory``."""
    source, library = directory / "cg_helper.c", directory / "cg_helper.so"
    source.write_text(HELPER_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True)
    return library


def load_driver():
    """bench/nothing_slower.py, loaded by path (bench/console.py would shadow `console`)."""
    spec = importlib.util.spec_from_file_location("nothing_slower", HERE / "nothing_slower.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(args) -> None:
    """Inside valgrind: build the store, then the counted requests of each page."""
    helper = ctypes.CDLL(args.helper)
    helper.tm_dump.argtypes = [ctypes.c_char_p]
    driver = load_driver()
    workdir = Path(args.workdir)
    store_dir = workdir / "store"
    driver.build_console_store(store_dir, **QUICK)
    client = driver.setup_django(workdir, store_dir)
    pages = [(n, u) for n, u in driver.console_pages() if not args.page or n in args.page]
    helper.tm_start()

    def get(url: str) -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")

    for _ in range(args.warm):
        for _name, url in pages:
            get(url)
    for name, url in pages:
        helper.tm_toggle()
        for _ in range(args.requests):
            get(url)
        helper.tm_toggle()
        helper.tm_dump(name.encode())
    from storeadapter.access import close_all

    close_all()


def read_dumps(directory: Path) -> dict[str, int]:
    """Page name -> instructions, from the dump files callgrind wrote into ``directory``."""
    counts: dict[str, int] = {}
    for path in sorted(directory.glob("callgrind.out.*")):
        text = path.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        total = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
        if trigger and total:
            counts[trigger.group(1).strip()] = int(total.group(1))
    return counts


def measure(label: str, tree: Path, helper: Path, args) -> dict[str, float]:
    """One run of ``tree`` under callgrind: millions of instructions a request, per page."""
    with tempfile.TemporaryDirectory(prefix="pageinstr-") as temp:
        workdir = Path(temp)
        out = workdir / "cg"
        out.mkdir()
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--callgrind-out-file={out}/callgrind.out.%p",
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            "--helper",
            str(helper),
            "--workdir",
            str(workdir),
            "--warm",
            str(args.warm),
            "--requests",
            str(args.requests),
        ]
        for page in args.page or ():
            command += ["--page", page]
        run = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"{tree}: exit {run.returncode}\n{run.stderr[-4000:]}")
        counts = read_dumps(out)
        if not counts or not all(counts.values()):
            # (seen once: every page 0, the run otherwise clean; measure again)
            raise SystemExit(
                f"{tree}: a page counted no instructions: {counts}\n{run.stderr[-4000:]}"
            )
        if args.keep:
            kept = Path(args.keep) / f"{label}-{len(list(Path(args.keep).glob(label + '-*')))}"
            shutil.copytree(out, kept)
    return {name: count / args.requests / 1e6 for name, count in counts.items()}


def table(trees: list[str], figures: dict[str, list[dict[str, float]]]) -> str:
    """Median over the rounds of each tree, millions a request, ratio to the first tree."""
    medians = {
        tree: {page: sorted(r[page] for r in runs)[len(runs) // 2] for page in runs[0]}
        for tree, runs in figures.items()
    }
    first = trees[0]
    header = ["page", *trees, *(f"{t} / {first}" for t in trees[1:])]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    pages = list(medians[first])
    for page in [*pages, "all pages"]:
        if page == "all pages":
            row = {t: sum(medians[t].values()) for t in trees}
        else:
            row = {t: medians[t][page] for t in trees}
        cells = [f"{row[t]:.2f}" for t in trees] + [f"{row[t] / row[first]:.2f}" for t in trees[1:]]
        lines.append("| " + " | ".join([page, *cells]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tree", action="append", help="a tree to measure, PATH or LABEL=PATH (repeatable)"
    )
    parser.add_argument("--page", action="append", help="only this page (repeatable)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each tree, alternated")
    parser.add_argument("--warm", type=int, default=2, help="uncounted rounds of every page")
    parser.add_argument("--requests", type=int, default=5, help="counted requests a page")
    parser.add_argument(
        "--keep",
        help="keep each run's callgrind dumps in DIR/LABEL-N (for callgrind_annotate)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--helper", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        # bench/console.py would shadow the console package: nothing from this directory.
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
        child(args)
        return
    if not args.tree:
        parser.error("at least one --tree")
    paths = {}
    for given in args.tree:
        label, _, path = given.rpartition("=")
        paths[label or given] = Path(path).resolve()
    trees = list(paths)
    figures: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="pageinstr-helper-") as temp:
        helper = build_helper(Path(temp))
        for round_number in range(args.rounds):
            order = trees if round_number % 2 == 0 else trees[::-1]
            for tree in order:
                figures[tree].append(measure(tree, paths[tree], helper, args))
                print(f"round {round_number + 1}: {tree} done", file=sys.stderr, flush=True)
    print(table(trees, figures))
    trees_json = {t: str(p) for t, p in paths.items()}
    print(
        json.dumps(
            {"unit": "millions of instructions a request", "trees": trees_json, "runs": figures}
        )
    )


if __name__ == "__main__":
    main()
