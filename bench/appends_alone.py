"""bench/engine.py's single-append and batch loops, run alone against one checkout, to
compare two checkouts in the same minute (docs/PERFORMANCE.md, issue 31):

    .venv/bin/python bench/appends_alone.py CHECKOUT single|batch [COUNT]

Appends COUNT (default 200,000) 50 B bodies in async mode to a new store of the engine
in CHECKOUT (run from CHECKOUT's root, so its packages are the ones imported) and
prints the rate and the loop's CPU per append. System calls per append: run
``strace -c -f`` over it with COUNT and with 0 "single" appends, and subtract.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] not in ("single", "batch"):
        sys.exit(__doc__)
    root, kind = Path(sys.argv[1]).resolve(), sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    sys.path[:0] = [str(root), str(root / "bench")]
    import engine as bench

    from storeadapter.engine import MessageStore, StoreConfig

    work = Path(tempfile.mkdtemp())
    try:
        store = MessageStore.open(work / "s", StoreConfig(flush_mode="async"))
        store.create_topic(bench.TOPIC, queues=bench.QUEUES)
        loop = bench._append_single if kind == "single" else bench._append_batches
        started = time.process_time()
        seconds = loop(store, [b"x" * 50] * count)
        cpu = time.process_time() - started
        store.close()
    finally:
        shutil.rmtree(work)
    print(f"{root.name} {kind}: {count / seconds:,.0f} msgs/s, {cpu / count * 1e6:.2f} µs CPU each")


if __name__ == "__main__":
    main()
