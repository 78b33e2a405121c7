"""`get` and `get_many` by id over a store larger than one segment (issue 29's `get` target).

Two steps, so that a before/after runs each tree's copy of this file over one store:

* ``python bench/get_calls.py fill DIR``: 200,000 messages of 1 KiB (4 queues, batches of
  500, async, 32 MiB segments: seven segments, the ``bench/read_path.py`` shape), and the
  ids of 20,000 of them at random in ``DIR/ids.json``;
* ``python bench/get_calls.py run DIR N [--many K] [--hot]``: opens the store, makes one
  warm-up ``get``, then ``N`` gets of those ids in turn (``--hot``: of the first id
  again and again; ``--many K``: ``get_many`` of ``K`` ids at a time), and prints the
  process's CPU (``time.process_time``) per id. ``N`` = 0 does everything but the gets:
  under ``valgrind --tool=cachegrind`` the instructions of ``N`` gets less those of 0
  are the gets' own (the figure docs/PERFORMANCE.md compares, as the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

# The engine of the tree this file is in, as bench/read_path.py does.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

TOPIC = "bench"
QUEUES = 4
COUNT = 200_000
IDS = 20_000
CONFIG = StoreConfig(segment_bytes=32 << 20, flush_mode="async")


def fill(path: Path, size: int) -> None:
    rng = random.Random(size)
    bodies = [rng.randbytes(size) for _ in range(1000)]
    ids: list[str] = []
    with MessageStore.open(path, CONFIG) as store:
        store.create_topic(TOPIC, queues=QUEUES)
        for start in range(0, COUNT, 500):
            batch = [bodies[(start + i) % len(bodies)] for i in range(500)]
            ids.extend(result.message_id for result in store.append_batch(TOPIC, batch))
        store.flush()
    chosen = rng.sample(ids, IDS)
    (path / "ids.json").write_text(json.dumps(chosen))


def run(path: Path, count: int, many: int, hot: bool) -> None:
    ids = json.loads((path / "ids.json").read_text())
    with MessageStore.open(path, CONFIG) as store:
        store.get(ids[0])  # the first get binds `get` to the core and starts warming
        wanted = [ids[0]] * count if hot else (ids * (count // len(ids) + 1))[:count]
        started = time.process_time()
        if many:
            get_many = store.get_many
            for at in range(0, count, many):
                get_many(wanted[at : at + many])
        else:
            get = store.get
            for message_id in wanted:
                get(message_id)
        cpu = time.process_time() - started
    cpu_ns = cpu / max(count, 1) * 1e9
    print(json.dumps({"count": count, "many": many, "hot": hot, "cpu_ns": cpu_ns}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("fill", "run"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("count", type=int, nargs="?", default=IDS)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--many", type=int, default=0, help="get_many of this many ids a call")
    parser.add_argument("--hot", action="store_true", help="one id again and again")
    args = parser.parse_args()
    if args.step == "fill":
        fill(args.dir, args.size)
    else:
        run(args.dir, args.count, args.many, args.hot)


if __name__ == "__main__":
    main()
